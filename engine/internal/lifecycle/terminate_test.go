package lifecycle

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/warren-dev/warren/engine/internal/domainerr"
	"github.com/warren-dev/warren/engine/internal/subs"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/session"
)

// endSteps are the steps of terminating leaf id named name under parent.
func endSteps(id, name, parent string) []string {
	return []string{id + " flush owed", id + " state", id + " append agent.terminated",
		id + " gone info 12:01:00", id + " save", id + " stop timers", id + " stop session",
		id + " unlist " + name + " parent=" + parent + " ended=12:01:00", id + " detach",
		"notify " + name + " 1 idle->terminated " + id, id + " close log", "changed"}
}

func TestEndOrdersItsSteps(t *testing.T) {
	f := newFake()
	f.add("p1", "boss", "")
	a := f.add("a1", "kid", "p1")
	a.watchers = []subs.Sub{{Subscriber: "w"}}
	if err := f.life().End(a); err != nil {
		t.Fatal(err)
	}
	sameSteps(t, f.took(), endSteps("a1", "kid", "p1")...)
	want := base()
	want.State, want.Run = session.StateTerminated, nil
	if len(a.saved) != 1 || !reflect.DeepEqual(a.saved[0], want) {
		t.Errorf("session.json = %+v, want terminated with no run", a.saved)
	}
	if f.reads != 0 {
		t.Errorf("the clock was read %d times: the terminated time is the entry's", f.reads)
	}
	if !strings.Contains(f.logBuf.String(), "agent terminated: agent=a1") {
		t.Errorf("log: %s", f.logBuf.String())
	}
}

// The terminated notices owed to the subscriptions in place go in
// agent.terminated's write (named by the agent's id); those Unlist takes
// are told after it.
func TestEndLogsTheOwedNoticesWithTheTermination(t *testing.T) {
	f := newFake()
	f.add("p1", "boss", "")
	a := f.add("a1", "kid", "p1")
	a.watched = true
	a.watchers = []subs.Sub{{Subscriber: "w"}}
	if err := f.life().End(a); err != nil {
		t.Fatal(err)
	}
	want := endSteps("a1", "kid", "p1")
	want[2] = "a1 append agent.terminated+notices.owed(idle->terminated a1)"
	sameSteps(t, f.took(), want...)
}

func TestEndRevokesALiveWaitFirst(t *testing.T) {
	f := newFake()
	a := f.add("a1", "kid", "")
	a.look = Look{WaitToken: "tok", RunID: "r1", OpenRun: true}
	if err := f.life().End(a); err != nil {
		t.Fatal(err)
	}
	steps := f.took()
	sameSteps(t, steps[:2], "a1 revoke tok r1 terminated", "a1 flush owed")

	a = f.add("a2", "other", "")
	a.look = Look{WaitToken: "tok", RunID: "r1"}
	a.revokeErr = errors.New("log refuses appends")
	if err := f.life().End(a); err != a.revokeErr {
		t.Fatalf("End = %v, want the revocation's error as it is", err)
	}
	sameSteps(t, f.took(), "a2 revoke tok r1 terminated")
}

func TestEndRefusalsAndFailures(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name  string
		setup func(f *fake, a *fakeAgent)
		kind  error
		text  string
		steps []string
	}{
		{"one child", func(f *fake, a *fakeAgent) { f.add("c1", "c", "a1") }, domainerr.WrongState,
			"agent kid has 1 child; terminate it first, or the whole subtree at once (recursive: warren agent terminate --recursive)", nil},
		{"two children", func(f *fake, a *fakeAgent) { f.add("c1", "c", "a1"); f.add("c2", "d", "a1") }, domainerr.WrongState,
			"agent kid has 2 children; terminate them first, or the whole subtree at once (recursive: warren agent terminate --recursive)", nil},
		{"terminated", func(f *fake, a *fakeAgent) { a.look.Terminated = true }, nil, "", nil},
		{"corrupt", func(f *fake, a *fakeAgent) { a.look.Corrupt = true }, domainerr.WrongState,
			"agent a1 has a damaged log; run `warren repair a1` first", nil},
		{"owed end", func(f *fake, a *fakeAgent) { a.flushErr = boom }, nil, "terminating a1: boom", []string{"a1 flush owed"}},
		{"append", func(f *fake, a *fakeAgent) { a.appendErr = boom }, nil, "logging agent.terminated for a1: boom",
			[]string{"a1 flush owed", "a1 state", "a1 append agent.terminated"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			a := f.add("a1", "kid", "")
			tc.setup(f, a)
			err := f.life().End(a)
			if tc.text == "" {
				if err != nil {
					t.Fatalf("End = %v", err)
				}
			} else if err == nil || err.Error() != tc.text || kindOf(err) != tc.kind {
				t.Fatalf("End = %v (kind %v), want %q (kind %v)", err, kindOf(err), tc.text, tc.kind)
			}
			sameSteps(t, f.took(), tc.steps...)
		})
	}
}

func TestEndDoesNotWarnOfALogClosedAlready(t *testing.T) {
	f := newFake()
	a := f.add("a1", "kid", "")
	a.closeErr = eventlog.ErrClosed
	if err := f.life().End(a); err != nil {
		t.Fatal(err)
	}
	b := f.add("a2", "other", "")
	b.closeErr = errors.New("disk gone")
	if err := f.life().End(b); err != nil {
		t.Fatal(err)
	}
	log := f.logBuf.String()
	if strings.Count(log, "closing the log of a terminated agent") != 1 || !strings.Contains(log, "agent=a2 err=\"disk gone\"") {
		t.Errorf("log:\n%s", log)
	}
}

func TestTerminateRefusesABusyAgent(t *testing.T) {
	f := newFake()
	f.add("a1", "kid", "").look.Busy = true
	err := f.life().Terminate("a1")
	if err == nil || kindOf(err) != domainerr.WrongState || err.Error() != "agent kid is mid-turn; cancel it first (warren agent cancel)" {
		t.Fatalf("Terminate = %v", err)
	}
	if err := f.life().Terminate("nobody"); err == nil || err.Error() != `agent "nobody" not found` {
		t.Fatalf("Terminate of an unknown agent = %v, want the host's error", err)
	}
	sameSteps(t, f.took())
}

func TestDeepestFirst(t *testing.T) {
	kids := map[string][]string{"r": {"a", "b"}, "a": {"a1", "a2"}, "a2": {"x"}}
	got := DeepestFirst(func(id string) []string { return kids[id] }, "r")
	if want := []string{"a1", "x", "a2", "a", "b", "r"}; !reflect.DeepEqual(got, want) {
		t.Errorf("DeepestFirst = %v, want %v", got, want)
	}
	if got := DeepestFirst(func(string) []string { return nil }, "leaf"); !reflect.DeepEqual(got, []string{"leaf"}) {
		t.Errorf("a leaf = %v", got)
	}
}

func TestTerminateTreeGoesDeepestFirst(t *testing.T) {
	f := newFake()
	f.add("r", "root", "")
	f.add("a", "a", "r")
	f.add("b", "b", "r")
	f.add("a1", "a1", "a")
	done, err := f.life().TerminateTree("r")
	if err != nil {
		t.Fatal(err)
	}
	want := []Terminated{{"a1", "root/a/a1"}, {"a", "root/a"}, {"b", "root/b"}, {"r", "root"}}
	if !reflect.DeepEqual(done, want) {
		t.Errorf("terminated %v, want %v", done, want)
	}
	var appended []string
	for _, s := range f.took() {
		if strings.HasSuffix(s, " append agent.terminated") {
			appended = append(appended, strings.Fields(s)[0])
		}
	}
	if !reflect.DeepEqual(appended, []string{"a1", "a", "b", "r"}) {
		t.Errorf("agent.terminated logged for %v", appended)
	}
}

func TestTerminateTreeRefusesEverythingWhenOneIsBusy(t *testing.T) {
	for _, tc := range []struct {
		busy []string
		text string
	}{
		{[]string{"a1"}, "nothing was terminated: root/a/a1 is mid-turn; cancel first (warren agent cancel REF), then terminate again"},
		{[]string{"a1", "r"}, "nothing was terminated: root/a/a1, root are mid-turn; cancel first (warren agent cancel REF), then terminate again"},
	} {
		f := newFake()
		f.add("r", "root", "")
		f.add("a", "a", "r")
		f.add("a1", "a1", "a")
		for _, id := range tc.busy {
			f.agents[id].look.Busy = true
		}
		done, err := f.life().TerminateTree("r")
		if err == nil || err.Error() != tc.text || kindOf(err) != domainerr.WrongState || done != nil {
			t.Errorf("TerminateTree = %v, %v; want %q", done, err, tc.text)
		}
		sameSteps(t, f.took())
	}
}

func TestTerminateTreeSaysWhatItTerminatedBeforeAFailure(t *testing.T) {
	f := newFake()
	f.add("r", "root", "")
	f.add("a", "a", "r")
	f.add("b", "b", "r").look.Corrupt = true
	_, err := f.life().TerminateTree("r")
	want := "terminating b: agent b has a damaged log; run `warren repair b` first (already terminated: root/a)"
	if err == nil || err.Error() != want || kindOf(err) != domainerr.WrongState {
		t.Fatalf("TerminateTree = %v, want %q keeping the refusal's kind", err, want)
	}
	// A failure at the first agent is returned as it is.
	f = newFake()
	f.add("r", "root", "").look.Corrupt = true
	if _, err := f.life().TerminateTree("r"); err == nil || err.Error() != "agent r has a damaged log; run `warren repair r` first" {
		t.Fatalf("TerminateTree = %v", err)
	}
}

func TestResetOrdersItsSteps(t *testing.T) {
	f := newFake()
	a := f.add("a1", "kid", "")
	if err := f.life().Reset("a1"); err != nil {
		t.Fatal(err)
	}
	sameSteps(t, f.took(), "a1 claim", "a1 append context.reset", "a1 stop session", "a1 save", "a1 release")
	if len(a.saved) != 1 {
		t.Fatalf("saved %d times", len(a.saved))
	}
	want := base()
	want.ProviderState, want.Handle = nil, ""
	if !reflect.DeepEqual(a.saved[0], want) {
		t.Errorf("session.json = %+v, want %+v (the provider session dropped, nothing else)", a.saved[0], want)
	}
}

func TestResetRefusals(t *testing.T) {
	f := newFake()
	a := f.add("a1", "kid", "")
	a.look.OpenRun = true
	err := f.life().Reset("a1")
	if err == nil || kindOf(err) != domainerr.WrongState ||
		err.Error() != "agent kid has a run that has not ended (waiting or interrupted); resume or cancel it first" {
		t.Fatalf("Reset = %v", err)
	}
	sameSteps(t, f.took(), "a1 claim", "a1 release")

	a.look.OpenRun = false
	a.claimErr = errors.New("busy")
	if err := f.life().Reset("a1"); err != a.claimErr {
		t.Fatalf("Reset = %v, want the claim's error", err)
	}
	sameSteps(t, f.took(), "a1 claim")

	a.claimErr = nil
	a.appendErr = errors.New("boom")
	if err := f.life().Reset("a1"); err == nil || err.Error() != "logging context.reset for a1: boom" {
		t.Fatalf("Reset = %v", err)
	}
	sameSteps(t, f.took(), "a1 claim", "a1 append context.reset", "a1 release")
}
