package engine

import (
	"context"
	"encoding/json"
	"errors"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warren-dev/warren/engine/internal/placement"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/inbox"
	fold "github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/schema"
)

// fakeLog is a store.Log that commits each append into its record at
// once, as the engine's OnAppend does: the entry is folded into the
// projection before Append returns.
type fakeLog struct {
	a        *agent
	seq      uint64
	degraded error
	every    int  // the checkpoint interval handed to ApplyCommitted
	due      bool // what the last commit said of a checkpoint
}

func (l *fakeLog) Append(event string, data any) (eventlog.Entry, error) {
	es, err := l.AppendBatch([]eventlog.Record{{Event: event, Data: data}})
	if err != nil {
		return eventlog.Entry{}, err
	}
	return es[0], nil
}

func (l *fakeLog) AppendBatch(recs []eventlog.Record) ([]eventlog.Entry, error) {
	es := make([]eventlog.Entry, len(recs))
	for i, r := range recs {
		b, err := json.Marshal(r.Data)
		if err != nil {
			return nil, err
		}
		l.seq++
		es[i] = eventlog.Entry{Seq: l.seq, Off: int64(l.seq) * 100, TS: time.Unix(int64(l.seq), 0).UTC(), Event: r.Event, Data: b}
	}
	var foldErr error
	l.due = l.a.ApplyCommitted(es, l.every, func(_ eventlog.Entry, err error) { foldErr = err })
	return es, foldErr
}

func (l *fakeLog) LastSeq() uint64                                   { return l.seq }
func (l *fakeLog) Degraded() error                                   { return l.degraded }
func (l *fakeLog) VerifyPrefix() error                               { return nil }
func (l *fakeLog) ReadAll(context.Context) ([]eventlog.Entry, error) { return nil, nil }
func (l *fakeLog) Abandon()                                          {}
func (l *fakeLog) Close() error                                      { return nil }
func ptr(s string) *string                                           { return &s }

// logs appends one entry to a's log, failing the test if it cannot.
func logs(t *testing.T, a *agent, event string, data any) {
	t.Helper()
	_, err := a.Append(event, data)
	noErr(t, err)
}

func noErr(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// newRec makes the record of a created child agent "a1" (parent "p1")
// over a fakeLog.
func newRec(t *testing.T) (*agent, *fakeLog) {
	t.Helper()
	lg := &fakeLog{every: 3}
	a := newAgent("a1", lg, fold.New())
	lg.a = a
	logs(t, a, schema.AgentCreated, schema.AgentCreatedData{AgentID: "a1", Name: "worker", ParentID: ptr("p1"),
		Provider: "prov", Model: "mod", Bootstrap: true})
	return a, lg
}

func enqueue(t *testing.T, a *agent, id string) {
	t.Helper()
	m := inbox.Message{ID: id, Sender: "p1", Recipient: "a1", Kind: inbox.KindRequest, Payload: "hi " + id,
		Timestamp: time.Unix(1, 0).UTC(), Metadata: map[string]string{}}
	logs(t, a, schema.MessageEnqueued, m.EventData())
}

func startRun(t *testing.T, a *agent, run string) {
	t.Helper()
	logs(t, a, schema.TurnStart, schema.TurnStartData{RunID: run, Turn: 1, BootID: "b", Prompt: "go"})
}

func wait(t *testing.T, a *agent, run string) {
	t.Helper()
	logs(t, a, schema.RunWaiting, schema.RunWaitingData{RunID: run, WaitKind: "input", Prompt: "ok?", TokenID: "tok",
		Deadline: time.Unix(100, 0).UTC().Format(time.RFC3339Nano), SecretHash: "h", Turn: 1})
}

// Claim refuses, each with its condition, an agent whose log is damaged
// (unavailable when it was only not opened), terminated, released or
// mid-turn; otherwise it marks the agent busy until Unclaim.
func TestClaimRefusesByCondition(t *testing.T) {
	cases := []struct {
		name string
		set  func(a *agent)
		want error
	}{
		{"unopened", func(a *agent) { a.MarkCorrupt(errUnopened) }, ErrUnavailable},
		{"damaged", func(a *agent) { a.MarkCorrupt(errors.New("bad line")) }, ErrWrongState},
		{"terminated", func(a *agent) {
			logs(t, a, schema.AgentTerminated, schema.AgentTerminatedData{AgentID: "a1"})
		}, ErrWrongState},
		{"released", func(a *agent) { a.MarkReleased(errors.New("lease lost")) }, ErrUnavailable},
		{"busy", func(a *agent) { noErr(t, a.Claim()) }, ErrWrongState},
	}
	for _, tc := range cases {
		a, _ := newRec(t)
		tc.set(a)
		if err := a.Claim(); !errors.Is(err, tc.want) {
			t.Errorf("%s: Claim = %v, want %v", tc.name, err, tc.want)
		}
	}
	a, _ := newRec(t)
	noErr(t, a.Claim())
	if !active(a, true) {
		t.Fatal("a claimed agent is not active")
	}
	a.Unclaim()
	if active(a, true) {
		t.Fatal("an unclaimed agent is still active")
	}
}

// TakeWake claims an idle agent with pending messages and shows them; a
// hold after a failure (unless lifted), a gate without a permit, a live
// wait, a log refusing appends and a completion each keep it asleep.
func TestTakeWakeDecides(t *testing.T) {
	a, lg := newRec(t)
	if _, ok := a.TakeWake(false, 10, 1<<20); ok {
		t.Fatal("woke with nothing pending")
	}
	enqueue(t, a, "m1")
	enqueue(t, a, "m2")
	if !active(a, false) || active(a, true) {
		t.Fatal("a wake is due (unless wakes are off)")
	}
	msgs, ok := a.TakeWake(false, 1, 1<<20)
	if !ok || len(msgs) != 1 || msgs[0].ID != "m1" {
		t.Fatalf("TakeWake = %v %v, want m1 alone", msgs, ok)
	}
	if _, ok := a.TakeWake(false, 10, 1<<20); ok {
		t.Fatal("woke a busy agent")
	}
	a.Rest(true) // the turn failed: held
	a.Settled()
	if _, ok := a.TakeWake(false, 10, 1<<20); ok {
		t.Fatal("woke a held agent")
	}
	if _, ok := a.TakeWake(true, 10, 1<<20); !ok {
		t.Fatal("a poke did not lift the hold")
	}
	a.Rest(false)
	a.Settled()

	logs(t, a, schema.ToolGate, schema.GateData{Action: "gate", AgentName: "worker"})
	if !a.Gated() {
		t.Fatal("not gated")
	}
	if _, ok := a.TakeWake(false, 10, 1<<20); ok {
		t.Fatal("woke a gated agent")
	}
	a.SetPermit(true)
	if _, ok := a.TakeWake(false, 10, 1<<20); !ok {
		t.Fatal("a permit did not let the gated agent take one turn")
	}
	a.Rest(false)
	a.Settled()
	if _, ok := a.TakeWake(false, 10, 1<<20); ok || !a.Gated() {
		t.Fatal("the permit was not used up by the turn")
	}
	logs(t, a, schema.ToolGate, schema.GateData{Action: "ungate", AgentName: "worker"})

	lg.degraded = errors.New("disk full")
	if _, ok := a.TakeWake(false, 10, 1<<20); ok {
		t.Fatal("woke an agent whose log refuses appends")
	}
	lg.degraded = nil

	noErr(t, a.Claim())
	if inTurn := a.Completing(); !inTurn {
		t.Fatal("Completing in a turn says no turn")
	}
	a.Rest(false)
	a.Settled()
	if _, ok := a.TakeWake(false, 10, 1<<20); ok {
		t.Fatal("woke a completing agent")
	}
}

// A live wait keeps the agent from waking and is what a new message
// supersedes; a run a restart interrupted is abandoned instead.
func TestLiveWaitAndSuperseded(t *testing.T) {
	a, _ := newRec(t)
	startRun(t, a, "r1")
	wait(t, a, "r1")
	enqueue(t, a, "m1")
	if !a.HasLiveWait() || a.State() != schema.StateWaiting || a.LiveWait() == nil {
		t.Fatalf("live wait not seen: state %s", a.State())
	}
	if _, ok := a.TakeWake(false, 10, 1<<20); ok {
		t.Fatal("woke an agent waiting on a live token")
	}
	if d := a.WaitDeadline(); !d.Equal(time.Unix(100, 0)) {
		t.Fatalf("deadline %v", d)
	}
	tok, run, kind, abandoned := a.Superseded()
	if tok != "tok" || run != "r1" || kind != "input" || abandoned != "" {
		t.Fatalf("Superseded = %q %q %q %q", tok, run, kind, abandoned)
	}
	l := a.Look()
	if l.WaitToken != "tok" || l.RunID != "r1" || !l.OpenRun {
		t.Fatalf("Look = %+v", l)
	}

	b, _ := newRec(t)
	startRun(t, b, "r2")
	logs(t, b, schema.RunInterrupted, schema.RunInterruptedData{RunID: "r2", Reason: schema.ReasonProcessRestart})
	if tok, _, _, abandoned := b.Superseded(); tok != "" || abandoned != "r2" {
		t.Fatalf("Superseded = %q, abandoned %q; want r2 abandoned", tok, abandoned)
	}
}

// The running turn: StartTurn makes it current with the run Choose picks,
// an attempt's tools are published for that run only while it is open, Rest hands over the work
// deferred during it, and Release cancels it once.
func TestTurnOnTheRecord(t *testing.T) {
	a, _ := newRec(t)
	noErr(t, a.Claim())
	cancelled := 0
	tr, turn, released := a.StartTurn(TurnRequest{Prompt: "go"}, func(error) { cancelled++ },
		func(string) string { return "def" }, func() string { return "run9" })
	if released != nil || tr.RunID != "run9" || tr.Turn != 1 || tr.Provider != "prov" || tr.Model != "mod" {
		t.Fatalf("StartTurn = %+v, %v", tr, released)
	}
	if !a.StartsRun("run9") || a.StartsRun("other") {
		t.Fatal("StartsRun wrong")
	}
	tools := &runTools{}
	a.setTurnTools("other", tools)
	if got, _ := a.TurnTools(); got != nil {
		t.Fatal("tools of another run were published")
	}
	a.setTurnTools("run9", tools)
	if got, name := a.TurnTools(); got != tools || name != "worker" {
		t.Fatalf("TurnTools = %v %q", got, name)
	}
	a.setTurnTools("run9", nil)
	if got, _ := a.TurnTools(); got != nil {
		t.Fatal("a closed attempt's tools are still published")
	}
	ran := false
	if ok, now := a.Defer(lifecycleSpec("kid"), func() { ran = true }); !ok || now {
		t.Fatalf("Defer in a turn = %v %v, want queued", ok, now)
	}
	if first, cancel := a.MarkReleased(errors.New("fenced")); !first || cancel == nil {
		t.Fatal("the first release returns the turn's cancel")
	}
	if first, _ := a.MarkReleased(errors.New("again")); first {
		t.Fatal("a second release is not the first")
	}
	a.CancelTurn(errOperatorCancel)
	if cancelled != 1 {
		t.Fatalf("cancelled %d times", cancelled)
	}
	deferred, completing := a.Rest(false)
	if len(deferred) != 1 || completing {
		t.Fatalf("Rest = %d deferred, completing %v", len(deferred), completing)
	}
	deferred[0]()
	if !ran || !active(a, true) {
		t.Fatal("the deferred work did not run, or the agent is not settling")
	}
	a.Settled()
	if active(a, true) {
		t.Fatal("settled, yet active")
	}
	turn.End()
	if a.WaitState().Turn != nil || a.StartsRun("run9") {
		t.Fatal("the turn is still current after Rest")
	}
}

// ApplyCommitted asks for a checkpoint after any entry at rest, and while
// a turn runs only once the log grew by every entries; never when
// checkpoints are off. CheckpointState is due only for a created agent
// whose log grew by min since the last one.
func TestCheckpointDue(t *testing.T) {
	a, lg := newRec(t)
	if !lg.due {
		t.Fatal("an entry at rest is not due")
	}
	noErr(t, a.Claim())
	enqueue(t, a, "m1") // seq 2
	if lg.due {
		t.Fatal("due after 2 entries while busy (every 3)")
	}
	enqueue(t, a, "m2") // seq 3
	if !lg.due {
		t.Fatal("not due after every entries while busy")
	}
	lg.every = 0
	a.Unclaim()
	enqueue(t, a, "m3")
	if lg.due {
		t.Fatal("due with checkpoints off")
	}
	seq, off, state, due, err := a.CheckpointState(1)
	if err != nil || !due || seq != 4 || off != 400 || len(state) == 0 {
		t.Fatalf("CheckpointState = %d %d %d bytes %v %v", seq, off, len(state), due, err)
	}
	a.Ckpt.Seq.Store(seq)
	if _, _, _, due, _ := a.CheckpointState(1); due {
		t.Fatal("due with nothing logged since")
	}
	b := newAgent("b", nil, fold.New())
	if _, _, _, due, _ := b.CheckpointState(0); due {
		t.Fatal("due without a log")
	}
}

// Prune keeps the sent messages keep wants and the spawns whose child
// does not exist; Subscriptions filters by target.
func TestPruneAndSubscriptions(t *testing.T) {
	a, _ := newRec(t)
	startRun(t, a, "r1")
	m := func(id, to string) map[string]any {
		return inbox.Message{ID: id, Sender: "a1", Recipient: to, Kind: inbox.KindRequest, Payload: "x",
			Timestamp: time.Unix(1, 0).UTC(), Metadata: map[string]string{}}.EventData()
	}
	logs(t, a, schema.ToolCall, schema.ToolCallData{CallID: "c1", Tool: "send_message", RunID: "r1", Turn: 1,
		Messages: []map[string]any{m("s1", "b"), m("s2", "c")}})
	if got := a.Sent(); len(got) != 2 {
		t.Fatalf("Sent = %v", got)
	}
	a.Prune(placement.Existing{}, func(s fold.SentRef) bool { return s.To == "c" })
	if got := a.Sent(); len(got) != 1 || got[0].ID != "s2" {
		t.Fatalf("after Prune, Sent = %v", got)
	}
	for _, s := range []schema.SubscribeData{{SubscriptionID: "x", TargetID: "b"}, {SubscriptionID: "y", TargetID: "c"}} {
		logs(t, a, schema.ToolSubscribe, s)
	}
	if n := len(a.Subscriptions(nil)); n != 2 {
		t.Fatalf("%d subscriptions", n)
	}
	if got := a.Subscriptions(map[string]bool{"c": true}); len(got) != 1 || got[0].ID != "y" {
		t.Fatalf("to c: %v", got)
	}
}

func lifecycleSpec(id string) CreateSpec { return CreateSpec{ID: id, Name: id, ParentID: "a1"} }

// active is the first half of activity: whether the record is active.
func active(a *agent, noWake bool) bool {
	act, _ := a.activity(noWake)
	return act
}

// The record's lock is taken only by the record's own methods (the
// agent*.go files): every other file of the engine reads and writes an
// agent through them, so the lock order written in doc.go holds by
// construction.
func TestOnlyTheRecordTakesItsLock(t *testing.T) {
	files, err := filepath.Glob("*.go")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	fset := token.NewFileSet()
	for _, f := range files {
		if strings.HasSuffix(f, "_test.go") || strings.HasPrefix(f, "agent") {
			continue
		}
		file, err := parser.ParseFile(fset, f, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		checked++
		ast.Inspect(file, func(n ast.Node) bool {
			if sel, ok := n.(*ast.SelectorExpr); ok && sel.Sel.Name == "stateMu" {
				t.Errorf("%s takes the record's lock (stateMu); add a method to the record (agent*.go) instead",
					fset.Position(sel.Pos()))
			}
			return true
		})
	}
	if checked < 20 {
		t.Fatalf("checked %d files; the engine has more: is the test running in its directory?", checked)
	}
}
