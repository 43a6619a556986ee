package lifecycle

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/inbox"
	fold "github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/tools"
)

func TestSpawnsDecideEachSpawn(t *testing.T) {
	var s Spawns
	type verdict struct{ ok, queued, now bool }
	for _, tc := range []struct {
		spec   Spec
		inTurn bool
		want   verdict
	}{
		{Spec{ID: "c1", Name: "kid"}, true, verdict{true, true, false}},   // queued
		{Spec{ID: "c1", Name: "kid"}, true, verdict{true, false, false}},  // the same child again: accepted, nothing done
		{Spec{ID: "c9", Name: "kid"}, true, verdict{false, false, false}}, // another child of that name: refused
		{Spec{ID: "c9", Name: "kid"}, false, verdict{false, false, false}},
		{Spec{ID: "c2", Name: "other"}, false, verdict{true, false, true}}, // not in a turn: now
	} {
		ok, queued, now := s.Defer(tc.spec, tc.inTurn)
		if got := (verdict{ok, queued, now}); got != tc.want {
			t.Errorf("Defer(%s %s, inTurn %v) = %+v, want %+v", tc.spec.ID, tc.spec.Name, tc.inTurn, got, tc.want)
		}
	}
	s.Done("c1")
	if ok, queued, _ := s.Defer(Spec{ID: "c9", Name: "kid"}, true); !ok || !queued {
		t.Error("a name is not free again once its spawn is done")
	}
	s.Done("nobody")
	if len(s.specs) != 1 {
		t.Errorf("queue = %+v", s.specs)
	}
}

func TestDeferQueuesUntilTheTurnEnds(t *testing.T) {
	f := newFake()
	p := f.add("p1", "boss", "")
	p.look.Busy = true
	l := f.life()
	if !l.Defer(p, Spec{ID: "c1", Name: "kid", Provider: "prov"}) {
		t.Fatal("Defer refused")
	}
	sameSteps(t, f.took(), "p1 defer kid ok=true queued=true now=false")
	if l.Defer(p, Spec{ID: "c2", Name: "kid"}) {
		t.Error("a second child of the same name was accepted")
	}
	f.took()
	// The turn's end runs the queued spawn.
	p.look.Busy = false
	for _, later := range p.later {
		later()
	}
	steps := f.took()
	sameSteps(t, steps[:2], "p1 spawned c1", "provider prov")
	sameSteps(t, steps[len(steps)-2:], "c1 save", "c1 bootstrap")
}

func TestDeferSpawnsNowOutsideATurn(t *testing.T) {
	f := newFake()
	p := f.add("p1", "boss", "")
	if !f.life().Defer(p, Spec{ID: "c1", Name: "kid"}) {
		t.Fatal("Defer refused")
	}
	steps := f.took()
	sameSteps(t, steps[:2], "p1 defer kid ok=true queued=false now=true", "p1 spawned c1")
	sameSteps(t, steps[len(steps)-1:], "c1 bootstrap")
}

func TestSpawnOfAnExistingChildDoesNothing(t *testing.T) {
	f := newFake()
	p := f.add("p1", "boss", "")
	f.add("c1", "kid", "p1")
	f.life().Spawn(p, Spec{ID: "c1", Name: "kid"})
	sameSteps(t, f.took(), "p1 spawned c1")
}

func TestAFailedSpawnIsToldToTheParent(t *testing.T) {
	f := newFake()
	p := f.add("p1", "boss", "")
	f.sessionErr = errors.New("no binary")
	f.tellErr = errors.New("inbox full")
	f.life().Spawn(p, Spec{ID: "c1", Name: "kid"})
	steps := f.took()
	sameSteps(t, steps[len(steps)-2:], "unreserve c1", `tell p1 spawning "kid" failed: no binary`)
	log := f.logBuf.String()
	if !strings.Contains(log, `deferred spawn failed: parent=p1 name=kid err="no binary"`) ||
		!strings.Contains(log, `reporting a failed spawn: parent=p1 err="inbox full"`) {
		t.Errorf("log:\n%s", log)
	}
}

func TestNoWakeSpawnsWithoutABootstrapTurn(t *testing.T) {
	f := newFake()
	p := f.add("p1", "boss", "")
	l := f.life()
	l.NoWake = true
	l.Spawn(p, Spec{ID: "c1", Name: "kid"})
	steps := f.took()
	sameSteps(t, steps[len(steps)-1:], "c1 save")
}

func TestRespawnReadsTheRecordedCall(t *testing.T) {
	f := newFake()
	p := f.add("p1", "boss", "")
	f.entries = map[uint64]eventlog.Entry{
		4: {Seq: 4, Data: []byte(`{"tool":"spawn_agent","args":{"name":"kid","instructions":"go","model":"m2"}}`)},
		5: {Seq: 5, Data: []byte(`{"tool":"spawn_agent","args":{"instructions":"no name"}}`)},
		6: {Seq: 6, Data: []byte(`{"args":`)},
	}
	l := f.life()
	l.NoWake = true
	l.Respawn(p, fold.Spawn{ChildID: "c1", Ref: inbox.Ref{Seq: 4, Off: 100}})
	steps := f.took()
	sameSteps(t, steps[:3], "read p1 4 100", "p1 spawned c1", "provider p-p1")
	if f.agents["c1"] == nil {
		t.Fatal("the child was not created")
	}
	var created map[string]any
	b, _ := json.Marshal(f.recs[0].Data)
	if err := json.Unmarshal(b, &created); err != nil {
		t.Fatal(err)
	}
	if created["name"] != "kid" || created["model"] != "m2" || created["parent_id"] != "p1" || created["cwd"] != "/w/p1" {
		t.Errorf("agent.created = %v", created)
	}

	for _, seq := range []uint64{5, 6, 7} {
		l.Respawn(p, fold.Spawn{ChildID: "c2", Ref: inbox.Ref{Seq: seq}})
		if steps := f.took(); len(steps) != 1 {
			t.Errorf("seq %d: steps %q, want only the read", seq, steps)
		}
	}
	if n := strings.Count(f.logBuf.String(), "a recorded spawn_agent call is malformed: parent=p1"); n != 3 {
		t.Errorf("%d malformed calls logged, want 3:\n%s", n, f.logBuf.String())
	}
}

func TestChildSpecInherits(t *testing.T) {
	in := Inherited{Provider: "claude", Model: "opus", Cwd: "/w"}
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
		got := ChildSpec("p1", in, "c1", tc.v)
		want := Spec{ID: "c1", Name: "k", ParentID: "p1", Provider: tc.prov, Model: tc.model, Cwd: "/w"}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("ChildSpec(%+v) = %+v, want %+v", tc.v, got, want)
		}
	}
	md := map[string]string{"k": "v"}
	if got := ChildSpec("p1", in, "c1", tools.SpawnAgent{Name: "k", Instructions: "i", Metadata: md}); got.Instructions != "i" || got.Metadata["k"] != "v" {
		t.Errorf("ChildSpec dropped the call's text: %+v", got)
	}
}

func TestCompleteTerminatesAfterTheTurn(t *testing.T) {
	f := newFake()
	a := f.add("a1", "kid", "")
	a.look.Busy = true
	f.life().Complete(a)
	sameSteps(t, f.took(), "a1 completing")

	a.look.Busy = false
	f.life().Complete(a)
	steps := f.took()
	sameSteps(t, steps[:2], "a1 completing", "a1 flush owed")
	if f.agents["a1"] != nil {
		t.Error("an idle agent that completed was not terminated")
	}

	b := f.add("b1", "other", "")
	b.look.Corrupt = true
	f.life().Complete(b)
	if !strings.Contains(f.logBuf.String(), "terminating a completed agent: agent=b1") {
		t.Errorf("a failed termination is not logged:\n%s", f.logBuf.String())
	}
}

func TestRedoRedoesASpawnOrACompletion(t *testing.T) {
	f := newFake()
	p := f.add("p1", "boss", "")
	p.look.Busy = true // a re-run turn
	f.add("c0", "there", "p1")
	l := f.life()
	args := map[string]any{"name": "kid", "instructions": "go"}
	l.Redo(p, "spawn_agent", args, []byte(`{"agent_id":"c0"}`))             // the child exists
	l.Redo(p, "spawn_agent", args, []byte(`{}`))                            // no child id
	l.Redo(p, "spawn_agent", map[string]any{}, []byte(`{"agent_id":"c1"}`)) // no name
	l.Redo(p, "send_message", args, []byte(`{"agent_id":"c1"}`))            // not a lifecycle tool
	sameSteps(t, f.took())

	l.Redo(p, "spawn_agent", args, []byte(`{"agent_id":"c1"}`))
	sameSteps(t, f.took(), "p1 defer kid ok=true queued=true now=false")
	if len(p.queue.specs) != 1 || !reflect.DeepEqual(p.queue.specs[0], Spec{ID: "c1", Name: "kid", ParentID: "p1", Instructions: "go",
		Provider: "p-p1", Model: "m-p1", Cwd: "/w/p1"}) {
		t.Errorf("queued %+v", p.queue.specs)
	}
	l.Redo(p, "complete", nil, nil)
	sameSteps(t, f.took(), "p1 completing")
}
