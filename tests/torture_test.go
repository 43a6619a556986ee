package tests

import (
	"context"
	"fmt"
	"math/rand"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warren-dev/warren/protocol"
)

// Torture profile: 50 kills by default, more with WARREN_LONG=1.
// WARREN_TORTURE_SEED replays a run.
const (
	tortureRounds     = 50
	tortureLongRounds = 400
	tortureClients    = 3
	tortureMaxRoots   = 3 // per client
	tortureMaxKids    = 3 // per root
	// tortureStall bounds a round without any acknowledged operation: a
	// daemon that stops making progress fails the test instead of hanging it.
	tortureStall = 90 * time.Second
)

// TestTortureKill9 runs the built binary under load from several clients
// (creates, spawns through tool.call and through scripted agents' turns,
// send_message between agents through tool.call and through turns, plain
// turns of scripted agents), kills it with SIGKILL after a random number
// of acknowledged operations, restarts it, and checks after every restart
// that every acknowledged create, spawn and message is present, every log
// is a valid gap-free prefix of what it was, no message id was consumed by
// two completed turns, no run was interrupted twice, and the daemon serves.
func TestTortureKill9(t *testing.T) {
	rounds := tortureRounds
	if os.Getenv("WARREN_LONG") == "1" {
		rounds = tortureLongRounds
	}
	seed := int64(20261122)
	if s := os.Getenv("WARREN_TORTURE_SEED"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("WARREN_TORTURE_SEED=%q: %v", s, err)
		}
		seed = v
	}
	t.Logf("seed %d, %d rounds (WARREN_TORTURE_SEED=%d to replay the schedule)", seed, rounds, seed)
	rng := rand.New(rand.NewSource(seed))
	d := newTestDaemon(t, modeBinary)
	script := writeScripts(t, d.dir)
	led := newLedger()
	for round := 0; round < rounds; round++ {
		d.Start()
		verifyAfterRestart(t, d, led, round)
		load := startTortureLoad(d, led, script, rng, round)
		load.waitAcks(t, load.target)
		if round%3 == 2 {
			// A clean stop in the middle of the load: what runs is
			// interrupted, never cancelled, and re-run at the next start.
			if err := d.Stop(); err != nil {
				t.Fatalf("round %d: a clean stop under load: %v\n%s", round, err, d.Output())
			}
		} else {
			d.Kill()
		}
		load.stop()
	}
	d.Start()
	verifyAfterRestart(t, d, led, rounds)
	verifyNoRunLost(t, d)
	agents, msgs, turns := led.counts()
	t.Logf("%d stops (every third clean, the others kill -9); acknowledged: %d agents, %d messages, %d turns", rounds, agents, msgs, turns)
	if agents == 0 || msgs == 0 || turns == 0 {
		t.Fatalf("the load did too little to prove anything: %d agents, %d messages, %d turns", agents, msgs, turns)
	}
}

// verifyNoRunLost (SPEC 11.7) waits until no agent runs a turn and
// checks that no run is left interrupted but one the resume policy re-ran
// 3 times: after stops and kills, the team moved on by itself.
func verifyNoRunLost(t *testing.T, d *testDaemon) {
	t.Helper()
	for {
		list, err := d.Client().Call(procCtx(t), "agent.list", nil)
		if err != nil {
			t.Fatalf("agent.list: %v", err)
		}
		running := 0
		var stranded []string
		for _, a := range list["agents"].([]any) {
			m := a.(map[string]any)
			switch m["status"] {
			case "running":
				running++
			case "interrupted_startup", "interrupted_waiting":
				stranded = append(stranded, fmt.Sprint(m["path"]))
			}
		}
		if running > 0 {
			continue // re-runs still going: ask again
		}
		if len(stranded) > 0 {
			st, _ := d.Client().Call(procCtx(t), "daemon.status", nil)
			if !strings.Contains(fmt.Sprint(st["interrupted"]), "re-run 3 times") {
				t.Fatalf("runs left interrupted after the last start: %v (daemon.status interrupted: %v)", stranded, st["interrupted"])
			}
		}
		return
	}
}

// tortureLoad is one round of load: tortureClients clients issuing random
// operations against the daemon until stopped (or the daemon dies).
type tortureLoad struct {
	d       *testDaemon
	round   int
	target  int // acknowledged operations to wait for before the kill
	acks    chan struct{}
	cancel  context.CancelFunc
	allDone chan struct{}
}

// startTortureLoad draws the round's target (1-12 acknowledged operations)
// and starts the clients, each with its own seed drawn from rng.
func startTortureLoad(d *testDaemon, led *ledger, script string, rng *rand.Rand, round int) *tortureLoad {
	ctx, cancel := context.WithCancel(context.Background())
	l := &tortureLoad{d: d, round: round, target: 1 + rng.Intn(12), acks: make(chan struct{}, 4096),
		cancel: cancel, allDone: make(chan struct{})}
	var wg sync.WaitGroup
	for c := 0; c < tortureClients; c++ {
		wg.Add(1)
		cl := &tortureClient{d: d, led: led, script: script, id: c, round: round,
			rng: rand.New(rand.NewSource(rng.Int63())), acks: l.acks}
		go func() {
			defer wg.Done()
			cl.run(ctx)
		}()
	}
	go func() {
		wg.Wait()
		close(l.allDone)
	}()
	return l
}

// waitAcks returns after n more acknowledged operations; the test fails if
// the daemon exits, every client stops, or tortureStall passes without one.
func (l *tortureLoad) waitAcks(t *testing.T, n int) {
	t.Helper()
	stall := time.NewTimer(tortureStall)
	defer stall.Stop()
	for got := 0; got < n; {
		select {
		case <-l.acks:
			got++
			stall.Reset(tortureStall)
		case <-l.d.Exited():
			l.cancel()
			t.Fatalf("round %d: the daemon exited by itself: %v\n%s", l.round, l.d.exitErr(), l.d.Output())
		case <-l.allDone:
			l.cancel()
			t.Fatalf("round %d: every client stopped after %d acknowledged operations (want %d)\n%s", l.round, got, n, l.d.Output())
		case <-stall.C:
			l.cancel()
			t.Fatalf("round %d: no acknowledged operation for %v\n%s", l.round, tortureStall, l.d.Output())
		}
	}
}

// stop ends the clients (after the kill, their connections are gone).
func (l *tortureLoad) stop() {
	l.cancel()
	<-l.allDone
}

// tortureClient is one load generator for one round.
type tortureClient struct {
	d      *testDaemon
	led    *ledger
	script string
	id     int
	round  int
	rng    *rand.Rand
	acks   chan<- struct{}
	n      int
	cl     *protocol.Client
}

var spawnedRe = regexp.MustCompile(`^spawned: ([0-9a-f]{32})$`)
var sentRe = regexp.MustCompile(`^sent: ([0-9a-f]{32})$`)

func (c *tortureClient) ack() {
	select {
	case c.acks <- struct{}{}:
	default:
	}
}

// call is one RPC with a bound so a stuck daemon cannot hang the client.
func (c *tortureClient) call(ctx context.Context, method string, params map[string]any) (map[string]any, error) {
	cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	return c.cl.Call(cctx, method, params)
}

func (c *tortureClient) name(prefix string) string {
	c.n++
	return fmt.Sprintf("%s%d_%d_%d", prefix, c.id, c.round, c.n)
}

// run issues random operations until the connection breaks (the kill) or
// ctx ends.
func (c *tortureClient) run(ctx context.Context) {
	cl, err := protocol.Dial(ctx, c.d.Sock)
	if err != nil {
		return
	}
	defer cl.Close()
	c.cl = cl
	for ctx.Err() == nil {
		if err := c.step(ctx); isConnErr(err) {
			return
		}
	}
}

// mine returns this client's acknowledged roots and each root's children.
func (c *tortureClient) mine() (roots []tortureAgent, kids map[string][]tortureAgent) {
	kids = map[string][]tortureAgent{}
	prefix := fmt.Sprintf("r%d_", c.id)
	byID := map[string]tortureAgent{}
	for _, a := range c.led.snapshot() {
		byID[a.ID] = a
	}
	for _, a := range byID {
		if a.ParentID == "" && strings.HasPrefix(a.Name, prefix) {
			roots = append(roots, a)
		}
	}
	for _, a := range byID {
		if p, ok := byID[a.ParentID]; ok && strings.HasPrefix(p.Name, prefix) {
			kids[a.ParentID] = append(kids[a.ParentID], a)
		}
	}
	// map iteration order is random: sort for a reproducible schedule
	sortAgents(roots)
	for k := range kids {
		sortAgents(kids[k])
	}
	return roots, kids
}

func sortAgents(as []tortureAgent) {
	for i := 1; i < len(as); i++ {
		for j := i; j > 0 && as[j].Name < as[j-1].Name; j-- {
			as[j], as[j-1] = as[j-1], as[j]
		}
	}
}

func (c *tortureClient) step(ctx context.Context) error {
	roots, kids := c.mine()
	op := c.rng.Intn(100)
	if len(roots) == 0 || (op < 12 && len(roots) < tortureMaxRoots) {
		return c.createRoot(ctx)
	}
	root := roots[c.rng.Intn(len(roots))]
	children := kids[root.ID]
	switch {
	case op < 30 && len(children) < tortureMaxKids:
		if root.Scripted && c.rng.Intn(2) == 0 {
			return c.spawnByTurn(ctx, root)
		}
		return c.spawnByTool(ctx, root)
	case op < 65 && len(children) > 0:
		return c.messageByTool(ctx, root, children)
	case op < 80 && len(children) > 0 && root.Scripted:
		return c.messageByTurn(ctx, root, children)
	default:
		target := root
		if len(children) > 0 && c.rng.Intn(2) == 0 {
			target = children[c.rng.Intn(len(children))]
		}
		return c.turn(ctx, target)
	}
}

func (c *tortureClient) createRoot(ctx context.Context) error {
	name := c.name("r")
	scriptedRoot := c.rng.Intn(3) != 0
	prov, model := "inproc", "echo"
	if scriptedRoot {
		prov, model = "scripted", c.script
	}
	res, err := c.call(ctx, "agent.create", map[string]any{"name": name, "instructions": "torture root", "provider": prov, "model": model})
	if err != nil {
		return err
	}
	c.led.addAgent(tortureAgent{ID: res["agent_id"].(string), Name: name, Scripted: scriptedRoot, How: "create"})
	c.ack()
	return nil
}

func (c *tortureClient) spawnByTool(ctx context.Context, root tortureAgent) error {
	name := c.name("k")
	args := map[string]any{"name": name, "instructions": "torture child", "provider": "inproc", "model": "echo"}
	scriptedKid := c.rng.Intn(3) == 0
	if scriptedKid {
		args["provider"], args["model"] = "scripted", c.script
	}
	res, err := c.call(ctx, "tool.call", map[string]any{"agent_id": root.ID, "tool": "spawn_agent", "arguments": args})
	if err != nil {
		return err
	}
	id, ok := res["agent_id"].(string)
	if !ok {
		return nil // a tool-level error: not acknowledged
	}
	c.led.addAgent(tortureAgent{ID: id, Name: name, ParentID: root.ID, Scripted: scriptedKid, How: "spawn tool.call"})
	c.ack()
	return nil
}

func (c *tortureClient) spawnByTurn(ctx context.Context, root tortureAgent) error {
	name := c.name("k")
	res, err := c.call(ctx, "agent.send", map[string]any{"agent_id": root.ID, "message": "spawn " + name + " echo"})
	if err != nil {
		return err
	}
	m := spawnedRe.FindStringSubmatch(fmt.Sprint(res["response"]))
	if m == nil {
		return nil
	}
	c.led.addAgent(tortureAgent{ID: m[1], Name: name, ParentID: root.ID, How: "spawn turn"})
	c.ack()
	return nil
}

// messageByTool sends between a root and its children (both ways) or
// between siblings, through tool.call send_message.
func (c *tortureClient) messageByTool(ctx context.Context, root tortureAgent, children []tortureAgent) error {
	kid := children[c.rng.Intn(len(children))]
	from, to := root, kid
	switch c.rng.Intn(3) {
	case 1:
		from, to = kid, root
	case 2:
		if len(children) > 1 {
			from = kid
			for to = kid; to.ID == kid.ID; {
				to = children[c.rng.Intn(len(children))]
			}
		}
	}
	res, err := c.call(ctx, "tool.call", map[string]any{"agent_id": from.ID, "tool": "send_message",
		"arguments": map[string]any{"recipient": to.Name, "text": fmt.Sprintf("note %d from %s", c.n, from.Name)}})
	if err != nil {
		return err
	}
	c.n++
	id, ok := res["message_id"].(string)
	if !ok {
		return nil
	}
	c.led.addMsg(tortureMsg{ID: id, SenderID: from.ID, RecipientID: to.ID, How: "tool.call"})
	c.ack()
	return nil
}

// messageByTurn asks a scripted root to send to one of its children from
// inside a turn.
func (c *tortureClient) messageByTurn(ctx context.Context, root tortureAgent, children []tortureAgent) error {
	kid := children[c.rng.Intn(len(children))]
	c.n++
	res, err := c.call(ctx, "agent.send", map[string]any{"agent_id": root.ID, "message": fmt.Sprintf("send %s hello%d", kid.Name, c.n)})
	if err != nil {
		return err
	}
	m := sentRe.FindStringSubmatch(fmt.Sprint(res["response"]))
	if m == nil {
		return nil
	}
	c.led.addMsg(tortureMsg{ID: m[1], SenderID: root.ID, RecipientID: kid.ID, How: "turn"})
	c.led.addTurn()
	c.ack()
	return nil
}

func (c *tortureClient) turn(ctx context.Context, a tortureAgent) error {
	c.n++
	res, err := c.call(ctx, "agent.send", map[string]any{"agent_id": a.ID, "message": fmt.Sprintf("work %d", c.n)})
	if err != nil {
		return err
	}
	if res["status"] == "idle" && res["response"] != nil {
		c.led.addTurn()
		c.ack()
	}
	return nil
}
