package engine

import (
	"errors"
	"syscall"
	"testing"

	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/schema"
)

// An agent's gate (gate.go) through the real engine: what setGate and
// permitTurn log, and the turns they let start. (This test replaces the
// former package gate's, which drove it through a recording fake.)

// lastEntryData is the data of the last entry of event in agent id's log
// ("" when there is none).
func lastEntryData(h *harness, id, event string) string {
	data := ""
	for _, e := range h.entries(id) {
		if e.Event == event {
			data = string(e.Data)
		}
	}
	return data
}

// TestGateAndPermit: a gate change is logged first and withdraws the
// permit; only ungating wakes; a permit is logged, granted, then wakes
// (and the turn it lets start consumes it); a refused append changes
// nothing; an agent that is not live is ErrNoAgent.
func TestGateAndPermit(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.healBackoff = -1 })
	h.prov.Register("quiet", inproc.Reply("noted"))
	root := h.create("root", "", "quiet")
	kid := h.create("kid", root, "echo")
	h.quiet()
	k := mustAgent(t, h.c, kid)
	permitted := func() bool { return look(k, func(_ *projection, l liveFlags) bool { return l.Permit }) }
	gated := func() bool { return look(k, func(p *projection, _ liveFlags) bool { return p.Gated }) }
	turns := h.count(kid, schema.TurnStart)
	wantTurns := func(what string, n int) {
		t.Helper()
		h.quiet()
		if got := h.count(kid, schema.TurnStart); got != n {
			t.Fatalf("%s: kid started %d turns, want %d", what, got, n)
		}
	}

	// A permit granted with nothing to do stays; gating withdraws it.
	if err := h.c.permitTurn(kid, "kid"); err != nil {
		t.Fatal(err)
	}
	wantTurns("a permit with nothing pending", turns)
	if !permitted() {
		t.Fatal("the permit was not granted")
	}
	if err := h.c.setGate(kid, "kid", true); err != nil {
		t.Fatal(err)
	}
	if d := lastEntryData(h, kid, schema.ToolGate); d != `{"action":"gate","agent_name":"kid"}` || !gated() || permitted() {
		t.Fatalf("gate: logged %s, gated %v, permit %v; want gate logged, gated, the permit withdrawn", d, gated(), permitted())
	}
	mustEnqueue(t, h, mailMsg(h, "k1", root, kid, "one"))
	wantTurns("gated, the permit withdrawn, a message", turns)

	if err := h.c.setGate(kid, "kid", false); err != nil {
		t.Fatal(err)
	}
	if d := lastEntryData(h, kid, schema.ToolGate); d != `{"action":"ungate","agent_name":"kid"}` {
		t.Fatalf("ungate logged %s", d)
	}
	h.until("the ungated kid took its message", func() bool { return h.count(kid, schema.TurnComplete) == 1 })
	turns++
	wantTurns("ungated", turns)

	if err := h.c.setGate(kid, "kid", true); err != nil {
		t.Fatal(err)
	}
	mustEnqueue(t, h, mailMsg(h, "k2", root, kid, "two"))
	wantTurns("gated again, a message", turns)
	if err := h.c.permitTurn(kid, "kid"); err != nil {
		t.Fatal(err)
	}
	if d := lastEntryData(h, kid, schema.ToolPermitTurn); d != `{"action":"","agent_name":"kid"}` {
		t.Fatalf("permit logged %q", d)
	}
	h.until("the permitted turn", func() bool { return h.count(kid, schema.TurnComplete) == 2 })
	turns++
	wantTurns("permitted", turns)
	if permitted() || !gated() {
		t.Fatalf("after the permitted turn: permit %v, gated %v; want the permit consumed, still gated", permitted(), gated())
	}

	// Refused appends change nothing: a refused ungate leaves the gate and
	// a permit granted before; a refused permit grants none and starts no
	// turn.
	if err := h.c.permitTurn(kid, "kid"); err != nil {
		t.Fatal(err)
	}
	wantTurns("a permit with nothing pending", turns)
	gates, permits := h.count(kid, schema.ToolGate), h.count(kid, schema.ToolPermitTurn)
	failNextLogWrite(h, kid)
	if err := h.c.setGate(kid, "kid", false); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("setGate with a refused append = %v", err)
	}
	wantTurns("an ungate refused", turns)
	if !gated() || !permitted() || h.count(kid, schema.ToolGate) != gates {
		t.Fatalf("after a refused ungate: gated %v, permit %v, tool.gate %d (want %d); want both kept, nothing logged",
			gated(), permitted(), h.count(kid, schema.ToolGate), gates)
	}
	if err := h.c.setGate(kid, "kid", true); err != nil { // withdraws the permit
		t.Fatal(err)
	}
	mustEnqueue(t, h, mailMsg(h, "k3", root, kid, "three"))
	wantTurns("gated, a message", turns)
	failNextLogWrite(h, kid)
	if err := h.c.permitTurn(kid, "kid"); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("permitTurn with a refused append = %v", err)
	}
	wantTurns("a permit refused", turns)
	if !gated() || permitted() || h.count(kid, schema.ToolPermitTurn) != permits {
		t.Fatalf("after a refused permit: gated %v, permit %v, tool.permit_turn %d (want %d); want no permit, nothing logged",
			gated(), permitted(), h.count(kid, schema.ToolPermitTurn), permits)
	}

	if err := h.c.setGate("x", "kid", false); !errors.Is(err, errNotFoundAgent) {
		t.Fatalf("setGate for no agent = %v", err)
	}
	if err := h.c.permitTurn("x", "kid"); !errors.Is(err, errNotFoundAgent) {
		t.Fatalf("permitTurn for no agent = %v", err)
	}
}
