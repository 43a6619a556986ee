package reopen

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/history"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/session"
)

type fakeSession struct{ handle string }

func (s *fakeSession) Handle() string                                                { return s.handle }
func (s *fakeSession) Send(context.Context, string, provider.TurnIO) (string, error) { return "", nil }
func (s *fakeSession) Suspend(context.Context) ([]byte, error)                       { return nil, nil }
func (s *fakeSession) Stop() error                                                   { return nil }

// fakeProvider records what it was asked and fails Restore with restoreErr.
type fakeProvider struct {
	caps       provider.Capabilities
	restoreErr error
	created    int
	restored   []string // "blob" or "handle"
	history    []provider.Turn
}

func (p *fakeProvider) Name() string                        { return "fake" }
func (p *fakeProvider) Capabilities() provider.Capabilities { return p.caps }
func (p *fakeProvider) Create(_ context.Context, spec provider.Spec) (provider.Session, error) {
	p.created++
	p.history = spec.History
	return &fakeSession{handle: fmt.Sprint("new", p.created)}, nil
}
func (p *fakeProvider) Restore(_ context.Context, spec provider.Spec, blob []byte, handle string) (provider.Session, error) {
	if p.restoreErr != nil {
		return nil, p.restoreErr
	}
	how := "handle"
	if len(blob) > 0 {
		how = "blob"
	}
	p.restored = append(p.restored, how)
	p.history = spec.History
	return &fakeSession{handle: handle}, nil
}

// fakeAgent records the entries and snapshot changes.
type fakeAgent struct {
	h        history.History
	events   []string
	restored schema.SessionRestoredData
	snap     session.Session
	reads    int
}

func (a *fakeAgent) Append(event string, data any) (eventlog.Entry, error) {
	return a.record(event, data), nil
}

func (a *fakeAgent) AppendBatch(recs []eventlog.Record) ([]eventlog.Entry, error) {
	for _, r := range recs {
		a.record(r.Event, r.Data)
	}
	return nil, nil
}

func (a *fakeAgent) record(event string, data any) eventlog.Entry {
	a.events = append(a.events, event)
	if event == schema.SessionRestored {
		b, _ := json.Marshal(data)
		_ = json.Unmarshal(b, &a.restored)
	}
	return eventlog.Entry{}
}

func (a *fakeAgent) History() (history.History, error) { a.reads++; return a.h, nil }

func (a *fakeAgent) SaveSnapshot(f func(*session.Session)) { f(&a.snap) }

func oneTurn() history.History {
	return history.History{Turns: []provider.Turn{{Message: "p", Response: "r"}}}
}

// TestOpenChoosesHow is "what is known in, what is done out" for each way
// a session comes back.
func TestOpenChoosesHow(t *testing.T) {
	cases := []struct {
		name       string
		caps       provider.Capabilities
		restoreErr error
		req        Request
		h          history.History
		// want
		events   string
		strategy string
		restored string // how Restore was used, "" if not
		created  int
		inject   bool
		reads    int
	}{
		{name: "no blob, no handle, no history: fresh",
			req: Request{}, events: "[session.created session.restored]", strategy: StrategyFresh, created: 1, reads: 1},
		{name: "fresh with history on a provider without structured history injects it",
			req: Request{}, h: oneTurn(), events: "[session.created session.restored]", strategy: StrategyHistory, created: 1, inject: true, reads: 1},
		{name: "native handle of the same provider and model",
			caps: provider.Capabilities{NativeResume: true}, req: Request{Handle: "h1", Same: true},
			events: "[session.restored]", strategy: StrategyNative, restored: "handle"},
		{name: "a handle of another provider or model is not used",
			caps: provider.Capabilities{NativeResume: true}, req: Request{Handle: "h1"},
			events: "[session.created session.restored]", strategy: StrategyFresh, created: 1, reads: 1},
		{name: "eviction blob, history from the log on restore",
			caps: provider.Capabilities{HistoryOnRestore: true}, req: Request{Blob: []byte("{}"), Same: true}, h: oneTurn(),
			events: "[session.restored]", strategy: StrategyNative, restored: "blob", reads: 1},
		{name: "structured history without native resume restores by history",
			caps: provider.Capabilities{StructuredHistory: true}, req: Request{Handle: "h1", Same: true}, h: oneTurn(),
			events: "[session.restored]", strategy: StrategyHistory, restored: "handle", reads: 1},
		{name: "a restore that cannot be done falls back to fresh with the history",
			caps: provider.Capabilities{NativeResume: true}, restoreErr: provider.ErrCannotRestore,
			req: Request{Handle: "h1", Same: true}, h: oneTurn(),
			events: "[session.created session.restored]", strategy: StrategyHistory, created: 1, inject: true, reads: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &fakeProvider{caps: tc.caps, restoreErr: tc.restoreErr}
			ag := &fakeAgent{h: tc.h, snap: session.Session{ProviderState: []byte("old")}}
			req := tc.req
			req.AgentID, req.Provider, req.ProvName, req.Model = "a", p, "fake", "m"
			s, inject, err := Open(context.Background(), req, ag)
			if err != nil {
				t.Fatal(err)
			}
			if got := fmt.Sprint(ag.events); got != tc.events || ag.restored.Strategy != tc.strategy {
				t.Fatalf("logged %s with strategy %q, want %s with %q", got, ag.restored.Strategy, tc.events, tc.strategy)
			}
			if fmt.Sprint(p.restored) != fmt.Sprint(nonEmpty(tc.restored)) || p.created != tc.created {
				t.Fatalf("restored %v, created %d; want %q, %d", p.restored, p.created, tc.restored, tc.created)
			}
			if (inject != nil) != tc.inject || ag.reads != tc.reads {
				t.Fatalf("inject %v, history reads %d; want %v, %d", inject != nil, ag.reads, tc.inject, tc.reads)
			}
			if tc.created > 0 && (ag.snap.Handle != s.Handle() || ag.snap.ProviderState != nil) {
				t.Fatalf("snapshot after a fresh session: %+v", ag.snap)
			}
			if tc.restored == "blob" && ag.snap.ProviderState != nil {
				t.Fatal("the consumed blob is still in the snapshot")
			}
		})
	}
}

// TestDeadTransportOnNativeResumeFailsTheTurn: a transient restore error
// on a provider with native resume is returned (the next turn tries the
// handle again), never answered with a fresh session.
func TestDeadTransportOnNativeResumeFailsTheTurn(t *testing.T) {
	dead := provider.Transient(errors.New("agent process died"), 0)
	p := &fakeProvider{caps: provider.Capabilities{NativeResume: true}, restoreErr: dead}
	ag := &fakeAgent{}
	_, _, err := Open(context.Background(), Request{AgentID: "a", Provider: p, ProvName: "fake", Model: "m", Handle: "h1", Same: true}, ag)
	if !errors.Is(err, dead) || p.created != 0 || len(ag.events) != 0 {
		t.Fatalf("err %v, created %d, logged %v; want the transient error and nothing else", err, p.created, ag.events)
	}
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}
