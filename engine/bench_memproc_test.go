package engine

// Memory benchmark (issue 16): the real daemon binary, started as a
// subprocess on a generated home, recovers it and is then driven with turns
// and evictions over its socket. It reports the time from the process start
// to the first answered daemon.status (time to serve), the peak RSS
// (VmHWM of /proc/<pid>/status) when it starts serving and after the
// driving, and the RSS after the driving.
//
//	WARREN_BENCH_HOME=/work/bh go test -run '^$' -bench 'BenchmarkMemory' -benchtime 1x -timeout 2h ./engine/
//
// WARREN_BENCH_HOME keeps each generated home under <dir>/<name> for later
// runs (generating several GB takes minutes); keep the path short, the
// socket path is limited to 107 bytes. WARREN_BENCH_MEMORY_HOMES selects
// homes by name (comma-separated; default all), WARREN_BENCH_TURNS the
// number of turns driven (default 256), WARREN_BENCH_BINARY a warren
// binary to measure instead of one built from this tree (an older
// version, for a before/after table).
//
// Every home is measured four times (WARREN_BENCH_MEMORY_PHASES selects
// some of first,next,killed,lagged): its first start, on the home as
// generated (no checkpoints: also the first start after an upgrade; the
// driven agents' files are put back as generated before it); its next
// start, on what the first left (checkpoints, and the driven agents'
// sessions); a start after a kill -9 in the middle of driven turns, on the
// home as the killed daemon left it (killed); and the same with every
// checkpoint then moved back 0-255 entries, the worst case (lagged; see
// bench_killed_test.go). Time to serve is also reported to the first
// answered agent.send, with the CPU the rest of the machine used meanwhile
// and the load average (the machine may be shared).
//
// The homes:
//
//	agents10k            10,000 agents x 1,000 events (about 3.7 GB)
//	agents10k+pending    the same with 2,000 pending 1 MB messages (2 GB)
//	history200MB         100 agents with 200 MB of history between them
//	history200MB+pending the same with 2,000 pending 1 MB messages
//	pending210k          126 agents, 21 of them gated with 10,000 pending 1 KiB messages each
//
// Large pending messages are held by gated agents, so no wake turn consumes
// them and a cached home keeps them; the turns are driven on other agents
// (agent.send, four clients, 64 agents through a default pool of 4 slots,
// so almost every turn evicts a session and restores another).
// TestMemoryBenchSmoke runs the same code on tiny homes in CI.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warren-dev/warren/config"
	"github.com/warren-dev/warren/protocol"
)

// memHome is one home of the memory benchmark.
type memHome struct {
	Name string
	Spec homeSpec
}

const bigPayload = 1_000_000

func memHomes() []memHome {
	a := homeSpec{Agents: 10000, EventsPerAgent: 1000, GroupSize: 100, NoPendingFill: true}
	b := homeSpec{Agents: 100, EventsPerAgent: 2000, GroupSize: 10, NoPendingFill: true, ResponsePad: 4300}
	ap, bp := a, b
	ap.BigPending, ap.BigPayload = 2000, bigPayload
	bp.BigPending, bp.BigPayload = 2000, bigPayload
	// Issue 31's D11: 210,000 pending 1 KiB messages held by 21 gated
	// agents (about the daemon-wide limit of 200,000).
	p := homeSpec{Agents: 126, EventsPerAgent: 20, GroupSize: 6, NoPendingFill: true, BigPending: 210000, BigPayload: 1024}
	return []memHome{{"agents10k", a}, {"agents10k+pending", ap}, {"history200MB", b}, {"history200MB+pending", bp}, {"pending210k", p}}
}

// memResult is one row of the table.
type memResult struct {
	Home         string
	Agents       int
	Events       int64
	Bytes        int64
	PendingBytes int64
	Serve        time.Duration // process start to the first daemon.status answer
	ServeCPU     time.Duration // CPU time the daemon used until then (user + system)
	OthersCPU    time.Duration // CPU time the rest of the machine used meanwhile
	Load         string        // the load average when serving began
	FirstSend    time.Duration // process start to the first agent.send answered
	List         time.Duration // the first agent.list after that, every page
	PeakServe    int64         // VmHWM when serving began, bytes
	PeakDriven   int64         // VmHWM after the driving
	RSSDriven    int64         // VmRSS after the driving
	Turns        int
	DriveTime    time.Duration
}

func BenchmarkMemory(b *testing.B) {
	bin := os.Getenv("WARREN_BENCH_BINARY")
	if bin == "" {
		bin = buildWarren(b)
	}
	want := map[string]bool{}
	for _, n := range strings.Split(os.Getenv("WARREN_BENCH_MEMORY_HOMES"), ",") {
		if n = strings.TrimSpace(n); n != "" {
			want[n] = true
		}
	}
	turns := 256
	if s := os.Getenv("WARREN_BENCH_TURNS"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 0 {
			b.Fatalf("WARREN_BENCH_TURNS=%q is not a count", s)
		}
		turns = n
	}
	root := os.Getenv("WARREN_BENCH_HOME")
	var rows []memResult
	for _, h := range memHomes() {
		if len(want) > 0 && !want[h.Name] {
			continue
		}
		dir := ""
		if root != "" {
			dir = filepath.Join(root, h.Name)
		}
		home, st := benchHome(b, dir, h.Spec)
		// Each iteration: the home as generated (no checkpoints: the first
		// start after an upgrade), then a second start on what the first
		// left (checkpoints written at its stop: every later start), then
		// a start after a kill -9 in the middle of work, as warren leaves
		// the home (killed) and with every checkpoint moved back 0-255
		// entries, the worst case (lagged; bench_killed_test.go).
		for _, phase := range memPhases(b) {
			b.Run(h.Name+"/"+phase+"-start", func(b *testing.B) {
				for i := 0; i < b.N; i++ {
					state := phase + " start"
					switch phase {
					case "first":
						resetHome(b, home, h.Spec)
						state += ": no checkpoints"
					case "next":
						n, mean, most := checkpointLagStats(b, home)
						state += fmt.Sprintf(": clean stop, %d checkpoints lagging %.0f (max %d)", n, mean, most)
					case "killed":
						killMidWork(b, bin, home, h.Spec, 32)
						n, mean, most := checkpointLagStats(b, home)
						state += fmt.Sprintf(": kill -9 mid-turn, %d checkpoints lagging %.1f (max %d)", n, mean, most)
					case "lagged":
						killMidWork(b, bin, home, h.Spec, 32)
						lagCheckpoints(b, home, int64(i+1), config.DefaultCheckpointEvery-1)
						n, mean, most := checkpointLagStats(b, home)
						state += fmt.Sprintf(": kill -9 mid-turn, then every checkpoint moved back 0-255 entries: %d lagging %.0f (max %d)", n, mean, most)
					}
					r := runMemoryHome(b, bin, home, h, st, turns)
					r.Home += " (" + state + ")"
					b.ReportMetric(r.Serve.Seconds(), "s_to_serve")
					b.ReportMetric(float64(r.PeakDriven)/(1<<20), "peak_rss_MB")
					if i == b.N-1 {
						rows = append(rows, r)
					}
				}
			})
		}
	}
	fmt.Println(memTable(rows))
}

// memPhases are the phases WARREN_BENCH_MEMORY_PHASES names (default all:
// first, next, killed, lagged), in that order.
func memPhases(b *testing.B) []string {
	all := []string{"first", "next", "killed", "lagged"}
	v := os.Getenv("WARREN_BENCH_MEMORY_PHASES")
	if v == "" {
		return all
	}
	var out []string
	for _, p := range all {
		if strings.Contains(","+v+",", ","+p+",") {
			out = append(out, p)
		}
	}
	if len(out) == 0 {
		b.Fatalf("WARREN_BENCH_MEMORY_PHASES=%q names none of %v", v, all)
	}
	return out
}

// TestMemoryBenchSmoke runs the memory benchmark's code on two tiny homes
// (one with large pending messages) so that it cannot rot: the binary
// starts, serves, recovers every agent and its pending messages, takes the
// driven turns through a pool small enough to evict, stops leaving
// checkpoints, and starts again from them.
func TestMemoryBenchSmoke(t *testing.T) {
	bin := buildWarren(t)
	base := homeSpec{Agents: 20, EventsPerAgent: 60, GroupSize: 10, NoPendingFill: true, ResponsePad: 100}
	withPending := base
	withPending.BigPending, withPending.BigPayload = 4, 64<<10
	for _, h := range []memHome{{"tiny", base}, {"tiny+pending", withPending}} {
		home, st := benchHome(t, "", h.Spec)
		resetHome(t, home, h.Spec)
		r := runMemoryHome(t, bin, home, h, st, 12)
		if r.Turns != 12 || r.PeakServe <= 0 || r.PeakDriven < r.PeakServe || r.RSSDriven <= 0 {
			t.Fatalf("%s: %+v; want 12 turns and positive RSS figures", h.Name, r)
		}
		if st.PendingBytes != int64(4*(64<<10)) && h.Spec.BigPending > 0 {
			t.Fatalf("%s: %d pending bytes generated, want %d", h.Name, st.PendingBytes, 4*(64<<10))
		}
		// The next start recovers from the checkpoints the first wrote.
		r2 := runMemoryHome(t, bin, home, h, st, 12)
		if r2.Turns != 12 {
			t.Fatalf("%s, next start: %+v; want 12 turns", h.Name, r2)
		}
		if _, err := os.Stat(filepath.Join(home, "agents", genAgentID(0), "checkpoint.json")); err != nil {
			t.Fatalf("%s: no checkpoint after a clean stop: %v", h.Name, err)
		}
		// After a kill -9 mid-turn, with every checkpoint lagging its log.
		killMidWork(t, bin, home, h.Spec, 4)
		lagCheckpoints(t, home, 1, config.DefaultCheckpointEvery-1)
		if n, mean, _ := checkpointLagStats(t, home); n != h.Spec.Agents || mean == 0 {
			t.Fatalf("%s: %d checkpoints lagging %.1f entries on average; want %d lagging", h.Name, n, mean, h.Spec.Agents)
		}
		r3 := runMemoryHome(t, bin, home, h, st, 12)
		if r3.Turns != 12 {
			t.Fatalf("%s, start after kill -9: %+v; want 12 turns", h.Name, r3)
		}
		t.Log("\n" + memTable([]memResult{r, r2, r3}))
	}
}

// buildWarren builds the warren binary into a temporary directory.
func buildWarren(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	bin := filepath.Join(dir, "warren")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/warren-dev/warren/cmd/warren").CombinedOutput()
	if err != nil {
		t.Fatalf("go build ./cmd/warren: %v\n%s", err, out)
	}
	return bin
}

// drivenIDs are the agents the benchmark sends turns to: up to 64 that
// hold no large messages.
func drivenIDs(spec homeSpec) []string {
	var ids []string
	for i := 0; i < spec.Agents && len(ids) < 64; i++ {
		if !spec.bigHolder(i) {
			ids = append(ids, genAgentID(i))
		}
	}
	return ids
}

// pristine is what the driven agents' files were when the home was
// generated, so that every run starts from the same home.
type pristine struct {
	LogSize map[string]int64
	Session map[string][]byte
}

const pristineName = "bench-pristine.json"

// resetHome brings the home back to what it was when generated: the
// driven agents' logs cut back to their generated length, their
// session.json restored, and no checkpoint left (the first start after an
// upgrade, the slowest). A home generated before pristine records existed
// is recorded as it is.
func resetHome(t testing.TB, home string, spec homeSpec) {
	t.Helper()
	var pr pristine
	path := filepath.Join(home, pristineName)
	data, err := os.ReadFile(path)
	if err != nil {
		pr = pristine{LogSize: map[string]int64{}, Session: map[string][]byte{}}
		for _, id := range drivenIDs(spec) {
			fi, err := os.Stat(filepath.Join(home, "agents", id, "events.jsonl"))
			if err != nil {
				t.Fatal(err)
			}
			pr.LogSize[id] = fi.Size()
			if pr.Session[id], err = os.ReadFile(filepath.Join(home, "agents", id, "session.json")); err != nil {
				t.Fatal(err)
			}
		}
		if data, err = json.Marshal(pr); err == nil {
			err = os.WriteFile(path, data, 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
	} else if err := json.Unmarshal(data, &pr); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	for id, size := range pr.LogSize {
		dir := filepath.Join(home, "agents", id)
		if err := os.Truncate(filepath.Join(dir, "events.jsonl"), size); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "session.json"), pr.Session[id], 0o600); err != nil {
			t.Fatal(err)
		}
	}
	dirs, err := os.ReadDir(filepath.Join(home, "agents"))
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		if err := os.Remove(filepath.Join(home, "agents", d.Name(), "checkpoint.json")); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
}

// runMemoryHome starts the daemon on home, waits for it to serve, drives
// the turns and stops it.
func runMemoryHome(t testing.TB, bin, home string, h memHome, st homeStats, turns int) memResult {
	t.Helper()
	// A small default pool: the driven turns evict and restore sessions.
	if err := os.WriteFile(filepath.Join(home, "config.json"), []byte(`{"pools":{"default":4}}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(home, "daemon.sock")
	if err := protocol.CheckSocketPath(sock); err != nil {
		t.Fatalf("%v: choose a shorter WARREN_BENCH_HOME", err)
	}
	stderr, err := os.CreateTemp(t.TempDir(), "daemon-stderr-")
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	cmd := exec.Command(bin, "daemon", "start", "--foreground", "--home", home, "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = stderr, stderr
	exited := make(chan error, 1)
	busy0 := machineCPU()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the daemon: %v", err)
	}
	go func() { exited <- cmd.Wait() }()
	defer func() {
		select {
		case <-exited:
		default:
			_ = cmd.Process.Kill()
			<-exited
		}
	}()
	fail := func(format string, args ...any) {
		t.Helper()
		out, _ := os.ReadFile(stderr.Name())
		t.Fatalf("%s: %s\ndaemon output:\n%s", h.Name, fmt.Sprintf(format, args...), tail(string(out), 40))
	}

	r := memResult{Home: h.Name, Agents: h.Spec.Agents, Events: st.Events, Bytes: st.Bytes, PendingBytes: st.PendingBytes}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	var cl *protocol.Client
	for {
		select {
		case err := <-exited:
			exited <- err
			fail("the daemon exited before serving: %v", err)
		default:
		}
		if c, err := protocol.Dial(ctx, sock); err == nil {
			if _, err := c.Call(ctx, "daemon.status", nil); err == nil {
				cl = c
				break
			}
			c.Close()
		}
		if time.Since(start) > 20*time.Minute {
			fail("the daemon did not serve within 20 minutes")
		}
		time.Sleep(2 * time.Millisecond) // polling a socket that does not exist yet: nothing to wait on
	}
	r.Serve = time.Since(start)
	r.ServeCPU = procCPU(cmd.Process.Pid)
	r.OthersCPU = machineCPU() - busy0 - r.ServeCPU
	if la, err := os.ReadFile("/proc/loadavg"); err == nil {
		r.Load = strings.Join(strings.Fields(string(la))[:3], " ")
	}
	defer cl.Close()
	r.PeakServe, _ = procMem(cmd.Process.Pid)
	if _, err := cl.Call(ctx, "agent.send", map[string]any{"agent_id": drivenIDs(h.Spec)[0], "message": "First turn after the start."}); err != nil {
		fail("the first agent.send: %v", err)
	}
	r.FirstSend = time.Since(start)
	// agent.list pages (1,000 agents a page by default): every page,
	// as `warren agent list` asks for them.
	t0 := time.Now()
	got := 0
	for after := ""; ; {
		var params map[string]any
		if after != "" {
			params = map[string]any{"after": after}
		}
		res, err := cl.Call(ctx, "agent.list", params)
		if err != nil {
			fail("agent.list: %v", err)
		}
		n := countAgents(res)
		if n < 0 {
			fail("agent.list: no agents array in %v", res)
		}
		got += n
		next, _ := res["next"].(string)
		if next == "" {
			break
		}
		after = next
	}
	r.List = time.Since(t0)
	if got != h.Spec.Agents {
		fail("agent.list shows %d agents, want %d", got, h.Spec.Agents)
	}

	r.Turns, r.DriveTime = driveTurns(ctx, t, sock, h.Spec, turns, fail)
	r.PeakDriven, r.RSSDriven = procMem(cmd.Process.Pid)

	if _, err := cl.Call(ctx, "daemon.shutdown", nil); err != nil {
		fail("daemon.shutdown: %v", err)
	}
	select {
	case err := <-exited:
		exited <- err
		if err != nil {
			fail("the daemon exited with %v", err)
		}
	case <-time.After(5 * time.Minute):
		fail("the daemon did not stop within 5 minutes of daemon.shutdown")
	}
	return r
}

// driveTurns runs turns over four connections on up to 64 agents that hold
// no large messages, each client taking every fourth turn.
func driveTurns(ctx context.Context, t testing.TB, sock string, spec homeSpec, turns int,
	fail func(string, ...any)) (int, time.Duration) {
	ids := drivenIDs(spec)
	const clients = 4
	var done atomic.Int64
	var mu sync.Mutex
	var firstErr error
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < clients; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			c, err := protocol.Dial(ctx, sock)
			if err != nil {
				mu.Lock()
				firstErr = err
				mu.Unlock()
				return
			}
			defer c.Close()
			for j := w; j < turns; j += clients {
				id := ids[(j*7)%len(ids)]
				_, err := c.Call(ctx, "agent.send", map[string]any{"agent_id": id,
					"message": fmt.Sprintf("Turn %d: summarise what changed since your last report.", j)})
				if err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = fmt.Errorf("agent.send to %s: %w", id, err)
					}
					mu.Unlock()
					return
				}
				done.Add(1)
			}
		}(w)
	}
	wg.Wait()
	if firstErr != nil {
		fail("driving turns: %v", firstErr)
	}
	return int(done.Load()), time.Since(start)
}

func countAgents(res map[string]any) int {
	if as, ok := res["agents"].([]any); ok {
		return len(as)
	}
	return -1
}

// procMem reads VmHWM (peak RSS) and VmRSS of a process, in bytes.
func procMem(pid int) (hwm, rss int64) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return -1, -1
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		kb, err := strconv.ParseInt(fields[1], 10, 64)
		if err != nil {
			continue
		}
		switch fields[0] {
		case "VmHWM:":
			hwm = kb << 10
		case "VmRSS:":
			rss = kb << 10
		}
	}
	return hwm, rss
}

// procCPU reads the user and system CPU time of a process.
func procCPU(pid int) time.Duration {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return -1
	}
	// The fields after the command name (which may hold spaces).
	i := strings.LastIndexByte(string(data), ')')
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return -1
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * time.Second / 100 // USER_HZ
}

func memTable(rows []memResult) string {
	var sb strings.Builder
	sb.WriteString("| home | agents | events | log bytes | pending bytes | time to serve | CPU to serve | others' CPU meanwhile | load | first agent.send answered | first agent.list | peak RSS at serve | peak RSS after driving | RSS after driving | turns driven |\n")
	sb.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	mb := func(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/(1<<20)) }
	for _, r := range rows {
		fmt.Fprintf(&sb, "| %s | %d | %d | %s | %s | %.2f s | %.2f s | %.2f s | %s | %.2f s | %.2f s | %s | %s | %s | %d in %.1f s |\n",
			r.Home, r.Agents, r.Events, mb(r.Bytes), mb(r.PendingBytes), r.Serve.Seconds(), r.ServeCPU.Seconds(), r.OthersCPU.Seconds(),
			r.Load, r.FirstSend.Seconds(), r.List.Seconds(), mb(r.PeakServe), mb(r.PeakDriven), mb(r.RSSDriven), r.Turns, r.DriveTime.Seconds())
	}
	return sb.String()
}

// machineCPU is the CPU time every process on the machine has used since
// boot (the first line of /proc/stat, without idle, iowait and steal).
func machineCPU() time.Duration {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	var ticks int64
	for i, v := range f[1:min(len(f), 8)] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, _ := strconv.ParseInt(v, 10, 64)
		ticks += n
	}
	return time.Duration(ticks) * time.Second / 100 // USER_HZ
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
