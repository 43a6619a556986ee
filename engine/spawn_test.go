package engine

import (
	"bytes"
	"context"
	"errors"
	"reflect"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/warren-dev/warren/engine/internal/notice"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/inbox"
	fold "github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/tools"
	"github.com/warren-dev/warren/tree"
)

// The tests of the former engine/internal/lifecycle for spawn.go (the
// deferred spawns, respawn, childSpec, redo, complete and the tools'
// side), through a real Core.

// queued is the spawns a's turn queued and has not done yet.
func queued(a *agent) []CreateSpec {
	a.stateMu.Lock()
	defer a.stateMu.Unlock()
	return append([]CreateSpec(nil), a.spawns.specs...)
}

// createdAs is the agent.created of agent id.
func createdAs(t *testing.T, h *harness, id string) schema.AgentCreatedData {
	t.Helper()
	return dataAs[schema.AgentCreatedData](t, lastEntry(t, h, id, schema.AgentCreated))
}

// bootstrapped waits until agent id has run its bootstrap turn, and checks
// its prompt.
func bootstrapped(t *testing.T, h *harness, id string) {
	t.Helper()
	h.until("the child ran its bootstrap turn", func() bool { return h.count(id, schema.TurnComplete) == 1 })
	if p := dataOf(t, lastEntry(t, h, id, schema.TurnStart))["prompt"]; p != bootstrapPrompt {
		t.Fatalf("the child's first turn had the prompt %q", p)
	}
}

// damageLogs damages a line in the middle of each agent's log while the
// daemon is down, and starts it again: recovery lists them from the
// checkpoints Close wrote, in their place in the tree, and the scrub
// finds the damage and marks them corrupt (as in
// TestCorruptLogIsListedAndOthersServe).
func damageLogs(t *testing.T, h *harness, ids ...string) {
	t.Helper()
	h.stop()
	for _, id := range ids {
		p := h.c.logPath(id)
		lines := bytes.SplitAfter(h.read(p), []byte("\n"))
		lines[1] = flip(lines[1], 12, 0)
		h.rewrite(p, bytes.Join(lines, nil))
	}
	h.start()
	<-h.c.scrubbed
	for _, id := range ids {
		if a := mustAgent(t, h.c, id); a.Corrupt() == nil || h.c.tree.Path(id) == "" {
			t.Fatalf("agent %s: corrupt %v, path %q; want it listed corrupt in the tree", id, a.Corrupt(), h.c.tree.Path(id))
		}
	}
}

func TestSpawnsDecideEachSpawn(t *testing.T) {
	var s spawnQueue
	type verdict struct{ ok, queued, now bool }
	for _, tc := range []struct {
		spec   CreateSpec
		inTurn bool
		want   verdict
	}{
		{CreateSpec{ID: "c1", Name: "kid"}, true, verdict{true, true, false}},   // queued
		{CreateSpec{ID: "c1", Name: "kid"}, true, verdict{true, false, false}},  // the same child again: accepted, nothing done
		{CreateSpec{ID: "c9", Name: "kid"}, true, verdict{false, false, false}}, // another child of that name: refused
		{CreateSpec{ID: "c9", Name: "kid"}, false, verdict{false, false, false}},
		{CreateSpec{ID: "c2", Name: "other"}, false, verdict{true, false, true}}, // not in a turn: now
	} {
		ok, queued, now := s.Defer(tc.spec, tc.inTurn)
		if got := (verdict{ok, queued, now}); got != tc.want {
			t.Errorf("Defer(%s %s, inTurn %v) = %+v, want %+v", tc.spec.ID, tc.spec.Name, tc.inTurn, got, tc.want)
		}
	}
	s.Done("c1")
	if ok, queued, _ := s.Defer(CreateSpec{ID: "c9", Name: "kid"}, true); !ok || !queued {
		t.Error("a name is not free again once its spawn is done")
	}
	s.Done("nobody")
	if len(s.specs) != 1 {
		t.Errorf("queue = %+v", s.specs)
	}
}

// A spawn_agent call in a turn queues the child (a second child of the
// same name is refused); the turn's end creates it and starts its
// bootstrap turn.
func TestDeferQueuesUntilTheTurnEnds(t *testing.T) {
	h := newHarness(t)
	results := make(chan [2]map[string]any, 1)
	release := make(chan struct{})
	h.prov.Register("spawner", func(ctx context.Context, tr *inproc.Turn) (string, error) {
		r1, err := tr.Call("spawn_agent", map[string]any{"name": "kid", "instructions": "go", "model": "echo"})
		if err != nil {
			return "", err
		}
		r2, err := tr.Call("spawn_agent", map[string]any{"name": "kid", "instructions": "again", "model": "echo"})
		if err != nil {
			return "", err
		}
		results <- [2]map[string]any{r1, r2}
		<-release
		return "done", nil
	})
	boss := h.create("boss", "", "spawner")
	done := make(chan TurnResult, 1)
	go func() { res, _ := h.c.Send(context.Background(), boss, "go", "", "", nil); done <- res }()
	r := <-results
	kid, _ := r[0]["agent_id"].(string)
	if kid == "" {
		t.Fatalf("spawn_agent = %v", r[0])
	}
	if e, _ := r[1]["error"].(string); !strings.Contains(e, "already being spawned in this turn") {
		t.Fatalf("a second child of the same name: %v", r[1])
	}
	if _, ok := h.c.agent(kid); ok || len(h.c.tree.Children(boss)) != 0 {
		t.Fatal("the child was created during its parent's turn")
	}
	if q := queued(mustAgent(t, h.c, boss)); len(q) != 1 || q[0].ID != kid {
		t.Fatalf("queued %+v", q)
	}
	close(release)
	if res := <-done; res.Err != nil {
		t.Fatal(res.Err)
	}
	if _, ok := h.c.agent(kid); !ok {
		t.Fatal("the child was not created when its parent's turn ended")
	}
	if ac := createdAs(t, h, kid); ac.Name != "kid" || ac.Instructions != "go" || ac.ParentID == nil || *ac.ParentID != boss {
		t.Fatalf("agent.created %+v", ac)
	}
	if q := queued(mustAgent(t, h.c, boss)); len(q) != 0 {
		t.Fatalf("still queued %+v", q)
	}
	bootstrapped(t, h, kid)
}

// deferSpawn for a parent that runs no turn creates the child at once
// and starts its bootstrap turn.
func TestDeferSpawnsNowOutsideATurn(t *testing.T) {
	h := newHarness(t)
	boss := h.create("boss", "", "echo")
	p := mustAgent(t, h.c, boss)
	kid := newID()
	if !h.c.deferSpawn(p, CreateSpec{ID: kid, Name: "kid", ParentID: boss, Provider: "inproc", Model: "echo"}) {
		t.Fatal("deferSpawn refused")
	}
	if _, ok := h.c.agent(kid); !ok || h.count(kid, schema.AgentCreated) != 1 {
		t.Fatal("the child was not created at once")
	}
	if q := queued(p); len(q) != 0 {
		t.Fatalf("queued %+v", q)
	}
	bootstrapped(t, h, kid)
}

// The spawn of a child that exists (a re-run turn spawned it again) takes
// it off the queue and does nothing else.
func TestSpawnOfAnExistingChildDoesNothing(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		h.noWake = true
		h.saveDelay = -1
	})
	boss := h.create("boss", "", "echo")
	kid := h.create("kid", boss, "echo")
	p := mustAgent(t, h.c, boss)
	spec := CreateSpec{ID: kid, Name: "kid", ParentID: boss}
	p.stateMu.Lock()
	p.spawns.Defer(spec, true) // as a turn's spawn_agent queued it
	p.stateMu.Unlock()
	h.c.snaps.Wait()
	ops, entries := len(h.fs.Ops()), len(h.entries(boss))
	h.c.spawn(p, spec)
	h.c.snaps.Wait()
	if q := queued(p); len(q) != 0 {
		t.Fatalf("still queued %+v", q)
	}
	if n := len(effects(h, ops)); n != 0 || len(h.entries(boss)) != entries || len(h.c.List()) != 2 {
		t.Fatalf("the spawn of an existing child made %d filesystem changes", n)
	}
}

// A failed spawn is told to the parent (an error from SYSTEM in its
// inbox) and logged; a failure to tell it is logged too.
func TestAFailedSpawnIsToldToTheParent(t *testing.T) {
	lp := &lifeProv{}
	h := newHarness(t, withLifeProv(lp), func(h *harness) {
		h.noWake = true
		h.healBackoff = -1
	})
	h.prov.Register("spawner", func(ctx context.Context, tr *inproc.Turn) (string, error) {
		r, err := tr.Call("spawn_agent", map[string]any{"name": "kid", "instructions": "go", "model": "echo"})
		if err == nil && r["error"] != nil {
			err = errors.New(r["error"].(string))
		}
		return "done", err
	})
	boss := h.create("boss", "", "spawner")
	lb := captureLog(h)
	cause := errors.New("no binary")
	lp.failCreate(cause)
	if res := h.send(boss, "go"); res.Err != nil {
		t.Fatal(res.Err)
	}
	msgs := pendingOf(mustAgent(t, h.c, boss))
	want := notice.SpawnFailed("kid", errors.New("creating the inproc session: multiplexer: open session"))
	if len(msgs) != 1 || msgs[0].Sender != tree.System || msgs[0].Kind != inbox.KindError ||
		!strings.HasPrefix(msgs[0].Payload, want) || !strings.HasSuffix(msgs[0].Payload, ": no binary") {
		t.Fatalf("the parent's inbox %+v; want an error from SYSTEM: %s...: no binary", msgs, want)
	}
	if len(h.c.tree.Children(boss)) != 0 || len(h.c.List()) != 1 {
		t.Fatal("the failed child is in the tree")
	}
	if log := lb.String(); !strings.Contains(log, "deferred spawn failed: parent="+boss+" name=kid err=") {
		t.Fatalf("log:\n%s", log)
	}
	// The parent's inbox refuses the notice: that is logged.
	h.fs.Inject(faultfs.Rule{Kind: faultfs.OpWrite, Path: boss + "/events.jsonl", Err: syscall.ENOSPC, Sticky: true})
	h.c.spawn(mustAgent(t, h.c, boss), CreateSpec{ID: newID(), Name: "kid2", ParentID: boss, Provider: "inproc", Model: "echo"})
	h.fs.ClearRules()
	if log := lb.String(); !strings.Contains(log, "reporting a failed spawn: parent="+boss+" err=") || !strings.Contains(log, "no space left on device") {
		t.Fatalf("log:\n%s", log)
	}
	// The name was freed.
	lp.failCreate(nil)
	if r := h.tool(boss, "spawn_agent", map[string]any{"name": "kid", "instructions": "go", "model": "echo"}); r["error"] != nil {
		t.Fatalf("spawn after the failure: %v", r)
	}
}

// Without wakes a spawned child is created and its session.json saved,
// but no bootstrap turn starts.
func TestNoWakeSpawnsWithoutABootstrapTurn(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		h.noWake = true
		h.saveDelay = -1
	})
	boss := h.create("boss", "", "echo")
	kid := newID()
	h.c.spawn(mustAgent(t, h.c, boss), CreateSpec{ID: kid, Name: "kid", ParentID: boss, Provider: "inproc", Model: "echo"})
	if _, ok := h.c.agent(kid); !ok {
		t.Fatal("the child was not created")
	}
	if s := savedSession(t, h, kid); s.ID != kid {
		t.Fatalf("session.json %+v", s)
	}
	h.quiet()
	if n := h.count(kid, schema.TurnStart); n != 0 {
		t.Fatalf("%d turns started without wakes", n)
	}
}

// A crash after a turn whose spawn_agent call was logged, before the
// child was created: recovery reads the recorded call and creates the
// child from it (the call's name, instructions and model, the parent's
// provider and working directory). A record that is not a well-formed
// spawn_agent call is logged and creates nothing.
func TestRespawnReadsTheRecordedCall(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.saveDelay = -1 })
	h.prov.Register("m2", inproc.Echo)
	kidID := make(chan string, 1)
	var once atomic.Bool
	h.prov.Register("spawner", func(ctx context.Context, tr *inproc.Turn) (string, error) {
		if once.Swap(true) {
			return "done", nil
		}
		r, err := tr.Call("spawn_agent", map[string]any{"name": "kid", "instructions": "go", "model": "m2"})
		if err != nil {
			return "", err
		}
		id := r["agent_id"].(string)
		kidID <- id
		// The filesystem goes down when the turn's end creates the child.
		h.fs.Inject(faultfs.Rule{Kind: faultfs.OpMkdir, Path: "/" + id, Crash: true})
		return "done", nil
	})
	boss, err := h.c.CreateAgent(context.Background(), CreateSpec{Name: "boss", Provider: "inproc", Model: "spawner", Cwd: "/w/boss"})
	if err != nil {
		t.Fatal(err)
	}
	_, _ = h.c.Send(context.Background(), boss, "go", "", "", nil)
	kid := <-kidID
	if !h.fs.Crashed() {
		t.Fatal("the child's creation did not reach its directory")
	}
	h.crash(faultfs.ProcessCrash)
	if n := h.count(boss, schema.TurnComplete); n != 1 {
		t.Fatalf("the parent's turn: turn.complete x%d", n)
	}
	if _, ok := h.c.agent(kid); !ok {
		t.Fatal("recovery did not create the child the recorded call accepted")
	}
	if ac := createdAs(t, h, kid); ac.Name != "kid" || ac.Instructions != "go" || ac.Model != "m2" || ac.Provider != "inproc" ||
		ac.Cwd != "/w/boss" || ac.ParentID == nil || *ac.ParentID != boss {
		t.Fatalf("agent.created %+v", ac)
	}
	bootstrapped(t, h, kid)

	// Records that are not a well-formed spawn_agent call: the agent's
	// first entry, a spawn_agent call without a name (a tool error), a
	// seq past the log's end.
	p := mustAgent(t, h.c, boss)
	r := h.tool(boss, "spawn_agent", map[string]any{"instructions": "no name"})
	if r["error"] == nil {
		t.Fatalf("spawn_agent without a name: %v", r)
	}
	noName := lastEntry(t, h, boss, schema.ToolCall)
	last, _ := p.LastSeq()
	lb := captureLog(h)
	h.quiet()
	h.c.snaps.Wait()
	ops, agents := len(h.fs.Ops()), len(h.c.List())
	for _, ref := range []inbox.Ref{{Seq: 1}, {Seq: noName.Seq, Off: noName.Off}, {Seq: last + 100}} {
		h.c.respawn(context.Background(), p, fold.Spawn{ChildID: newID(), Ref: ref})
	}
	h.c.snaps.Wait()
	if n := len(effects(h, ops)); n != 0 || len(h.c.List()) != agents {
		t.Fatalf("malformed records made %d filesystem changes (%v), %d agents", n, effects(h, ops), len(h.c.List())-agents)
	}
	if n := strings.Count(lb.String(), "a recorded spawn_agent call is malformed: parent="+boss); n != 3 {
		t.Fatalf("%d malformed calls logged, want 3:\n%s", n, lb.String())
	}
}

func TestChildSpecInherits(t *testing.T) {
	in := inherited{Provider: "claude", Model: "opus", Cwd: "/w"}
	for _, tc := range []struct {
		v           tools.SpawnAgent
		prov, model string
	}{
		{tools.SpawnAgent{Name: "k"}, "claude", "opus"},
		{tools.SpawnAgent{Name: "k", Model: "haiku"}, "claude", "haiku"},
		{tools.SpawnAgent{Name: "k", Provider: "claude"}, "claude", "opus"},
		{tools.SpawnAgent{Name: "k", Provider: "codex"}, "codex", ""},
		{tools.SpawnAgent{Name: "k", Provider: "codex", Model: "o3"}, "codex", "o3"},
	} {
		got := childSpec("p1", in, "c1", tc.v)
		want := CreateSpec{ID: "c1", Name: "k", ParentID: "p1", Provider: tc.prov, Model: tc.model, Cwd: "/w", Bootstrap: true,
			Workspace: &WorkspaceRequest{FromParent: true}}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("childSpec(%+v) = %+v, want %+v", tc.v, got, want)
		}
	}
	md := map[string]string{"k": "v"}
	if got := childSpec("p1", in, "c1", tools.SpawnAgent{Name: "k", Instructions: "i", Metadata: md}); got.Instructions != "i" || got.Metadata["k"] != "v" {
		t.Errorf("childSpec dropped the call's text: %+v", got)
	}
}

// complete in a turn terminates the agent after the turn; an idle agent
// is terminated at once; a termination that fails is logged.
func TestCompleteTerminatesAfterTheTurn(t *testing.T) {
	lw := &groupWrites{}
	h := newHarness(t, recordWrites(lw))
	completing, release := make(chan struct{}), make(chan struct{})
	h.prov.Register("finisher", func(ctx context.Context, tr *inproc.Turn) (string, error) {
		r, err := tr.Call("complete", map[string]any{"result": "42"})
		if err := errOf(r, err); err != nil {
			return "", err
		}
		completing <- struct{}{}
		<-release
		return "done", nil
	})
	h.prov.Register("quiet", inproc.Reply("noted"))
	root := h.create("root", "", "quiet")
	busy := h.create("busy", root, "finisher")
	done := make(chan TurnResult, 1)
	go func() { res, _ := h.c.Send(context.Background(), busy, "go", "", "", nil); done <- res }()
	<-completing
	if _, ok := h.c.agent(busy); !ok || h.count(busy, schema.AgentTerminated) != 0 {
		t.Fatal("the agent was terminated during its turn")
	}
	close(release)
	<-done
	if _, ok := h.c.agent(busy); ok {
		t.Fatal("the agent that completed in its turn was not terminated after it")
	}
	if !writesFollow(lw.of(busy), "turn.complete", "agent.terminated") {
		t.Fatalf("writes %q: want agent.terminated after turn.complete", lw.of(busy))
	}

	idle := h.create("idle", root, "echo")
	h.tool(idle, "complete", map[string]any{"result": "x"})
	if _, ok := h.c.agent(idle); ok || h.count(idle, schema.AgentTerminated) != 1 {
		t.Fatal("an idle agent that completed was not terminated")
	}

	broken := h.create("broken", root, "echo")
	h.send(broken, "hi")
	damageLogs(t, h, broken)
	lb := captureLog(h)
	h.c.complete(mustAgent(t, h.c, broken))
	if _, ok := h.c.agent(broken); !ok {
		t.Fatal("an agent whose termination failed is gone")
	}
	if !strings.Contains(lb.String(), "terminating a completed agent: agent="+broken) {
		t.Errorf("a failed termination is not logged:\n%s", lb.String())
	}
}

// A re-run turn (a resume after a restart) answers the spawn_agent and
// complete calls its log records from the record and redoes them: the
// spawn whose child does not exist is queued again (the call's spec, the
// parent's inherited values), the completion marked again. A call whose
// child exists, a result without a child, a call without a name, another
// tool: nothing.
func TestRedoRedoesASpawnOrACompletion(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.saveDelay = -1 })
	never := make(chan struct{})
	defer close(never)
	var spawnRuns, completeRuns atomic.Int32
	kidIDs := make(chan string, 2)
	looked := make(chan struct{})
	h.prov.Register("spawner", func(ctx context.Context, tr *inproc.Turn) (string, error) {
		n := spawnRuns.Add(1)
		r, err := tr.Call("spawn_agent", map[string]any{"name": "kid", "instructions": "go"})
		if err != nil {
			return "", err
		}
		kidIDs <- r["agent_id"].(string)
		if n == 1 {
			<-never // the crash cuts this run off
		}
		<-looked
		return "done", nil
	})
	h.prov.Register("finisher", func(ctx context.Context, tr *inproc.Turn) (string, error) {
		n := completeRuns.Add(1)
		r, err := tr.Call("complete", map[string]any{"result": "42"})
		if err := errOf(r, err); err != nil {
			return "", err
		}
		if n == 1 {
			<-never // the crash cuts this run off
		}
		return "done", nil
	})
	h.prov.Register("quiet", inproc.Reply("noted"))
	boss, err := h.c.CreateAgent(context.Background(), CreateSpec{Name: "boss", Provider: "inproc", Model: "spawner", Cwd: "/w/boss"})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = h.c.Send(context.Background(), boss, "go", "", "", nil) }()
	kid := <-kidIDs
	root := h.create("root", "", "quiet")
	finisher := h.create("finisher", root, "finisher")
	go func() { _, _ = h.c.Send(context.Background(), finisher, "go", "", "", nil) }()
	h.until("the finisher's complete is logged", func() bool { return h.count(finisher, schema.ToolCall) == 1 })
	h.crash(faultfs.ProcessCrash)
	if _, ok := h.c.agent(kid); ok {
		t.Fatal("the spawn of a run the crash left open was done by recovery")
	}

	// Nothing to redo.
	p := mustAgent(t, h.c, boss)
	h.quiet()
	h.c.snaps.Wait()
	ops := len(h.fs.Ops())
	args := map[string]any{"name": "kid", "instructions": "go"}
	h.c.redo(p, "spawn_agent", args, []byte(`{"agent_id":"`+root+`"}`)) // the child exists
	h.c.redo(p, "spawn_agent", args, []byte(`{}`))                      // no child id
	h.c.redo(p, "spawn_agent", map[string]any{}, []byte(`{"agent_id":"`+kid+`"}`))
	h.c.redo(p, "send_message", args, []byte(`{"agent_id":"`+kid+`"}`))
	h.c.snaps.Wait()
	if n := len(effects(h, ops)); n != 0 || len(queued(p)) != 0 {
		t.Fatalf("nothing to redo made %d filesystem changes, queued %+v", n, queued(p))
	}

	// The re-run redoes the spawn: queued, and created after the turn.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if res, err := h.c.Resume(ctx, boss, "", ""); err != nil || res.Status != "running" {
		t.Fatalf("re-run: %+v, %v", res, err)
	}
	if again := <-kidIDs; again != kid {
		t.Fatalf("the re-run's spawn_agent answered %s, want the recorded %s", again, kid)
	}
	want := CreateSpec{ID: kid, Name: "kid", ParentID: boss, Instructions: "go", Provider: "inproc", Model: "spawner", Cwd: "/w/boss", Bootstrap: true,
		Workspace: &WorkspaceRequest{FromParent: true}}
	if q := queued(p); len(q) != 1 || !reflect.DeepEqual(q[0], want) {
		t.Fatalf("queued %+v, want %+v", q, want)
	}
	if _, ok := h.c.agent(kid); ok {
		t.Fatal("the child was created during the re-run")
	}
	h.prov.Register("spawner", inproc.Reply("kid's turn")) // the child's bootstrap turn runs the parent's model
	close(looked)
	h.until("the child is created", func() bool { _, ok := h.c.agent(kid); return ok })
	if ac := createdAs(t, h, kid); ac.Name != "kid" || ac.Model != "spawner" || ac.Cwd != "/w/boss" || ac.ParentID == nil || *ac.ParentID != boss {
		t.Fatalf("agent.created %+v", ac)
	}

	// The re-run redoes the completion: terminated after the turn.
	if res, err := h.c.Resume(context.Background(), finisher, "", ""); err != nil || res.Err != nil {
		t.Fatalf("re-run: %+v, %v", res, err)
	}
	if _, ok := h.c.agent(finisher); ok || h.count(finisher, schema.AgentTerminated) != 1 {
		t.Fatal("the completion the re-run answered from its record was not redone")
	}
}

// childOf inherits from a live parent; a parent that is gone passes
// nothing on.
func TestChildOfInheritsFromALiveParent(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.noWake = true })
	lead, err := h.c.CreateAgent(context.Background(), CreateSpec{Name: "lead", Provider: "inproc", Model: "echo", Cwd: "/w/lead"})
	if err != nil {
		t.Fatal(err)
	}
	got := h.c.childOf(lead, "c1", tools.SpawnAgent{Name: "kid", Instructions: "go"})
	if want := (CreateSpec{ID: "c1", Name: "kid", ParentID: lead, Instructions: "go", Provider: "inproc", Model: "echo", Cwd: "/w/lead", Bootstrap: true,
		Workspace: &WorkspaceRequest{FromParent: true}}); !reflect.DeepEqual(got, want) {
		t.Fatalf("from a live parent: %+v, want %+v", got, want)
	}
	if err := h.c.Terminate(context.Background(), lead); err != nil {
		t.Fatal(err)
	}
	got = h.c.childOf(lead, "c1", tools.SpawnAgent{Name: "kid", Model: "m"})
	if want := (CreateSpec{ID: "c1", Name: "kid", ParentID: lead, Model: "m", Bootstrap: true, Workspace: &WorkspaceRequest{FromParent: true}}); !reflect.DeepEqual(got, want) {
		t.Fatalf("from a gone parent: %+v, want %+v", got, want)
	}
}

// checkChild checks the texts first, then the model (filled in from the
// provider entry's default), the provider and that the provider serves
// the model; the first refusal stops it. (The model check, which only
// fills in a default and refuses an HTTP entry without one, cannot be
// told apart from the provider check by its outcome.)
func TestCheckChildOrder(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.cfg.Limits.MessageBytes = 100 })
	spec := CreateSpec{Name: "kid", Provider: "inproc", Model: "echo"}
	if err := h.c.checkChild(&spec); err != nil {
		t.Fatal(err)
	}
	long := strings.Repeat("i", 101)
	err := h.c.checkChild(&CreateSpec{Name: "kid", Provider: "nope", Model: "no-such", Instructions: long})
	if err == nil || err.Error() != "instructions are 101 bytes, over the 100-byte limit (limits.message_bytes); shorten them" {
		t.Fatalf("instructions over the limit (and an unknown provider): %v", err)
	}
	err = h.c.checkChild(&CreateSpec{Name: "kid", Provider: "nope", Model: "no-such"})
	if !errors.Is(err, ErrInvalid) || !strings.HasPrefix(err.Error(), `unknown provider "nope"`) {
		t.Fatalf("an unknown provider (and a model nobody serves): %v", err)
	}
	err = h.c.checkChild(&CreateSpec{Name: "kid", Provider: "inproc", Model: "no-such"})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), `does not serve model "no-such"`) {
		t.Fatalf("a model the provider does not serve: %v", err)
	}
}

// The tools' side names agents by id: a spawn or completion for an agent
// that is gone does nothing; createChild creates the child and starts its
// bootstrap turn unless NoWake; markCompleting of an agent in a turn
// terminates it after the turn.
func TestToolsSideNamesAgentsByID(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.saveDelay = -1 })
	started, release := make(chan struct{}), make(chan struct{})
	h.prov.Register("work", held(started, release, inproc.Echo))
	h.prov.Register("quiet", inproc.Reply("noted"))
	lead := h.create("lead", "", "quiet")
	h.c.snaps.Wait()
	ops := len(h.fs.Ops())
	if h.c.deferSpawnOf("gone", CreateSpec{ID: newID(), Name: "kid", ParentID: "gone"}) {
		t.Fatal("a spawn was accepted for a gone parent")
	}
	h.c.markCompleting("gone")
	h.c.snaps.Wait()
	if n := len(effects(h, ops)); n != 0 || len(h.c.List()) != 1 {
		t.Fatalf("acting for a gone agent made %d filesystem changes", n)
	}
	kid := newID()
	if err := h.c.createChild(CreateSpec{ID: kid, Name: "kid", ParentID: lead, Provider: "inproc", Model: "echo"}); err != nil {
		t.Fatal(err)
	}
	bootstrapped(t, h, kid)

	worker := h.create("worker", lead, "work")
	done := busyAgent(h, worker, started)
	h.c.markCompleting(worker) // in a turn: terminated after it
	if _, ok := h.c.agent(worker); !ok {
		t.Fatal("an agent in a turn was terminated at once")
	}
	close(release)
	<-done
	if _, ok := h.c.agent(worker); ok {
		t.Fatal("the agent marked completing in its turn was not terminated after it")
	}

	h.noWake = true
	h.restart()
	quiet := newID()
	if err := h.c.createChild(CreateSpec{ID: quiet, Name: "quiet", ParentID: lead, Provider: "inproc", Model: "echo"}); err != nil {
		t.Fatal(err)
	}
	h.quiet()
	if n := h.count(quiet, schema.TurnStart); n != 0 {
		t.Fatalf("a bootstrap turn with NoWake (%d turns)", n)
	}
}
