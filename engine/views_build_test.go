package engine

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/warren-dev/warren/inbox"
	fold "github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/session"
)

var (
	t0       = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	deadline = t0.Add(time.Hour)
)

// waitingState is a projection whose open run r1 (started under boot b1)
// waits on a token in state tok.
func waitingState(tok string) *fold.State {
	p := fold.New()
	p.Name, p.ParentID, p.Provider, p.Model, p.CreatedTS = "kid", "p1", "echo", "m", t0
	p.Usage = provider.Usage{InputTokens: 3}
	p.LastError = "boom"
	p.Run = &fold.Run{RunID: "r1", BootID: "b1", StartedAt: t0.Add(time.Minute),
		Wait: &fold.Wait{TokenID: "tok_1", Kind: "approval", Prompt: "deploy?", Deadline: deadline,
			Since: t0.Add(2 * time.Minute), TokenState: tok}}
	return p
}

func TestFacts(t *testing.T) {
	p := waitingState("live")
	p.Run.ClaimEpoch, p.ClaimEpoch = 1, 2
	p.Run.Interrupted, p.Run.Reason = true, "process_restart"
	want := session.Facts{RunID: "r1", RunBootID: "b1", EarlierClaim: true, Interrupted: true,
		InterruptReason: "process_restart", Waiting: true, WaitDeadline: deadline, Token: session.TokenLive}
	if got := viewFacts(p, false); got != want {
		t.Errorf("Facts = %+v, want %+v", got, want)
	}
	for tok, want := range map[string]session.TokenState{"live": session.TokenLive, "consumed": session.TokenConsumed,
		"revoked": session.TokenRevoked, "expired": session.TokenExpired, "": session.TokenNone} {
		f := viewFacts(waitingState(tok), false)
		if f.Token != want || f.Waiting != (tok != "consumed") {
			t.Errorf("token %q: Token = %q, Waiting = %v; want %q, %v", tok, f.Token, f.Waiting, want, tok != "consumed")
		}
	}
	none := fold.New()
	none.Terminated = true
	if got := viewFacts(none, true); got != (session.Facts{Corrupt: true, Terminated: true}) {
		t.Errorf("Facts with no run = %+v, want only Corrupt and Terminated", got)
	}
}

func TestStatus(t *testing.T) {
	open := session.Facts{RunID: "r1", RunBootID: "b1"}
	for _, tc := range []struct {
		name string
		f    session.Facts
		busy bool
		want string
	}{
		{"idle", session.Facts{}, false, "idle"},
		{"idle but claimed by a turn", session.Facts{}, true, "running"},
		{"running", open, false, "running"},
		{"started under another boot", session.Facts{RunID: "r1", RunBootID: "b0"}, false, "interrupted_startup"},
		{"interrupted but claimed", session.Facts{RunID: "r1", RunBootID: "b0"}, true, "running"},
		{"suspended", session.Facts{RunID: "r1", RunBootID: "b1", Waiting: true, Token: session.TokenLive, WaitDeadline: deadline}, false, "suspended"},
		{"suspended and claimed stays suspended", session.Facts{RunID: "r1", RunBootID: "b1", Waiting: true, Token: session.TokenLive, WaitDeadline: deadline}, true, "suspended"},
		{"overdue", session.Facts{RunID: "r1", RunBootID: "b1", Waiting: true, Token: session.TokenLive, WaitDeadline: t0}, false, "interrupted_waiting"},
		{"overdue but claimed", session.Facts{RunID: "r1", RunBootID: "b1", Waiting: true, Token: session.TokenLive, WaitDeadline: t0}, true, "running"},
		{"corrupt", session.Facts{Corrupt: true}, true, "corrupt"},
		{"terminated", session.Facts{Terminated: true}, true, "terminated"},
	} {
		if got := viewStatus(nil, tc.f, tc.busy, "b1", t0.Add(time.Minute)); got != tc.want {
			t.Errorf("%s: Status = %q, want %q", tc.name, got, tc.want)
		}
	}
	// The snapshot counts: session.json says terminated.
	if got := viewStatus(&session.Session{State: session.StateTerminated}, open, false, "b1", t0); got != "terminated" {
		t.Errorf("Status with a terminated snapshot = %q, want terminated", got)
	}
}

func TestTakeAndView(t *testing.T) {
	p := waitingState("live")
	if err := p.Pending.Push(inbox.Message{ID: "m1", Sender: "USER", Recipient: "a1", Kind: inbox.KindRequest}); err != nil {
		t.Fatal(err)
	}
	s := takeSnapshot(p, viewFlags{ID: "a1", Path: "root/kid", Busy: false, Degraded: "disk full"})
	want := agentSnapshot{ID: "a1", Name: "kid", ParentID: "p1", Path: "root/kid", Provider: "echo", Model: "m", LastError: "boom",
		Pending: 1, Usage: provider.Usage{InputTokens: 3}, CreatedAt: t0, LastTurnAt: t0.Add(time.Minute),
		Wait:      &WaitInfo{RunID: "r1", Kind: "approval", Prompt: "deploy?", TokenID: "tok_1", Deadline: deadline, State: "live"},
		WaitSince: t0.Add(2 * time.Minute), Facts: viewFacts(p, false), Degraded: "disk full"}
	if !reflect.DeepEqual(s, want) {
		t.Fatalf("Take =\n%+v\nwant\n%+v", s, want)
	}
	// The snapshot shares nothing the projection changes later.
	p.Run.Wait.TokenState, p.Run.Wait.Prompt, p.Name = "consumed", "changed", "other"
	if s.Wait.State != "live" || s.Wait.Prompt != "deploy?" || s.Name != "kid" {
		t.Errorf("the snapshot changed with the projection: %+v", s)
	}

	v := buildView(s, "b1", t0.Add(3*time.Minute))
	wantView := AgentView{ID: "a1", Name: "kid", Path: "root/kid", ParentID: "p1", Status: "suspended", Provider: "echo",
		Model: "m", Pending: 1, Wait: s.Wait, LastError: "boom", Degraded: "disk full", Usage: provider.Usage{InputTokens: 3},
		CreatedAt: t0, LastTurnAt: t0.Add(time.Minute)}
	if !reflect.DeepEqual(v, wantView) {
		t.Errorf("View =\n%+v\nwant\n%+v", v, wantView)
	}

	// An ended run shows no wait; its start is still the last turn's.
	p = waitingState("live")
	p.Run.Ended = true
	if s := takeSnapshot(p, viewFlags{ID: "a1"}); s.Wait != nil || s.LastTurnAt != t0.Add(time.Minute) {
		t.Errorf("ended run: Wait = %+v, LastTurnAt = %v; want none, the run's start", s.Wait, s.LastTurnAt)
	}
}

func TestViewCorrupt(t *testing.T) {
	damaged := errors.New("line 7 is damaged")
	p := fold.New()
	p.Name = "lost"
	s := takeSnapshot(p, viewFlags{ID: "a9", Corrupt: damaged})
	v := buildView(s, "b1", t0)
	if v.Path != "lost" || v.Status != "corrupt" {
		t.Errorf("corrupt agent outside the tree: Path = %q, Status = %q; want its name, corrupt", v.Path, v.Status)
	}
	if want := "line 7 is damaged; run `warren repair a9` to keep a copy and cut the log to its last good entry"; v.Error != want {
		t.Errorf("Error = %q, want %q", v.Error, want)
	}
	s.Corrupt, s.Unopened = fmt.Errorf("agent a9: its log could not be opened for lack of a resource"), true
	if v := buildView(s, "b1", t0); v.Error != s.Corrupt.Error() {
		t.Errorf("unopened log: Error = %q, want the cause alone (no repair advice)", v.Error)
	}
}

func TestOrder(t *testing.T) {
	for _, tc := range []struct {
		name         string
		walk, loaded []string
		want         []string
	}{
		{"tree order", []string{"r", "r/a", "r/b"}, []string{"r/b", "r", "r/a"}, []string{"r", "r/a", "r/b"}},
		{"the rest by id after the tree", []string{"r"}, []string{"z", "r", "c"}, []string{"r", "c", "z"}},
		{"walked but not loaded is left out", []string{"r", "x"}, []string{"r"}, []string{"r"}},
		{"none", nil, nil, []string{}},
	} {
		if got := listOrder(tc.walk, tc.loaded); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: Order = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestWait(t *testing.T) {
	live := takeSnapshot(waitingState("live"), viewFlags{ID: "a1", Path: "root/kid"})
	w, ok := waitView(live)
	want := WaitView{AgentID: "a1", Path: "root/kid", RunID: "r1", Kind: "approval", Prompt: "deploy?", TokenID: "tok_1",
		Deadline: deadline, Since: t0.Add(2 * time.Minute)}
	if !ok || w != want {
		t.Errorf("Wait = %+v, %v; want %+v", w, ok, want)
	}
	live.Path = ""
	if w, _ := waitView(live); w.Path != "kid" {
		t.Errorf("Wait outside the tree: Path = %q, want the name", w.Path)
	}
	for _, tok := range []string{"consumed", "revoked", "expired"} {
		if _, ok := waitView(takeSnapshot(waitingState(tok), viewFlags{ID: "a1"})); ok {
			t.Errorf("a wait whose token is %s is listed", tok)
		}
	}
	if _, ok := waitView(agentSnapshot{ID: "a1"}); ok {
		t.Error("an agent with no wait is listed")
	}
}

func msg(id string, seq uint64, payload string) inbox.Message {
	return inbox.Message{ID: id, Sender: "s", Recipient: "a1", Kind: inbox.KindRequest, Payload: payload, Timestamp: t0,
		Ref: inbox.Ref{Seq: seq}}
}

func TestTakeSettings(t *testing.T) {
	p := fold.New()
	p.Cwd, p.Instructions, p.Gated = "/w", "be brief", true
	p.Metadata["k"] = "v"
	for i := 1; i <= 4; i++ {
		if err := p.Pending.Push(msg(fmt.Sprint("m", i), uint64(10*i), "x")); err != nil {
			t.Fatal(err)
		}
	}
	s := takeSettings(p, 10, 2)
	if s.Cwd != "/w" || s.Instructions != "be brief" || !s.Gated || !reflect.DeepEqual(s.Metadata, map[string]string{"k": "v"}) {
		t.Errorf("TakeSettings = %+v", s)
	}
	var ids []string
	for _, m := range s.Pending {
		ids = append(ids, m.ID)
	}
	if want := []string{"m2", "m3", "m4"}; !reflect.DeepEqual(ids, want) {
		t.Errorf("pending after seq 10, limit 2 = %v, want %v (one more than the page)", ids, want)
	}
	p.Metadata["k"] = "changed"
	if s.Metadata["k"] != "v" {
		t.Error("the settings share the projection's metadata")
	}
}

func TestDetailPage(t *testing.T) {
	big := strings.Repeat("b", 60)
	for _, tc := range []struct {
		name      string
		pending   []inbox.Message
		limit     int
		pageBytes int64
		wantIDs   []string
		wantMore  bool
		wantNext  uint64
	}{
		{"all fit", []inbox.Message{msg("a", 1, "x"), msg("b", 2, "y")}, 5, 100, []string{"a", "b"}, false, 0},
		{"cut at the limit", []inbox.Message{msg("a", 1, "x"), msg("b", 2, "y"), msg("c", 3, "z")}, 2, 100, []string{"a", "b"}, true, 2},
		{"cut at the bytes", []inbox.Message{msg("a", 1, big), msg("b", 2, big), msg("c", 3, "z")}, 5, 100, []string{"a"}, true, 1},
		{"the first always fits", []inbox.Message{msg("a", 4, big+big), msg("b", 5, "y")}, 5, 100, []string{"a"}, true, 4},
		{"none", nil, 5, 100, []string{}, false, 0},
	} {
		d, msgs := buildDetail(AgentView{ID: "a1"}, nil, agentSettings{Pending: tc.pending}, tc.limit, tc.pageBytes)
		ids := []string{}
		for _, m := range msgs {
			ids = append(ids, m.ID)
		}
		if !reflect.DeepEqual(ids, tc.wantIDs) || d.HasMore != tc.wantMore || d.InboxNextSeq != tc.wantNext {
			t.Errorf("%s: page %v, more %v, next %d; want %v, %v, %d", tc.name, ids, d.HasMore, d.InboxNextSeq,
				tc.wantIDs, tc.wantMore, tc.wantNext)
		}
		if d.Children == nil {
			t.Errorf("%s: Children is nil, want an empty list", tc.name)
		}
	}
	kids := []ChildView{{ID: "c1", Name: "w1", Status: "idle"}}
	d, _ := buildDetail(AgentView{ID: "a1", Name: "lead"}, kids, agentSettings{Cwd: "/w", Gated: true, Instructions: "i",
		Metadata: map[string]string{"k": "v"}}, 5, 100)
	want := AgentDetail{AgentView: AgentView{ID: "a1", Name: "lead"}, Children: kids, Cwd: "/w", Gated: true, Instructions: "i",
		Metadata: map[string]string{"k": "v"}}
	if !reflect.DeepEqual(d, want) {
		t.Errorf("Detail =\n%+v\nwant\n%+v", d, want)
	}
}

func TestInbox(t *testing.T) {
	m := msg("m1", 7, "hello")
	m.Sender, m.Kind = "a2", inbox.KindNotification
	got := inboxItems([]inbox.Message{m}, func(id string) string { return "name of " + id })
	want := []InboxItem{{From: "name of a2", Text: "hello", MessageID: "m1", Kind: "notification", Timestamp: t0, Seq: 7}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Inbox = %+v, want %+v", got, want)
	}
	if got := inboxItems(nil, nil); got == nil || len(got) != 0 {
		t.Errorf("Inbox of none = %#v, want an empty list", got)
	}
}

func TestDegraded(t *testing.T) {
	logErr := errors.New("no space left on device")
	fenced := errors.New("lease lost")
	owedText := "the end of run r1 (turn.complete) is not logged yet"
	rel := "released by this daemon (lease lost): its turns run on the daemon that claimed it"
	for _, tc := range []struct {
		name     string
		log, rel error
		owed     string
		want     string
	}{
		{"healthy", nil, nil, "", ""},
		{"log", logErr, nil, "", logErr.Error()},
		{"released", nil, fenced, "", rel},
		{"owed", nil, nil, owedText, owedText},
		{"all, in order", logErr, fenced, owedText, logErr.Error() + "; " + rel + "; " + owedText},
		{"log and owed", logErr, nil, owedText, logErr.Error() + "; " + owedText},
	} {
		if got := degradedText(tc.log, tc.rel, tc.owed); got != tc.want {
			t.Errorf("%s: Degraded = %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestTerminated(t *testing.T) {
	a := goneAgent{ID: "a3", Name: "w1", ParentID: "a1"}
	if got, want := terminatedView(a, "lead/w1"), (TerminatedView{ID: "a3", Name: "w1", Path: "lead/w1", ParentID: "a1"}); got != want {
		t.Errorf("unread: Terminated = %+v, want %+v", got, want)
	}
	a.Info = &goneInfo{Provider: "echo", Model: "m", CreatedAt: t0, LastTurnAt: t0.Add(time.Minute),
		TerminatedAt: t0.Add(time.Hour), Usage: provider.Usage{OutputTokens: 5}}
	want := TerminatedView{ID: "a3", Name: "w1", Path: "lead/w1", ParentID: "a1", Known: true, Provider: "echo", Model: "m",
		Usage: provider.Usage{OutputTokens: 5}, CreatedAt: t0, LastTurnAt: t0.Add(time.Minute), TerminatedAt: t0.Add(time.Hour)}
	if got := terminatedView(a, "lead/w1"); got != want {
		t.Errorf("read: Terminated = %+v, want %+v", got, want)
	}
}
