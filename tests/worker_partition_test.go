package tests

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// stallProxy forwards TCP connections to target. Stalled, it holds
// what it has read and stops reading (a partition: the peers' TCP
// buffers fill and nothing arrives); with a delay, each read is held that
// long before it is written on.
type stallProxy struct {
	ln     net.Listener
	target string

	mu      sync.Mutex
	changed *sync.Cond
	stalled bool
	delay   time.Duration
	conns   []net.Conn
}

func newStallProxy(t *testing.T, target string) *stallProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{ln: ln, target: target}
	p.changed = sync.NewCond(&p.mu)
	t.Cleanup(p.close)
	go p.serve()
	return p
}

func (p *stallProxy) url() string { return "nats://" + p.ln.Addr().String() }

func (p *stallProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		u, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns = append(p.conns, c, u)
		p.mu.Unlock()
		go p.pipe(c, u)
		go p.pipe(u, c)
	}
}

// pipe copies src to dst, holding each read while stalled and for the
// delay.
func (p *stallProxy) pipe(src, dst net.Conn) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			p.mu.Lock()
			for p.stalled {
				p.changed.Wait()
			}
			delay := p.delay
			p.mu.Unlock()
			if delay > 0 {
				time.Sleep(delay) // the delay being modelled, not a synchronization
			}
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			if err != io.EOF {
				_ = dst.Close()
			}
			return
		}
	}
}

func (p *stallProxy) set(stalled bool, delay time.Duration) {
	p.mu.Lock()
	p.stalled, p.delay = stalled, delay
	p.changed.Broadcast()
	p.mu.Unlock()
}

func (p *stallProxy) close() {
	_ = p.ln.Close()
	p.set(false, 0)
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, c := range p.conns {
		_ = c.Close()
	}
}

// gateScript blocks a "gate <fifo>" turn on the FIFO when it runs on
// worker w2 (WORKER comes from the worker's config.json), saying so first
// in the file <fifo>.open, then sends "late-<worker>" to USER; elsewhere
// it sends at once.
const gateScript = `import os, sys
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from warren_script import read_turn, call_tool, done

me = os.environ.get("WORKER", "local")
while True:
    msg = read_turn()
    words = msg.split(" ")
    if words[0] == "gate":
        if me == "w2":
            open(words[1] + ".open", "w").close()
            with open(words[1]) as f:
                f.read()
        try:
            r = call_tool("send_message", recipient="USER", text="late-" + me)
            done("gated on " + me + ": " + str(r.get("message_id", r.get("error"))))
        except RuntimeError as e:
            done("refused on " + me + ": " + str(e))
    else:
        done("on " + me + ": " + msg)
`

// TestWorkerPartition cuts one worker off from NATS mid-turn through a
// TCP proxy (stalled: a partition), then delays its traffic by 5 s, then
// restores it. The daemon loses the worker, re-runs the turn on the
// other one, and drops (and logs) what the abandoned attempt sends once
// its traffic flows again: its tool call never runs. The agent goes on
// on the other worker; the cut worker rejoins.
func TestWorkerPartition(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test starts a daemon and warren worker processes; run without -short")
	}
	f := startWorkerFleet(t, 0, 4, `{"max_retries": 5, "retry_base_delay_ms": 50}`)
	d := f.d
	script := filepath.Join(d.dir, "gate")
	if err := os.WriteFile(script, []byte("#!"+procPython+"\n"+gateScript), 0o700); err != nil {
		t.Fatal(err)
	}
	proxy := newStallProxy(t, strings.TrimPrefix(f.url, "nats://"))
	envCfg := func(id string) string {
		return fmt.Sprintf(`{"providers": {"scripted": {"env": {"WORKER": %q}}}}`, id)
	}
	f.startWith("w2", 4, proxy.url(), envCfg("w2"))
	f.waitListed("w2")
	id := d.createAgent("a", "scripted", script, "") // placed on w2, the only worker
	f.startWith("w1", 4, f.url, envCfg("w1"))
	f.waitListed("w1")
	if r := d.callN("agent.send", map[string]any{"agent_id": id, "message": "hello"}); str(r["response"]) != "on w2: hello" {
		t.Fatalf("first turn: %v, want it on w2", r)
	}

	fifo := filepath.Join(d.dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	type result struct {
		res map[string]any
		err error
	}
	sent := make(chan result, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		res, err := d.Client().Call(ctx, "agent.send", map[string]any{"agent_id": id, "message": "gate " + fifo})
		sent <- result{res, err}
	}()
	// The gate turn runs on w2, blocked on the FIFO. (Its turn.start is
	// not enough: the turn may still be on its way to the worker, and
	// would then never reach the FIFO.)
	for deadline := time.Now().Add(time.Minute); ; {
		if _, err := os.Stat(fifo + ".open"); err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the gate turn did not reach its FIFO on w2 within a minute\n%s", tailString(d.Output(), 6000))
		}
		time.Sleep(20 * time.Millisecond) // the script's file is the only sign that it reached the FIFO
	}

	proxy.set(true, 0) // the partition
	cut := time.Now()
	var r result
	select {
	case r = <-sent:
	case <-time.After(time.Minute):
		t.Fatalf("the gated turn was not re-run elsewhere within a minute of the partition\n%s", tailString(d.Output(), 6000))
	}
	if r.err != nil || !strings.HasPrefix(str(r.res["response"]), "gated on w1: ") {
		t.Fatalf("the gated turn after the partition: %v %v, want it completed on w1", r.res, r.err)
	}
	t.Logf("partition to the turn answered on w1: %.1f s", time.Since(cut).Seconds())

	// Release the abandoned attempt on w2: its tool call goes into the
	// partition, then reaches the daemon 5 s late.
	fw, err := os.OpenFile(fifo, os.O_WRONLY|syscall.O_NONBLOCK, 0) // never blocks: fails when no one reads
	if err != nil {
		t.Fatalf("the abandoned attempt's program on w2 no longer waits on the FIFO: %v", err)
	}
	_, _ = fw.Write([]byte("go"))
	fw.Close()
	proxy.set(false, 5*time.Second)
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(d.Output(), "dropping late worker traffic") {
		if time.Now().After(deadline) {
			t.Fatalf("no late traffic of the abandoned attempt dropped within a minute\n%s", tailString(d.Output(), 6000))
		}
		time.Sleep(50 * time.Millisecond) // polling the daemon's log: it is the observable
	}
	proxy.set(false, 0)
	f.waitListed("w2", "") // it rejoins

	inbox := map[string]int{}
	for _, m := range d.callN("inbox.list", nil)["messages"].([]any) {
		inbox[str(m.(map[string]any)["text"])]++
	}
	if inbox["late-w1"] != 1 || inbox["late-w2"] != 0 {
		t.Fatalf("USER inbox %v: want late-w1 once, and nothing from the abandoned attempt on w2", inbox)
	}
	calls := 0
	for _, e := range agentLog(t, d, id) {
		if str(e["event"]) == "tool.call" {
			calls++
		}
	}
	if calls != 1 {
		t.Fatalf("%d tool.call entries, want 1 (the abandoned attempt's call must not run)", calls)
	}
	if r := d.callN("agent.send", map[string]any{"agent_id": id, "message": "after"}); !strings.HasPrefix(str(r["response"]), "on w") {
		t.Fatalf("a turn after the partition healed: %v", r)
	}
	for _, line := range strings.Split(d.Output(), "\n") {
		if strings.Contains(line, "dropping late worker traffic") {
			t.Logf("daemon: %s", line[strings.Index(line, "dropping"):])
		}
	}
}

// TestDaemonFailoverWithWorkers kills the serving daemon of a
// three-daemon cluster with SIGKILL while two workers serve its team. A
// standby takes over, sees the workers (their registrations are in the
// cluster, and a worker whose NATS server died reconnects to another),
// and serves every agent again on a worker: never locally.
func TestDaemonFailoverWithWorkers(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test starts three cluster daemons and warren worker processes; run without -short")
	}
	c := startCluster3(t, "--owner-ttl", "3s")
	active := serving(t, c.ds, c.exits, -1, 3*time.Minute)
	a := c.ds[active]
	var urls []string
	for i := range 3 {
		urls = append(urls, fmt.Sprintf("nats://127.0.0.1:%d", c.ports[i]))
	}
	f := &workerFleet{t: t, d: a, url: strings.Join(urls, ","), pool: "scripted", workers: map[string]*workerProc{}}
	for _, d := range c.ds {
		if d != a {
			f.others = append(f.others, d.Home)
		}
	}
	t.Cleanup(f.stopAll)
	script := filepath.Join(a.dir, "gate")
	if err := os.WriteFile(script, []byte("#!"+procPython+"\n"+gateScript), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, w := range []string{"w1", "w2"} {
		f.startWith(w, 8, f.url, fmt.Sprintf(`{"providers": {"scripted": {"env": {"WORKER": %q}}}}`, w))
	}
	f.waitListed("w1")
	f.waitListed("w2")
	var ids []string
	for i := range 6 {
		id := a.createAgent(fmt.Sprintf("a%d", i), "scripted", script, "")
		if r := a.callN("agent.send", map[string]any{"agent_id": id, "message": "hello"}); !strings.HasPrefix(str(r["response"]), "on w") {
			t.Fatalf("agent a%d before the failover: %v, want it on a worker", i, r)
		}
		ids = append(ids, id)
	}

	killed := time.Now()
	a.Kill()
	next := serving(t, c.ds, c.exits, active, 2*time.Minute)
	b := c.ds[next]
	t.Logf("n%d active %.1f s after the kill", next+1, time.Since(killed).Seconds())
	f.d = b
	f.waitListed("w1")
	f.waitListed("w2")
	t.Logf("workers listed %.1f s after the kill", time.Since(killed).Seconds())
	for i, id := range ids {
		deadline := time.Now().Add(time.Minute)
		for {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			r, err := b.Client().Call(ctx, "agent.send", map[string]any{"agent_id": id, "message": "after"})
			cancel()
			if err == nil {
				if !strings.HasPrefix(str(r["response"]), "on w") {
					t.Fatalf("agent a%d after the failover: %v, want it on a worker", i, r)
				}
				t.Logf("a%d served %.1f s after the kill", i, time.Since(killed).Seconds())
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("agent a%d not served within a minute of the takeover: %v\n%s", i, err, tailString(b.Output(), 6000))
			}
			time.Sleep(100 * time.Millisecond) // an agent not yet taken over (the takeover scan runs every 250 ms)
		}
	}
	t.Logf("n%d killed; n%d served all 6 agents on the workers %.1f s later", active+1, next+1, time.Since(killed).Seconds())
	if os.Getenv("WARREN_WORKER_DEBUG") != "" {
		t.Logf("new daemon:\n%s", b.Output())
	}
	if strings.Contains(b.Output(), "opening the session locally") {
		t.Fatalf("the new daemon opened a session locally while the workers had room:\n%s", tailString(b.Output(), 6000))
	}
}
