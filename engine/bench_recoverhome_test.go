package engine

// Recovery of an existing home, in-process, for profiling (issue 16): the
// full fold of every log (no checkpoints read or written), with the soft
// memory limit the warren binary sets. Nothing in the home changes.
//
//	WARREN_BENCH_RECOVER_HOME=/copy/of/a/home go test -run '^$' -bench BenchmarkRecoverHome \
//	    -benchtime 1x -cpuprofile cpu.out ./daemon/
//
// WARREN_BENCH_RECOVER_CHECKPOINTS=1 recovers from the home's checkpoints
// instead (what a start after a clean stop or a kill -9 does; the scrub
// may then rewrite checkpoints of logs it folded lines of).
//
// Metrics: wall_s and cpu_s per recovery, and others_cpu_s, the CPU the
// rest of the machine used meanwhile (the machine may be shared: a fold
// that gets one core of two shows cpu_s close to wall_s).

import (
	"context"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/config"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/inproc"
)

// recoverHomeMemoryLimit is daemon.DefaultMemoryLimit, the soft limit the
// warren binary runs under (engine cannot import daemon).
const recoverHomeMemoryLimit = 192 << 20

func BenchmarkRecoverHome(b *testing.B) {
	home := os.Getenv("WARREN_BENCH_RECOVER_HOME")
	if home == "" {
		b.Skip("set WARREN_BENCH_RECOVER_HOME to a home to recover (a copy: its logs are opened for writing)")
	}
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(recoverHomeMemoryLimit))
	for i := 0; i < b.N; i++ {
		others0, cpu0, start := machineCPU(), cpuTime(), time.Now()
		rchar0, disk0 := selfIO(b)
		c, err := NewCore(context.Background(), withDefaults(CoreOptions{
			FS: faultfs.OS{}, Home: home, DefaultProvider: "inproc", DefaultModel: "echo",
			Providers: map[string]provider.Provider{"inproc": inproc.New("inproc", inproc.Options{NativeResume: true})},
			Config:    config.Default(), NoWake: true, Logger: hclog.NewNullLogger(), CheckpointEvery: ckptEveryForBench(),
		}))
		if err != nil {
			b.Fatal(err)
		}
		rep, err := c.Recover(context.Background())
		wall, cpu := time.Since(start), cpuTime()-cpu0
		others := machineCPU() - others0 - cpu
		if err != nil {
			b.Fatal(err)
		}
		b.Logf("%+v", rep)
		b.ReportMetric(wall.Seconds(), "wall_s")
		b.ReportMetric(cpu.Seconds(), "cpu_s")
		b.ReportMetric(others.Seconds(), "others_cpu_s")
		rchar, disk := selfIO(b)
		b.ReportMetric(float64(rchar-rchar0)/(1<<20), "read_MB")
		b.ReportMetric(float64(disk-disk0)/(1<<20), "disk_read_MB")
		if err := c.Close(context.Background()); err != nil {
			b.Fatal(err)
		}
	}
}

// ckptEveryForBench is the CheckpointEvery WARREN_BENCH_RECOVER_CHECKPOINTS
// selects: the default (read them) or none.
func ckptEveryForBench() int {
	if os.Getenv("WARREN_BENCH_RECOVER_CHECKPOINTS") != "" {
		return 0
	}
	return -1
}

// selfIO returns the bytes this process has read through read calls
// (rchar: page cache included) and from the disk (read_bytes), from
// /proc/self/io.
func selfIO(b *testing.B) (rchar, disk int64) {
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, _ := strings.Cut(line, ": ")
		n, _ := strconv.ParseInt(v, 10, 64)
		switch k {
		case "rchar":
			rchar = n
		case "read_bytes":
			disk = n
		}
	}
	return rchar, disk
}
