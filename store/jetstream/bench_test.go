package jetstream

import (
	"context"
	"os"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/store"
	"github.com/warren-dev/warren/store/jetstream/natsembed"
	"github.com/warren-dev/warren/store/local"
	"github.com/warren-dev/warren/store/storetest"
)

// BenchmarkAppend compares appends/s of the stores on this machine, one
// log with one writer and 16 logs with one writer each, all durable
// (fsync / SyncAlways):
//
//	go test ./store/jetstream -run '^$' -bench Append -benchtime 2000x -count 3
//
// Records are about 200 bytes, as in the study's spike.
func BenchmarkAppend(b *testing.B) {
	for _, writers := range []int{1, 16} {
		b.Run("local/writers="+itoa(writers), func(b *testing.B) {
			s := local.New(local.Options{FS: faultfs.OS{}, Home: b.TempDir()})
			benchStore(b, s, writers)
		})
		b.Run("jetstream-R1/writers="+itoa(writers), func(b *testing.B) {
			srv := embed(b, natsembed.Options{Name: "n1"})
			nc, err := nats.Connect("", nats.InProcessServer(srv))
			if err != nil {
				b.Fatal(err)
			}
			defer nc.Close()
			benchStore(b, newStore(b, nc, "bench", srv), writers)
		})
		b.Run("jetstream-R3/writers="+itoa(writers), func(b *testing.B) {
			srvs, urls := startCluster(b)
			benchStore(b, clusterStore(b, urls, srvs, time.Minute), writers)
		})
	}
}

func itoa(n int) string { return strconv.Itoa(n) }

func benchStore(b *testing.B, s store.Store, writers int) {
	ctx := context.Background()
	logs := make([]store.Log, writers)
	for i := range logs {
		id := storetest.NewID(b)
		l, err := s.Own(ctx, id)
		if err != nil {
			b.Fatal(err)
		}
		defer l.Release(ctx)
		lg, err := s.OpenLog(ctx, id, store.LogOptions{Lease: l})
		if err != nil {
			b.Fatal(err)
		}
		defer lg.Close()
		logs[i] = lg
	}
	data := map[string]string{}
	data["text"] = "0123456789012345678901234567890123456789012345678901234567890123456789012345678901234567890123456789"
	b.ResetTimer()
	var wg sync.WaitGroup
	per := b.N / writers
	if per == 0 {
		per = 1
	}
	start := time.Now()
	for _, lg := range logs {
		wg.Add(1)
		go func(lg store.Log) {
			defer wg.Done()
			for i := 0; i < per; i++ {
				if _, err := lg.Append("bench.event", data); err != nil {
					b.Error(err)
					return
				}
			}
		}(lg)
	}
	wg.Wait()
	b.ReportMetric(float64(per*writers)/time.Since(start).Seconds(), "appends/s")
}

// BenchmarkLeasesAtRest measures what leases cost while nothing happens:
// N agents claimed with the default TTL, then the process's CPU time (the
// store's renewals and the embedded servers, all in this process) over
// 10 s of wall time, as CPU-seconds per second (1.0 is one core busy).
// "daemon" is how a daemon claims: the USER inbox first, on which every
// agent claim then rests (one renewal per TTL/3 in all); "keys" claims
// each agent with a key of its own, renewed every TTL/3 (a Store that
// holds no USER lease; every daemon did before):
//
//	go test ./store/jetstream -run '^$' -bench LeasesAtRest -benchtime 1x
//	WARREN_BENCH_LEASES=1000,10000 ... (the default: 1000)
func BenchmarkLeasesAtRest(b *testing.B) {
	counts := []int{1000}
	if v := os.Getenv("WARREN_BENCH_LEASES"); v != "" {
		counts = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(f)
			if err != nil || n <= 0 {
				b.Fatalf("WARREN_BENCH_LEASES=%q: a list of counts", v)
			}
			counts = append(counts, n)
		}
	}
	for _, n := range counts {
		for _, mode := range []string{"daemon", "keys"} {
			b.Run("R1/"+mode+"/leases="+itoa(n), func(b *testing.B) {
				srv := embed(b, natsembed.Options{Name: "n1"})
				s, err := New(context.Background(), Options{Conn: connect(b, srv.ClientURL()), Node: "n1", BootID: "b1", Embedded: srvs(srv), OwnerTTL: DefaultOwnerTTL})
				if err != nil {
					b.Fatal(err)
				}
				leasesAtRest(b, s, n, mode == "daemon")
			})
			b.Run("R3/"+mode+"/leases="+itoa(n), func(b *testing.B) {
				srvs, urls := startCluster(b)
				leasesAtRest(b, clusterStore(b, urls, srvs, DefaultOwnerTTL), n, mode == "daemon")
			})
		}
	}
}

func leasesAtRest(b *testing.B, s *Store, n int, daemon bool) {
	ctx := context.Background()
	if daemon {
		u, err := s.Own(ctx, store.UserID)
		if err != nil {
			b.Fatal(err)
		}
		defer u.Release(ctx)
	}
	leases := make([]store.Lease, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 32)
	for i := range leases {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			l, err := s.Own(ctx, storetest.NewID(b))
			if err != nil {
				b.Error(err)
				return
			}
			leases[i] = l
		}()
	}
	wg.Wait()
	if b.Failed() {
		return
	}
	b.ResetTimer()
	const rest = 10 * time.Second
	before := cpuTime(b)
	time.Sleep(rest) // the measurement is of doing nothing for this long
	used := cpuTime(b) - before
	b.ReportMetric(used.Seconds()/rest.Seconds(), "cpu-s/s")
	b.StopTimer()
	for _, l := range leases {
		select {
		case <-l.Lost():
			b.Errorf("a lease at rest was lost")
		default:
		}
		_ = l.Release(ctx)
	}
}

// cpuTime is the CPU time (user and system) this process has used.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
