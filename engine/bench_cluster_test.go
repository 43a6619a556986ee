package engine

// Benchmarks of the daemon on store/jetstream beside store/local (issue 15):
//
//	go test -run '^$' -bench 'BenchmarkStoreTurn' -benchtime 300x ./engine/
//	go test -run '^$' -bench 'BenchmarkRecoveryJetStream' -benchtime 1x -timeout 1h ./engine/
//
// scripts/bench-cluster.sh runs them with the raw fsync rate and the
// stores' appends/s and prints one table.
//
// BenchmarkStoreTurn: one agent, turns one after another through Core.Send
// with the inproc echo program (a turn end to end: turn.start, the
// response, turn.complete, all durable), on store/local (real disk), on
// one embedded sync-always NATS server (R1) and on three (R3). Reports
// turns/s and the p50/p99 of Send.
//
// BenchmarkRecoveryJetStream: fills a stream with a generated home's logs
// (genHome, 1,000 agents x 1,000 events unless WARREN_BENCH_JS_AGENTS and
// WARREN_BENCH_JS_EVENTS say less; agents a multiple of 100 or fewer than
// 100), imported line for line (jetstream.Log.Import) into one embedded
// server, then times NewCore+Recover on that stream with the server
// sync-always (every log claimed, read and folded; an agent.claimed
// appended to each).

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/warren-dev/warren/config"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/store"
	"github.com/warren-dev/warren/store/jetstream"
	"github.com/warren-dev/warren/store/jetstream/natsembed"
)

// benchJetStream starts n sync-always embedded servers (routed when n > 1)
// and opens a store on them with n replicas.
func benchJetStream(b testing.TB, n int) store.Store {
	b.Helper()
	var routes []string
	ports := make([]int, n)
	if n > 1 {
		for i := range ports {
			l, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				b.Fatal(err)
			}
			ports[i] = l.Addr().(*net.TCPAddr).Port
			_ = l.Close()
			routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", ports[i]))
		}
	}
	srvs := make([]*server.Server, n)
	errs := make(chan error, n)
	for i := range srvs {
		go func(i int) {
			o := natsembed.Options{Name: fmt.Sprintf("n%d", i+1), Dir: b.TempDir(), Port: -1, StartTimeout: time.Minute}
			if n > 1 {
				o.ClusterName, o.ClusterPort, o.Routes = "warren", ports[i], routes
			}
			srv, err := natsembed.Start(o)
			srvs[i] = srv
			errs <- err
		}(i)
	}
	for range srvs {
		if err := <-errs; err != nil {
			b.Fatal(err)
		}
	}
	var urls []string
	for _, s := range srvs {
		b.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
		urls = append(urls, s.ClientURL())
	}
	nc, err := nats.Connect(strings.Join(urls, ","), nats.MaxReconnects(-1))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	deadline := time.Now().Add(time.Minute)
	for {
		st, err := jetstream.New(context.Background(), jetstream.Options{Conn: nc, Node: "bench", BootID: newID(),
			Embedded: srvs, Replicas: n, Timeout: 15 * time.Second})
		if err == nil {
			return st
		}
		if time.Now().After(deadline) {
			b.Fatalf("opening the store on %d servers: %v", n, err)
		}
		time.Sleep(100 * time.Millisecond) // a new cluster elects its leaders: no event to wait for
	}
}

// benchOneServer starts one embedded server on dir (sync-always unless
// lazy) and opens a store on it.
func benchOneServer(b testing.TB, dir string, lazy bool) (*server.Server, store.Store) {
	b.Helper()
	srv, err := natsembed.Start(natsembed.Options{Name: "n1", Dir: dir, Port: -1, UnsafeLazyFsync: lazy, StartTimeout: time.Minute})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(nc.Close)
	st, err := jetstream.New(context.Background(), jetstream.Options{Conn: nc, Node: "bench", BootID: newID(),
		Embedded: []*server.Server{srv}, UnsafeLazyFsync: lazy, Timeout: 30 * time.Second})
	if err != nil {
		b.Fatal(err)
	}
	return srv, st
}

func BenchmarkStoreTurn(b *testing.B) {
	b.Run("local", func(b *testing.B) { benchStoreTurns(b, nil) })
	b.Run("jetstream-R1", func(b *testing.B) { benchStoreTurns(b, benchJetStream(b, 1)) })
	b.Run("jetstream-R3", func(b *testing.B) { benchStoreTurns(b, benchJetStream(b, 3)) })
}

func benchStoreTurns(b *testing.B, st store.Store) {
	dir := benchDir(b)
	c, err := NewCore(context.Background(), withDefaults(CoreOptions{
		FS: faultfs.OS{}, Home: filepath.Join(dir, "home"), Store: st,
		Providers:       map[string]provider.Provider{"inproc": inproc.New("inproc", inproc.Options{NativeResume: true})},
		DefaultProvider: "inproc", DefaultModel: "echo", Config: config.Default(), NoWake: true,
		Logger: hclog.NewNullLogger(),
	}))
	if err != nil {
		b.Fatal(err)
	}
	if _, err := c.Recover(context.Background()); err != nil {
		b.Fatal(err)
	}
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	}()
	id := benchAgents(b, c, 1, "t", "", "echo")[0]
	ctx := context.Background()
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		res, err := c.Send(ctx, id, "hello", "", "", nil)
		lat = append(lat, time.Since(t0))
		if err != nil || res.Err != nil || !strings.HasPrefix(res.Response, "echo: ") {
			b.Fatalf("turn %d: response %.100q, turn error %v, error %v", i, res.Response, res.Err, err)
		}
	}
	el := time.Since(start)
	b.StopTimer()
	sort.Slice(lat, func(i, j int) bool { return lat[i] < lat[j] })
	b.ReportMetric(float64(b.N)/el.Seconds(), "turns/s")
	b.ReportMetric(ms(percentile(lat, 50)), "p50-ms")
	b.ReportMetric(ms(percentile(lat, 99)), "p99-ms")
}

func envInt(b testing.TB, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n <= 0 {
		b.Fatalf("%s=%q: want a positive integer", name, v)
	}
	return n
}

func BenchmarkRecoveryJetStream(b *testing.B) {
	spec := homeSpec{Agents: envInt(b, "WARREN_BENCH_JS_AGENTS", 1000), EventsPerAgent: envInt(b, "WARREN_BENCH_JS_EVENTS", 1000), GroupSize: 100}
	if spec.Agents < spec.GroupSize {
		spec.GroupSize = spec.Agents
	}
	if spec.Agents%spec.GroupSize != 0 {
		b.Fatalf("WARREN_BENCH_JS_AGENTS=%d: give fewer than 100 or a multiple of 100", spec.Agents)
	}
	dir := benchDir(b)
	gen := filepath.Join(dir, "gen")
	t0 := time.Now()
	hs, err := genHome(faultfs.OS{}, gen, spec)
	if err != nil {
		b.Fatal(err)
	}
	b.Logf("generated %d agents, %d events, %.1f MB in %v", spec.Agents, hs.Events, float64(hs.Bytes)/1e6, time.Since(t0).Round(time.Millisecond))
	t0 = time.Now()
	st := filledServer(b, filepath.Join(dir, "nats"), gen)
	b.Logf("filled the stream in %v", time.Since(t0).Round(time.Millisecond))
	benchRecoveryModes(b, st, "R1", dir, spec, hs)
	if os.Getenv("WARREN_BENCH_JS_R3") == "1" {
		// Three sync-always servers in this process, filled through
		// migrate's path (each chunk replicated and fsynced: minutes).
		t0 = time.Now()
		st3 := benchJetStream(b, 3)
		if err := importHome(st3, gen); err != nil {
			b.Fatal(err)
		}
		b.Logf("filled the R3 stream in %v", time.Since(t0).Round(time.Millisecond))
		benchRecoveryModes(b, st3, "R3", filepath.Join(dir, "r3"), spec, hs)
	}
}

// filledServer imports the logs of the home at gen into one server whose
// files are in jsDir, and returns a store on that server started again
// with sync-always. The fill is setup, not the measure: it runs without
// sync-always (the study's default flush), then the server stops cleanly
// (flushing).
func filledServer(b *testing.B, jsDir, gen string) store.Store {
	srv, st := benchOneServer(b, jsDir, true)
	if err := importHome(st, gen); err != nil {
		b.Fatal(err)
	}
	_ = st.Close()
	srv.Shutdown()
	srv.WaitForShutdown()
	_, st = benchOneServer(b, jsDir, false)
	return st
}

// benchRecoveryModes times the recovery of the logs in st in three
// cases. fold: no checkpoint (every log folded from its first entry);
// clean-stop: the checkpoints a Close wrote (in the store's bucket);
// kill: the checkpoints a daemon killed after its recovery left.
func benchRecoveryModes(b *testing.B, st store.Store, replicas, dir string, spec homeSpec, hs homeStats) {
	for _, mode := range []string{"fold", "clean-stop", "kill"} {
		b.Run(fmt.Sprintf("agents=%d/events=%d/jetstream-%s/%s", spec.Agents, spec.EventsPerAgent, replicas, mode), func(b *testing.B) {
			var total time.Duration
			resumed := 0
			for i := 0; i < b.N; i++ {
				b.StopTimer()
				home := filepath.Join(dir, fmt.Sprintf("%s%d", mode, i))
				every := config.DefaultCheckpointEvery
				switch mode {
				case "fold":
					every = -1
				case "clean-stop":
					c := benchRecoverCore(b, st, home+"-before", every)
					ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
					_ = c.Close(ctx) // writes every checkpoint
					cancel()
				case "kill":
					c := benchRecoverCore(b, st, home+"-before", every)
					<-c.scrubbed // recovery's checkpoint pass is done
					c.Abandon()
				}
				b.StartTimer()
				start := time.Now()
				c := benchRecoverCore(b, st, home, every)
				total += time.Since(start)
				b.StopTimer()
				if c.report.Agents != spec.Agents || c.report.Pending != hs.Pending {
					b.Fatalf("recovery report %+v; want %d agents, %d pending", c.report, spec.Agents, hs.Pending)
				}
				resumed = c.report.Resumed
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
				_ = c.Close(ctx) // releases the claims for the next iteration
				cancel()
				b.StartTimer()
			}
			b.ReportMetric(total.Seconds()/float64(b.N), "s/recovery")
			b.ReportMetric(float64(hs.Events)/(total.Seconds()/float64(b.N)), "events/s")
			b.ReportMetric(float64(resumed), "from-checkpoints")
		})
	}
}

// benchRecoverCore makes a Core on st and recovers it, checking the
// report against the generated home's figures.
func benchRecoverCore(b *testing.B, st store.Store, home string, every int) *recoveredCore {
	c, err := NewCore(context.Background(), withDefaults(CoreOptions{
		FS: faultfs.OS{}, Home: home, Store: st, DefaultProvider: "inproc", DefaultModel: "echo",
		Providers: map[string]provider.Provider{"inproc": inproc.New("inproc", inproc.Options{NativeResume: true})},
		Config:    config.Default(), NoWake: true, Logger: hclog.NewNullLogger(), CheckpointEvery: every,
	}))
	if err != nil {
		b.Fatal(err)
	}
	rep, err := c.Recover(context.Background())
	if err != nil {
		b.Fatal(err)
	}
	if rep.Corrupt != 0 {
		b.Fatalf("recovery report %+v: none may be corrupt", rep)
	}
	return &recoveredCore{Core: c, report: rep}
}

// recoveredCore is a recovered Core with its report.
type recoveredCore struct {
	*Core
	report RecoveryReport
}

// importHome copies every log of the home at dir into st unchanged
// (migrate's path: jetstream.Log.Import, atomic chunks).
func importHome(st store.Store, dir string) error {
	ctx := context.Background()
	agents, err := os.ReadDir(filepath.Join(dir, "agents"))
	if err != nil {
		return err
	}
	for _, a := range agents {
		data, err := os.ReadFile(filepath.Join(dir, "agents", a.Name(), "events.jsonl"))
		if err != nil {
			return err
		}
		var lines [][]byte
		for len(data) > 0 {
			i := bytes.IndexByte(data, '\n')
			lines = append(lines, data[:i+1])
			data = data[i+1:]
		}
		lease, err := st.Own(ctx, a.Name())
		if err != nil {
			return err
		}
		lg, err := st.OpenLog(ctx, a.Name(), store.LogOptions{Lease: lease})
		if err != nil {
			return err
		}
		if err := lg.(*jetstream.Log).Import(lines); err != nil {
			return fmt.Errorf("importing %s: %w", a.Name(), err)
		}
		_ = lg.Close()
		if err := lease.Release(ctx); err != nil {
			return err
		}
	}
	return nil
}

// BenchmarkClusterAtRest measures what a recovered daemon's core costs on
// a cluster store while nothing happens: its USER lease's renewals, its
// takeover scan every TakeoverEvery, and the server's own idle work, all
// in this process (CPU-seconds per second over 10 s). Agents come from
// WARREN_BENCH_REST_AGENTS (default 1,000), each with a short log and
// nothing pending.
func BenchmarkClusterAtRest(b *testing.B) {
	spec := homeSpec{Agents: envInt(b, "WARREN_BENCH_REST_AGENTS", 1000), EventsPerAgent: 4, GroupSize: 100, NoPendingFill: true}
	dir := benchDir(b)
	gen := filepath.Join(dir, "gen")
	if _, err := genHome(faultfs.OS{}, gen, spec); err != nil {
		b.Fatal(err)
	}
	st := filledServer(b, filepath.Join(dir, "nats"), gen)
	c := benchRecoverCore(b, st, filepath.Join(dir, "home"), config.DefaultCheckpointEvery)
	defer func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		defer cancel()
		_ = c.Close(ctx)
	}()
	<-c.scrubbed
	b.ResetTimer()
	const rest = 10 * time.Second
	before := cpuTime()
	time.Sleep(rest) // the measurement is of doing nothing for this long
	used := cpuTime() - before
	b.ReportMetric(used.Seconds()/rest.Seconds(), "cpu-s/s")
	b.ReportMetric(float64(c.report.Agents), "agents")
}
