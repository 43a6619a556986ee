package tests

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// workerFleet is a daemon on an embedded NATS server and the `warren
// worker` processes that serve it, all on loopback.
type workerFleet struct {
	t      testing.TB
	d      *testDaemon
	url    string
	script string
	pool   string // the provider entry the workers serve

	// others are more daemon homes that must know the workers' keys (a
	// cluster's other nodes).
	others []string

	mu      sync.Mutex
	workers map[string]*workerProc
	tokens  map[string]string // worker id -> token file
	// env is what a worker's process environment adds, by worker id.
	env map[string][]string
}

// workerProc is one `warren worker` process.
type workerProc struct {
	id     string
	home   string
	cmd    *exec.Cmd
	out    *lockedBuffer
	exited chan struct{}
}

// startWorkerFleet starts the daemon with cfg as its config.json, then n
// workers with pools scripted=size, and waits until the daemon lists
// them.
func startWorkerFleet(t testing.TB, n, size int, cfg string) *workerFleet {
	t.Helper()
	return startFleetOf(t, "scripted", n, size, cfg)
}

// startFleetOf is startWorkerFleet with workers serving pool.
func startFleetOf(t testing.TB, pool string, n, size int, cfg string) *workerFleet {
	t.Helper()
	d := newTestDaemon(t, modeBinary)
	port := freePorts(t, 1)[0]
	d.args = []string{"--cluster-embedded", "--node", "n1", "--nats-port", strconv.Itoa(port)}
	if err := os.MkdirAll(d.Home, 0o700); err != nil {
		t.Fatal(err)
	}
	if cfg != "" {
		if err := os.WriteFile(filepath.Join(d.Home, "config.json"), []byte(cfg), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	d.Start()
	f := &workerFleet{t: t, d: d, url: fmt.Sprintf("nats://127.0.0.1:%d", port), script: writeScripts(t, d.dir), pool: pool,
		workers: map[string]*workerProc{}}
	t.Cleanup(f.stopAll)
	for i := range n {
		f.start(fmt.Sprintf("w%d", i+1), size)
	}
	for i := range n {
		f.waitListed(fmt.Sprintf("w%d", i+1))
	}
	return f
}

// start starts (or restarts) worker id.
func (f *workerFleet) start(id string, size int) *workerProc {
	f.t.Helper()
	return f.startWith(id, size, f.url, "")
}

// startWith starts worker id joining at url, with cfg as its
// config.json ("": none).
func (f *workerFleet) startWith(id string, size int, url, cfg string) *workerProc {
	f.t.Helper()
	home := filepath.Join(f.d.dir, "worker-home-"+id)
	if cfg != "" {
		if err := os.MkdirAll(home, 0o700); err != nil {
			f.t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(home, "config.json"), []byte(cfg), 0o600); err != nil {
			f.t.Fatal(err)
		}
	}
	out := &lockedBuffer{}
	cmd := exec.Command(procBinary, "worker", "--join", url, "--pools", fmt.Sprintf("%s=%d", f.pool, size), "--id", id,
		"--home", home, "--log-level", "debug", "--token-file", f.token(id))
	cmd.Stdout, cmd.Stderr = out, out
	f.mu.Lock()
	if extra := f.env[id]; extra != nil {
		cmd.Env = append(os.Environ(), extra...)
	}
	f.mu.Unlock()
	if err := cmd.Start(); err != nil {
		f.t.Fatal(err)
	}
	w := &workerProc{id: id, home: home, cmd: cmd, out: out, exited: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(w.exited) }()
	f.mu.Lock()
	f.workers[id] = w
	f.mu.Unlock()
	return w
}

// token is the file holding worker id's token, issued once with `warren
// worker token` in the daemon's home (and its key copied to the others).
func (f *workerFleet) token(id string) string {
	f.t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.tokens == nil {
		f.tokens = map[string]string{}
	}
	if path, ok := f.tokens[id]; ok {
		return path
	}
	out, err := exec.Command(procBinary, "--home", f.d.Home, "worker", "token", id).Output()
	if err != nil {
		f.t.Fatalf("warren worker token %s: %v", id, err)
	}
	path := filepath.Join(f.d.dir, id+".token")
	if err := os.WriteFile(path, out, 0o600); err != nil {
		f.t.Fatal(err)
	}
	keys, err := os.ReadFile(filepath.Join(f.d.Home, "workers.json"))
	if err != nil {
		f.t.Fatal(err)
	}
	for _, h := range f.others {
		if err := os.WriteFile(filepath.Join(h, "workers.json"), keys, 0o600); err != nil {
			f.t.Fatal(err)
		}
	}
	f.tokens[id] = path
	return path
}

// kill9 kills worker id with SIGKILL and waits for its exit.
func (f *workerFleet) kill9(id string) {
	f.signal(id, syscall.SIGKILL)
	f.mu.Lock()
	w := f.workers[id]
	f.mu.Unlock()
	<-w.exited
}

// signal sends sig to worker id.
func (f *workerFleet) signal(id string, sig syscall.Signal) {
	f.mu.Lock()
	w := f.workers[id]
	f.mu.Unlock()
	_ = w.cmd.Process.Signal(sig)
}

func (f *workerFleet) stopAll() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, w := range f.workers {
		_ = w.cmd.Process.Signal(syscall.SIGKILL)
		<-w.exited
	}
}

// listed is the daemon's workers block: id to boot.
func (f *workerFleet) listed() map[string]string {
	st, err := f.d.Client().Call(procCtx(f.t), "daemon.status", nil)
	out := map[string]string{}
	if err != nil {
		return out
	}
	cl, _ := st["cluster"].(map[string]any)
	ws, _ := cl["workers"].([]any)
	for _, w := range ws {
		m, _ := w.(map[string]any)
		out[str(m["id"])] = str(m["boot"])
	}
	return out
}

// waitListed waits until the daemon lists worker id under a boot other
// than not.
func (f *workerFleet) waitListed(id string, not ...string) string {
	f.t.Helper()
	deadline := time.Now().Add(time.Minute)
	for {
		if b := f.listed()[id]; b != "" && (len(not) == 0 || b != not[0]) {
			return b
		}
		if time.Now().After(deadline) {
			f.mu.Lock()
			out := f.workers[id].out.String()
			f.mu.Unlock()
			f.t.Fatalf("the daemon does not list worker %s within a minute; its output:\n%s\ndaemon:\n%s", id, tailString(out, 4000), tailString(f.d.Output(), 4000))
		}
		time.Sleep(50 * time.Millisecond) // polling daemon.status: a registration has no event a client can wait for
	}
}

// agentLog is an agent's whole log through the socket.
func agentLog(t *testing.T, d *testDaemon, id string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, e := range d.callN("agent.log", map[string]any{"agent_id": id, "limit": 10000})["events"].([]any) {
		out = append(out, e.(map[string]any))
	}
	return out
}

// TestWorkerKill9MidTurn runs a team of 20 scripted agents on three
// workers and kills workers with SIGKILL at random under load, 20 times
// (WARREN_LONG: 60), restarting each. Every turn must complete (each
// interrupted attempt retried on another worker, never locally: the
// daemon has no local fallback to hide behind while a worker has room),
// nothing acknowledged may be lost, no message consumed twice, and no
// tool call executed twice (each turn makes one send_message to USER:
// one tool.call per run in the log, and each text once in the USER
// inbox).
func TestWorkerKill9MidTurn(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test starts a daemon and warren worker processes; run without -short")
	}
	kills, agents := 20, 20
	if os.Getenv("WARREN_LONG") != "" {
		kills = 60
	}
	seed := time.Now().UnixNano()
	if s := os.Getenv("WARREN_SEED"); s != "" {
		seed, _ = strconv.ParseInt(s, 10, 64)
	}
	t.Logf("seed %d (WARREN_SEED)", seed)
	rng := rand.New(rand.NewSource(seed))
	// Sixteen slots a worker: two workers hold the team while the third
	// restarts, with room to spare for the moments the daemon's count and
	// a worker's differ (a lost session's stop still on its way, an open
	// the daemon gave up that the worker finished). Retries are quick and
	// many, since a kill is followed by a retry at once.
	f := startWorkerFleet(t, 3, 16, `{"max_retries": 10, "retry_base_delay_ms": 50}`)
	d := f.d
	ids := make([]string, agents)
	for i := range ids {
		ids[i] = d.createAgent(fmt.Sprintf("a%d", i), "scripted", f.script, "")
	}

	var mu sync.Mutex
	acked := map[string][]string{} // agent -> texts acknowledged
	var failures []string
	acks := make(chan struct{}, 1<<16)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				text := fmt.Sprintf("a%d-%d", i, n)
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
				res, err := d.Client().Call(ctx, "agent.send", map[string]any{"agent_id": id, "message": "send USER " + text})
				cancel()
				mu.Lock()
				if err != nil || !strings.HasPrefix(str(res["response"]), "sent: ") {
					failures = append(failures, fmt.Sprintf("%s %q: %v %v", id, text, err, res))
					mu.Unlock()
					return
				}
				acked[id] = append(acked[id], text)
				mu.Unlock()
				acks <- struct{}{}
			}
		}()
	}
	waitAcks := func(n int) {
		t.Helper()
		timeout := time.After(2 * time.Minute)
		for range n {
			select {
			case <-acks:
			case <-timeout:
				mu.Lock()
				defer mu.Unlock()
				t.Fatalf("no %d turns acknowledged within 2 minutes; failures: %v\ndaemon:\n%s", n, failures, tailString(d.Output(), 6000))
			}
		}
	}
	waitAcks(2 * agents)
	for k := range kills {
		id := fmt.Sprintf("w%d", rng.Intn(3)+1)
		boot := f.listed()[id]
		f.kill9(id)
		f.start(id, 16)
		f.waitListed(id, boot)
		waitAcks(10)
		if k%5 == 4 {
			t.Logf("%d kills", k+1)
		}
	}
	close(stop)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	if len(failures) > 0 {
		t.Fatalf("%d turns failed, first: %s\ndaemon:\n%s", len(failures), failures[0], tailString(d.Output(), 8000))
	}

	// The ledger: each acknowledged text once in the USER inbox, nothing
	// else there.
	inbox := userInboxTexts(d)
	total, retries := 0, 0
	for _, id := range ids {
		for _, text := range acked[id] {
			total++
			if inbox[text] != 1 {
				t.Errorf("acknowledged text %q is in the USER inbox %d times, want 1", text, inbox[text])
			}
			delete(inbox, text)
		}
		// One tool.call per run, and no message in two runs.
		calls, consumed := map[string]int{}, map[string]string{}
		for _, e := range agentLog(t, d, id) {
			data, _ := e["data"].(map[string]any)
			switch str(e["event"]) {
			case "tool.call":
				calls[str(data["run_id"])]++
			case "turn.retry":
				retries++
			case "turn.start":
				for _, m := range data["message_ids"].([]any) {
					if run, ok := consumed[str(m)]; ok && run != str(data["run_id"]) {
						t.Errorf("agent %s: message %s consumed by runs %s and %s", id, m, run, data["run_id"])
					}
					consumed[str(m)] = str(data["run_id"])
				}
			}
		}
		for run, n := range calls {
			if n != 1 {
				t.Errorf("agent %s run %s: %d tool.call entries, want 1 (a tool executed twice)", id, run, n)
			}
		}
		if len(calls) != len(acked[id]) {
			t.Errorf("agent %s: %d runs made a call, %d turns acknowledged", id, len(calls), len(acked[id]))
		}
	}
	for text, n := range inbox {
		t.Errorf("the USER inbox holds %q (%d times), which no acknowledged turn sent", text, n)
	}
	out := d.Output()
	if n := strings.Count(out, "opening the session locally"); n > 0 {
		t.Errorf("%d sessions opened locally while workers had room", n)
	}
	if retries == 0 {
		t.Errorf("%d kills interrupted no turn (no turn.retry in any log): the test did not test retries", kills)
	}
	t.Logf("%d kills; %d turns acknowledged on %d agents; %d retries; %d late messages dropped", kills, total, agents, retries,
		strings.Count(out, "dropping late worker traffic"))
}

// tailString is the last n bytes of s.
func tailString(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// userInboxTexts drains the USER inbox (a reply carries a page; the rest
// is "remaining") and counts each text.
func userInboxTexts(d *testDaemon) map[string]int {
	out := map[string]int{}
	for {
		res := d.callN("inbox.list", nil)
		for _, m := range res["messages"].([]any) {
			out[str(m.(map[string]any)["text"])]++
		}
		if res["remaining"] == nil {
			return out
		}
	}
}

// TestWorkerStopsWhenItsServersAreGone: a worker whose daemon (and with
// it the NATS server it joined) has stopped still stops on SIGTERM
// without waiting for the servers: its goodbye is not sent to servers
// that are gone (it used to wait out a 10 s flush).
func TestWorkerStopsWhenItsServersAreGone(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test starts a daemon and a warren worker process; run without -short")
	}
	t.Parallel()
	f := startWorkerFleet(t, 1, 2, "")
	if err := f.d.Stop(); err != nil {
		t.Fatal(err)
	}
	f.signal("w1", syscall.SIGTERM)
	f.mu.Lock()
	w := f.workers["w1"]
	f.mu.Unlock()
	select {
	case <-w.exited:
	case <-time.After(6 * time.Second): // a hang's bound, not a speed target
		t.Fatalf("the worker did not stop within 6 s of SIGTERM with its servers gone\n%s", tailString(w.out.String(), 3000))
	}
}
