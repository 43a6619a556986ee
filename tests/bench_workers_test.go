package tests

// Remote worker benchmarks (issue 39): the built daemon on its embedded
// NATS server and `warren worker` processes on loopback, inproc "echo"
// agents, agent.send over the socket.
//
//	go test -run '^$' -bench 'WorkersTurns|WorkersSessions' -benchtime 3000x ./tests/
//	go test -run '^$' -bench 'WorkersKillToTurn' -benchtime 10x ./tests/
//
// BenchmarkWorkersTurns: 64 agents, one client each, with the sessions
// local (workers=0) or on 1, 2 and 4 workers: turns/s, p50 and p99; and
// one agent, one client (what a worker adds to a turn's latency).
// BenchmarkWorkersSessions: 256 live sessions over 4 workers (or local):
// the daemon's RSS. BenchmarkWorkersKillToTurn: an agent's worker is
// killed with SIGKILL, and the agent's next turn is answered (on the
// other worker) in kill_to_turn_s.

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// workersConfig is the benchmarks' daemon config: pools big enough that
// no session is evicted, quick retries.
const workersConfig = `{"pools": {"default": 512}, "retry_base_delay_ms": 20}`

func BenchmarkWorkersTurns(b *testing.B) {
	for _, c := range []struct{ workers, clients int }{{0, 1}, {1, 1}, {0, 64}, {1, 64}, {2, 64}, {4, 64}} {
		b.Run(fmt.Sprintf("workers=%d/clients=%d", c.workers, c.clients), func(b *testing.B) {
			workers := c.workers
			f := startFleetOf(b, "inproc", workers, 64, workersConfig)
			ids := make([]string, c.clients)
			for i := range ids {
				ids[i] = f.d.createAgent(fmt.Sprintf("a%d", i), "inproc", "echo", "")
			}
			send := func(id string) time.Duration {
				t0 := time.Now()
				res, err := f.d.Client().Call(context.Background(), "agent.send", map[string]any{"agent_id": id, "message": "hello"})
				if err != nil || !strings.HasPrefix(str(res["response"]), "echo: ") {
					b.Errorf("send: %v %v", res, err)
				}
				return time.Since(t0)
			}
			for _, id := range ids { // every session opened
				send(id)
			}
			if workers > 0 {
				if n := strings.Count(f.d.Output(), "session placed"); n < len(ids) {
					b.Fatalf("%d of %d sessions placed on workers", n, len(ids))
				}
			}
			var next atomic.Int64
			var mu sync.Mutex
			var lat []time.Duration
			var wg sync.WaitGroup
			b.ResetTimer()
			cpu0 := cpuSeconds(b, f.d.Pid())
			start := time.Now()
			for _, id := range ids {
				wg.Add(1)
				go func() {
					defer wg.Done()
					var mine []time.Duration
					for next.Add(1) <= int64(b.N) {
						mine = append(mine, send(id))
					}
					mu.Lock()
					lat = append(lat, mine...)
					mu.Unlock()
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "turns/s")
			// The daemon's own CPU per turn: what bounds the aggregate when
			// the workers and the clients have machines of their own.
			b.ReportMetric((cpuSeconds(b, f.d.Pid())-cpu0)*1e6/float64(b.N), "daemon_cpu_us/turn")
			b.ReportMetric(ms(percentile(lat, 50)), "p50_ms")
			b.ReportMetric(ms(percentile(lat, 99)), "p99_ms")
		})
	}
}

// BenchmarkWorkersSessions holds 256 live sessions, on 4 workers or
// local, and reports the daemon's resident memory.
func BenchmarkWorkersSessions(b *testing.B) {
	for _, workers := range []int{0, 4} {
		b.Run(fmt.Sprintf("workers=%d/sessions=256", workers), func(b *testing.B) {
			f := startFleetOf(b, "inproc", workers, 64, workersConfig)
			for i := range 256 {
				id := f.d.createAgent(fmt.Sprintf("a%d", i), "inproc", "echo", "")
				if _, err := f.d.Client().Call(context.Background(), "agent.send", map[string]any{"agent_id": id, "message": "hi"}); err != nil {
					b.Fatal(err)
				}
			}
			st := f.d.callN("daemon.status", nil)
			live := 0
			for _, p := range st["pools"].(map[string]any) {
				n, _ := strconv.Atoi(fmt.Sprint(p.(map[string]any)["live"]))
				live += n
			}
			if live != 256 {
				b.Fatalf("%d live sessions, want 256", live)
			}
			b.ReportMetric(rssMB(b, f.d.Pid()), "daemon_rss_mb")
			for range b.N { // the measurement is the state, not a loop
			}
		})
	}
}

// cpuSeconds is the CPU time (user and system) a process has used.
func cpuSeconds(b *testing.B, pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	// The fields after the command name (in parentheses, which may hold
	// spaces): utime and stime are the 14th and 15th of the line.
	rest := string(data[strings.LastIndexByte(string(data), ')')+2:])
	f := strings.Fields(rest)
	if len(f) < 13 {
		b.Fatalf("/proc/%d/stat: %q", pid, data)
	}
	ut, err1 := strconv.ParseFloat(f[11], 64)
	st, err2 := strconv.ParseFloat(f[12], 64)
	if err1 != nil || err2 != nil {
		b.Fatalf("/proc/%d/stat: %q", pid, data)
	}
	return (ut + st) / userHZ
}

// userHZ is the unit of /proc's CPU times: Linux reports them in
// 1/USER_HZ seconds, and USER_HZ is 100 on every architecture.
const userHZ = 100

// rssMB is a process's VmRSS in MiB.
func rssMB(b *testing.B, pid int) float64 {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		b.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err != nil {
				b.Fatal(err)
			}
			return float64(kb) / 1024
		}
	}
	b.Fatal("no VmRSS")
	return 0
}

// BenchmarkWorkersKillToTurn: an agent on w1; w1 is killed with SIGKILL
// (its connection closes: the daemon finds no responder at once), or
// frozen with SIGSTOP (a machine that vanished: only the missing
// heartbeats tell, after remote.LiveFor); the time until the agent's
// next turn is answered, on w2.
func BenchmarkWorkersKillToTurn(b *testing.B) {
	for _, sig := range []syscall.Signal{syscall.SIGKILL, syscall.SIGSTOP} {
		b.Run("signal="+strings.TrimPrefix(unix.SignalName(sig), "SIG"), func(b *testing.B) {
			f := startFleetOf(b, "inproc", 0, 4, workersConfig)
			var total time.Duration
			for i := range b.N {
				listed := f.listed()
				f.start("w1", 4)
				f.waitListed("w1", listed["w1"])
				id := f.d.createAgent(fmt.Sprintf("a%d", i), "inproc", "echo", "") // the only worker: w1
				f.start("w2", 4)
				f.waitListed("w2", listed["w2"])
				f.d.callN("agent.send", map[string]any{"agent_id": id, "message": "before"})
				t0 := time.Now()
				f.signal("w1", sig)
				res := f.d.callN("agent.send", map[string]any{"agent_id": id, "message": "after"})
				total += time.Since(t0)
				if !strings.HasPrefix(str(res["response"]), "echo: ") {
					b.Fatalf("after the signal: %v", res)
				}
				f.kill9("w1")
				f.kill9("w2")
			}
			b.ReportMetric(total.Seconds()/float64(b.N), "kill_to_turn_s")
		})
	}
}

// percentile is the p-th percentile of ds (sorted in place).
func percentile(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	slices.Sort(ds)
	return ds[min(len(ds)-1, len(ds)*p/100)]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkWorkspaceTurn: one agent with a workspace (workScript, which
// appends two lines to a file each turn), its session on a worker with
// the workspace moving through an agents' remote on this disk
// (workspace=worker), or on the daemon's machine in its worktree
// (workspace=local, a worker listed but the entry without a remote): a
// turn's latency through the socket, p50 and p99.
//
//	go test -run '^$' -bench 'WorkspaceTurn' -benchtime 200x ./tests/
func BenchmarkWorkspaceTurn(b *testing.B) {
	for _, away := range []bool{false, true} {
		name := "workspace=local"
		if away {
			name = "workspace=worker"
		}
		b.Run(name, func(b *testing.B) {
			f := newAwayFleet(b, 1, away)
			f.create(b)
			ds := make([]time.Duration, 0, b.N)
			for i := 0; b.Loop(); i++ {
				t0 := time.Now()
				res, err := f.d.Client().Call(context.Background(), "agent.send", map[string]any{"agent_id": f.agent, "message": "t" + strconv.Itoa(i)})
				ds = append(ds, time.Since(t0))
				if onWorker := strings.HasPrefix(str(res["response"]), f.workers["w1"].home); err != nil || onWorker != away {
					b.Fatalf("turn %d: %v %v (on the worker: %v, want %v)", i, res, err, onWorker, away)
				}
			}
			slices.Sort(ds)
			b.ReportMetric(ms(percentile(ds, 50)), "p50_ms")
			b.ReportMetric(ms(percentile(ds, 99)), "p99_ms")
		})
	}
}
