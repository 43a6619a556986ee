package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warren-dev/warren/agentspec"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/history"
	"github.com/warren-dev/warren/protocol"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/session"
	"github.com/warren-dev/warren/store"
	"github.com/warren-dev/warren/store/local"
)

// The live provider sessions (sessions.go) through the real engine: how a
// session comes back (a restore from the eviction blob or the native
// handle, or a fresh one with the history) as the log, session.json and
// the provider's calls show it; reuse and replacement of the live
// session; eviction; creation, a creation abandoned, and no free slot.

// sessProv is a provider (registered as "fake") whose capabilities,
// restore error and suspend blob a test sets, and which records what the
// engine asked of it: the sessions created (their specs and handles), the
// restores done (from a blob or a handle), the prompts sent and the
// sessions stopped.
type sessProv struct {
	caps     provider.Capabilities
	noHandle bool // its sessions have no native handle
	// send, when set, answers the prompts (else "reply").
	send func(ctx context.Context, prompt string) (string, error)
	// create, when set, runs at the start of each Create.
	create func()

	mu           sync.Mutex
	blob         []byte // what Suspend returns
	restoreErr   error
	created      []provider.Spec
	handles      []string // of the sessions created
	restored     []string // "blob" or "handle", per restore done
	restoreSpecs []provider.Spec
	prompts      []string
	stopped      []string // models of the sessions stopped
}

func (p *sessProv) Name() string                        { return "fake" }
func (p *sessProv) Capabilities() provider.Capabilities { return p.caps }

func (p *sessProv) Create(_ context.Context, spec provider.Spec) (provider.Session, error) {
	if p.create != nil {
		p.create()
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.created = append(p.created, spec)
	handle := ""
	if !p.noHandle {
		handle = fmt.Sprintf("h-%s-%d", spec.Model, len(p.created))
	}
	p.handles = append(p.handles, handle)
	return &sessSess{p: p, model: spec.Model, handle: handle}, nil
}

func (p *sessProv) Restore(_ context.Context, spec provider.Spec, blob []byte, handle string) (provider.Session, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.restoreErr != nil {
		return nil, p.restoreErr
	}
	how := "handle"
	if len(blob) > 0 {
		how = "blob"
	}
	p.restored = append(p.restored, how)
	p.restoreSpecs = append(p.restoreSpecs, spec)
	return &sessSess{p: p, model: spec.Model, handle: handle, by: "fake/" + how}, nil
}

func (p *sessProv) setRestoreErr(err error) {
	p.mu.Lock()
	p.restoreErr = err
	p.mu.Unlock()
}

// calls returns copies of what was recorded so far.
func (p *sessProv) calls() (created []provider.Spec, handles, restored, prompts, stopped []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return slices.Clone(p.created), slices.Clone(p.handles), slices.Clone(p.restored), slices.Clone(p.prompts), slices.Clone(p.stopped)
}

type sessSess struct {
	p      *sessProv
	model  string
	handle string
	by     string // how Restore brought it back ("" for a created one)
}

func (s *sessSess) Handle() string     { return s.handle }
func (s *sessSess) RestoredBy() string { return s.by }
func (s *sessSess) Send(ctx context.Context, prompt string, _ provider.TurnIO) (string, error) {
	s.p.mu.Lock()
	s.p.prompts = append(s.p.prompts, prompt)
	s.p.mu.Unlock()
	if s.p.send != nil {
		return s.p.send(ctx, prompt)
	}
	return "reply", nil
}
func (s *sessSess) Suspend(context.Context) ([]byte, error) {
	s.p.mu.Lock()
	defer s.p.mu.Unlock()
	return slices.Clone(s.p.blob), nil
}
func (s *sessSess) Stop() error {
	s.p.mu.Lock()
	s.p.stopped = append(s.p.stopped, s.model)
	s.p.mu.Unlock()
	return nil
}

// probeStore is store/local that counts, per agent, the reads of its
// whole log (a history being rebuilt: Read) and the calls its log's
// Degraded gets (made when the views take the agent's snapshot), and
// records the entries read back by seq (ReadSeq, ReadSeqs, failing with
// readSeqErr when set).
type probeStore struct {
	*local.Store
	mu         sync.Mutex
	reads      map[string]int
	degraded   map[string]int
	readSeqs   []string // "id@seq"
	readSeqErr error
}

func newProbeStore(fsys faultfs.FS) *probeStore {
	return &probeStore{Store: local.New(local.Options{FS: fsys, Home: "/home"}), reads: map[string]int{}, degraded: map[string]int{}}
}

func (s *probeStore) Read(ctx context.Context, id string, fromSeq uint64, hint int64) (store.Reader, error) {
	s.mu.Lock()
	s.reads[id]++
	s.mu.Unlock()
	return s.Store.Read(ctx, id, fromSeq, hint)
}

func (s *probeStore) ReadSeq(ctx context.Context, id string, seq uint64, hint int64) (eventlog.Entry, error) {
	s.mu.Lock()
	s.readSeqs = append(s.readSeqs, fmt.Sprintf("%s@%d", id, seq))
	err := s.readSeqErr
	s.mu.Unlock()
	if err != nil {
		return eventlog.Entry{}, err
	}
	return s.Store.ReadSeq(ctx, id, seq, hint)
}

func (s *probeStore) ReadSeqs(ctx context.Context, id string, at []eventlog.At, fn func(int, eventlog.Entry) error) error {
	s.mu.Lock()
	for _, a := range at {
		s.readSeqs = append(s.readSeqs, fmt.Sprintf("%s@%d", id, a.Seq))
	}
	err := s.readSeqErr
	s.mu.Unlock()
	if err != nil {
		return err
	}
	return s.Store.ReadSeqs(ctx, id, at, fn)
}

func (s *probeStore) OpenLog(ctx context.Context, id string, o store.LogOptions) (store.Log, error) {
	lg, err := s.Store.OpenLog(ctx, id, o)
	if err != nil {
		return nil, err
	}
	return &probeLog{Log: lg, s: s, id: id}, nil
}

func (s *probeStore) readsOf(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reads[id]
}

type probeLog struct {
	store.Log
	s  *probeStore
	id string
}

func (l *probeLog) Degraded() error {
	l.s.mu.Lock()
	l.s.degraded[l.id]++
	l.s.mu.Unlock()
	return l.Log.Degraded()
}

// fakeHarness is a harness with p registered as provider "fake", no wake
// turns, session.json written at each save, on a probeStore (*st, replaced
// at each start).
func fakeHarness(t *testing.T, p *sessProv, st **probeStore, setup ...func(h *harness)) *harness {
	return newHarness(t, append([]func(h *harness){func(h *harness) {
		h.noWake = true
		h.saveDelay = -1
		h.extra = map[string]provider.Provider{"fake": p}
		h.store = func(fsys faultfs.FS) store.Store { *st = newProbeStore(fsys); return *st }
	}}, setup...)...)
}

// createFake creates a root agent on provider "fake" with model.
func createFake(h *harness, name, model string) string {
	h.t.Helper()
	id, err := h.c.CreateAgent(context.Background(), CreateSpec{Name: name, Provider: "fake", Model: model})
	if err != nil {
		h.t.Fatalf("create %s: %v", name, err)
	}
	return id
}

// sessionEvents lists the session.created and session.restored entries of
// id's log after its first n entries.
func sessionEvents(h *harness, id string, n int) []string {
	var out []string
	for _, ev := range h.eventsSince(id, n) {
		if ev == schema.SessionCreated || ev == schema.SessionRestored {
			out = append(out, ev)
		}
	}
	return out
}

func nonEmpty(s string) []string {
	if s == "" {
		return nil
	}
	return []string{s}
}

// TestOpenChoosesHow is "what is known in, what is done out" for each way
// a session comes back: an agent on the fake provider loses its live
// session (evicted, its blob saved as the case says), then a turn brings
// it back; the log (session.created, session.restored with its strategy
// and method), the provider's calls (Create or Restore, from a blob or a
// handle), the turn's prompt (the history block injected or not), the
// history reads of the log and session.json show how.
func TestOpenChoosesHow(t *testing.T) {
	cases := []struct {
		name       string
		caps       provider.Capabilities
		restoreErr error
		noHandle   bool   // the provider's sessions have no handle
		blob       string // what the eviction saves in session.json
		model      string // the reopening turn's model ("": the agent's, "m")
		history    bool   // a turn before the eviction
		// want
		events   string
		strategy string
		restored string // how Restore was used, "" if not
		created  int
		inject   bool
		reads    int
	}{
		{name: "no blob, no handle, no history: fresh", noHandle: true,
			events: "[session.created session.restored]", strategy: schema.RestoreFresh, created: 1, reads: 1},
		{name: "fresh with history on a provider without structured history injects it", noHandle: true, history: true,
			events: "[session.created session.restored]", strategy: schema.RestoreHistory, created: 1, inject: true, reads: 1},
		{name: "native handle of the same provider and model",
			caps:   provider.Capabilities{NativeResume: true},
			events: "[session.restored]", strategy: schema.RestoreNative, restored: "handle"},
		// The turn asks for another model: the handle (and the blob the
		// eviction saved) are of model m, not used.
		{name: "a handle of another provider or model is not used",
			caps: provider.Capabilities{NativeResume: true}, blob: "old", model: "m2",
			events: "[session.created session.restored]", strategy: schema.RestoreFresh, created: 1, reads: 1},
		{name: "eviction blob, history from the log on restore",
			caps: provider.Capabilities{HistoryOnRestore: true}, blob: "{}", history: true,
			events: "[session.restored]", strategy: schema.RestoreNative, restored: "blob", reads: 1},
		{name: "structured history without native resume restores by history",
			caps: provider.Capabilities{StructuredHistory: true}, history: true,
			events: "[session.restored]", strategy: schema.RestoreHistory, restored: "handle", reads: 1},
		{name: "a restore that cannot be done falls back to fresh with the history",
			caps: provider.Capabilities{NativeResume: true}, restoreErr: provider.ErrCannotRestore, history: true,
			events: "[session.created session.restored]", strategy: schema.RestoreHistory, created: 1, inject: true, reads: 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := &sessProv{caps: tc.caps, noHandle: tc.noHandle}
			if tc.blob != "" {
				p.blob = []byte(tc.blob)
			}
			var st *probeStore
			h := fakeHarness(t, p, &st)
			ctx := context.Background()
			id := createFake(h, "a", "m")
			if tc.history {
				if res := h.send(id, "p"); res.Err != nil || res.Response != "reply" {
					t.Fatalf("the turn before the eviction: %+v", res)
				}
			}
			if err := h.c.Evict(ctx, id); err != nil {
				t.Fatal(err)
			}
			if s := h.sessionJSON(id); string(s.ProviderState) != tc.blob {
				t.Fatalf("setup: session.json holds blob %q after the eviction, want %q", s.ProviderState, tc.blob)
			}
			p.setRestoreErr(tc.restoreErr)
			n := len(h.entries(id))
			created0, _, restored0, _, _ := p.calls()
			reads0 := st.readsOf(id)

			res, err := h.c.Send(ctx, id, "now", "", tc.model, nil)
			if err != nil || res.Err != nil || res.Response != "reply" {
				t.Fatalf("the reopening turn: %+v, %v", res, err)
			}

			var rd schema.SessionRestoredData
			lastOf(h, id, schema.SessionRestored, &rd)
			if got := fmt.Sprint(sessionEvents(h, id, n)); got != tc.events || rd.Strategy != tc.strategy {
				t.Fatalf("logged %s with strategy %q, want %s with %q", got, rd.Strategy, tc.events, tc.strategy)
			}
			wantModel := tc.model
			if wantModel == "" {
				wantModel = "m"
			}
			// The method is what the restored session says (RestoredBy).
			wantMethod := ""
			if tc.restored != "" {
				wantMethod = "fake/" + tc.restored
			}
			if rd.Method != wantMethod || rd.Provider != "fake" || rd.Model != wantModel {
				t.Fatalf("session.restored %+v, want method %q of fake %s", rd, wantMethod, wantModel)
			}
			created, handles, restored, prompts, _ := p.calls()
			if got := restored[len(restored0):]; fmt.Sprint(got) != fmt.Sprint(nonEmpty(tc.restored)) || len(created)-len(created0) != tc.created {
				t.Fatalf("restored %v, created %d; want %q, %d", got, len(created)-len(created0), tc.restored, tc.created)
			}
			prompt := prompts[len(prompts)-1]
			inject := strings.HasPrefix(prompt, history.BlockTitle)
			if inject != tc.inject || (!inject && prompt != "now") || st.readsOf(id)-reads0 != tc.reads {
				t.Fatalf("prompt %q (history injected %v), history reads %d; want injected %v, %d reads",
					prompt, inject, st.readsOf(id)-reads0, tc.inject, tc.reads)
			}
			if tc.inject && !strings.Contains(prompt, "reply") {
				t.Fatalf("the injected block lacks the earlier turn: %q", prompt)
			}
			if tc.history && tc.restored != "" {
				p.mu.Lock()
				rs := p.restoreSpecs[len(p.restoreSpecs)-1]
				p.mu.Unlock()
				if len(rs.History) != 1 || rs.History[0].Message != "p" {
					t.Fatalf("restored with history %+v, want the turn before the eviction", rs.History)
				}
			}
			s := h.sessionJSON(id)
			if tc.created > 0 && (s.Handle != handles[len(handles)-1] || s.ProviderState != nil || s.Model != wantModel) {
				t.Fatalf("session.json after a fresh session: handle %q, blob %q, model %q; want %q, none, %q",
					s.Handle, s.ProviderState, s.Model, handles[len(handles)-1], wantModel)
			}
			if tc.restored == "blob" && s.ProviderState != nil {
				t.Fatal("the consumed blob is still in session.json")
			}
		})
	}
}

// TestDeadTransportOnNativeResumeFailsTheTurn: a transient restore error
// on a provider with native resume is returned (the next turn tries the
// handle again), never answered with a fresh session.
func TestDeadTransportOnNativeResumeFailsTheTurn(t *testing.T) {
	dead := provider.Transient(errors.New("agent process died"), 0)
	p := &sessProv{caps: provider.Capabilities{NativeResume: true}}
	var st *probeStore
	h := fakeHarness(t, p, &st)
	id := createFake(h, "a", "m")
	if err := h.c.Evict(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	p.setRestoreErr(dead)
	n := len(h.entries(id))
	created0, _, _, _, _ := p.calls()
	res := h.send(id, "now")
	created, _, _, _, _ := p.calls()
	if logged := sessionEvents(h, id, n); !errors.Is(res.Err, dead) || len(created) != len(created0) || len(logged) != 0 {
		t.Fatalf("err %v, created %d, logged %v; want the transient error and nothing else",
			res.Err, len(created)-len(created0), logged)
	}
	// The next turn tries the handle again.
	p.setRestoreErr(nil)
	if res := h.send(id, "again"); res.Err != nil {
		t.Fatalf("the next turn: %+v", res)
	}
	var rd schema.SessionRestoredData
	lastOf(h, id, schema.SessionRestored, &rd)
	_, _, restored, _, _ := p.calls()
	if rd.Strategy != schema.RestoreNative || fmt.Sprint(restored) != "[handle]" {
		t.Fatalf("the next turn: session.restored %+v, restores %v; want a native restore from the handle", rd, restored)
	}
}

// A turn creates the session when none is live, reuses the live one for
// the same provider and model, and replaces (stops) it for another model;
// a session the turn leaves unusable (a transient error given up on) is
// discarded: stopped.
func TestAcquireReusesOrReplaces(t *testing.T) {
	p := &sessProv{send: func(_ context.Context, prompt string) (string, error) {
		// The m2 session is fresh: its first prompt carries the history
		// block, the message at its end.
		if strings.Contains(prompt, "FAIL-NOW") {
			return "", provider.Transient(errors.New("overloaded"), 0)
		}
		return "reply", nil
	}}
	var st *probeStore
	h := fakeHarness(t, p, &st, func(h *harness) {
		h.cfg.Pools["default"] = 2
		h.cfg.MaxRetries = 0
	})
	id := createFake(h, "a", "m1")
	for _, msg := range []string{"hi", "again"} {
		if res := h.send(id, msg); res.Err != nil || res.Response != "reply" {
			t.Fatalf("send %q = %+v", msg, res)
		}
	}
	created, _, restored, _, stopped := p.calls()
	if len(created) != 1 || len(restored) != 0 || len(stopped) != 0 || h.count(id, schema.SessionRestored) != 0 {
		t.Fatalf("created %d, restored %v, stopped %v for the same provider and model; want the creation's session reused",
			len(created), restored, stopped)
	}
	res, err := h.c.Send(context.Background(), id, "FAIL-NOW", "", "m2", nil)
	if err != nil || res.Err == nil {
		t.Fatalf("the failing turn on m2: %+v, %v", res, err)
	}
	created, _, _, _, stopped = p.calls()
	if len(created) != 2 || created[1].Model != "m2" || fmt.Sprint(stopped) != "[m1 m2]" {
		t.Fatalf("created %d, stopped %v; want m1 replaced by m2, then m2 discarded", len(created), stopped)
	}
	// The engine refuses a turn on an unknown provider before it
	// acquires a session (checkRunChoice): Acquire's own refusal cannot
	// be reached through it. Nothing is created or stopped.
	if _, err := h.c.Send(context.Background(), id, "x", "nobody", "m", nil); err == nil {
		t.Fatal("a turn on an unknown provider was run")
	}
	if c2, _, _, _, s2 := p.calls(); len(c2) != 2 || len(s2) != 2 {
		t.Fatalf("after the unknown provider: created %d, stopped %v", len(c2), s2)
	}
}

// Eviction suspends the live session, saves its blob in session.json,
// logs suspend.result and stops the session.
func TestEvictSavesBlobAndLogs(t *testing.T) {
	p := &sessProv{blob: []byte("blob")}
	var st *probeStore
	// No background writes within the test: session.json holds the blob
	// only if Evict wrote it before it returned.
	h := fakeHarness(t, p, &st, func(h *harness) {
		h.cfg.Pools["default"] = 1
		h.saveDelay = time.Hour
	})
	ctx := context.Background()
	id := createFake(h, "a", "m1")
	if res := h.send(id, "hi"); res.Err != nil {
		t.Fatal(res.Err)
	}
	if err := h.c.Evict(ctx, id); err != nil {
		t.Fatal(err)
	}
	s, err := session.NewStore(h.fs, "/home/agents").Load(id)
	if err != nil || string(s.ProviderState) != "blob" || s.Provider != "fake" || s.Model != "m1" {
		t.Fatalf("session.json %+v, %v; want the blob of fake m1", s, err)
	}
	es := h.entries(id)
	var sr schema.SuspendResultData
	if last := es[len(es)-1]; last.Event != schema.SuspendResult {
		t.Fatalf("logged %v, want suspend.result last", h.events(id))
	}
	lastOf(h, id, schema.SuspendResult, &sr)
	if sr.StateSize != len("blob") {
		t.Fatalf("suspend.result %+v, want the blob's size", sr)
	}
	if _, _, _, _, stopped := p.calls(); fmt.Sprint(stopped) != "[m1]" {
		t.Fatalf("stopped %v", stopped)
	}
	if err := h.c.Evict(ctx, id); err == nil {
		t.Fatal("evicted a session that is not live")
	}
}

// A new agent's session takes its history mode from the spec's metadata
// (the agent is not listed yet). With every slot held, a creation is
// refused as ErrNoSlot (code 6) once ctx ends. A creation that cannot be
// made durable abandons its session: stopped, its slot free again.
func TestCreateAndNoSlot(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	let := func() { once.Do(func() { close(release) }) }
	defer let() // a failure does not leave the turn holding the slot
	p := &sessProv{send: func(_ context.Context, prompt string) (string, error) {
		if prompt == "hold" {
			close(entered)
			<-release
		}
		return "reply", nil
	}}
	var rs *refuseStore
	h := newHarness(t, func(h *harness) {
		h.noWake = true
		h.cfg.Pools["default"] = 1
		h.extra = map[string]provider.Provider{"fake": p}
		h.store = func(fsys faultfs.FS) store.Store {
			rs = &refuseStore{Store: local.New(local.Options{FS: fsys, Home: "/home"})}
			return rs
		}
	})
	ctx := context.Background()
	spec := CreateSpec{Name: "n", Provider: "fake", Model: "m1", Metadata: map[string]string{agentspec.HistoryModeKey: "context"}}
	a2, err := h.c.CreateAgent(ctx, spec)
	if err != nil {
		t.Fatal(err)
	}
	var sc schema.SessionCreatedData
	firstOf(h, a2, schema.SessionCreated, &sc)
	created, handles, _, _, _ := p.calls()
	if len(created) != 1 || created[0].HistoryMode != "context" || sc.Handle != handles[0] || sc.Handle == "" {
		t.Fatalf("created %d, history mode %q, handle logged %q of %v", len(created), created[0].HistoryMode, sc.Handle, handles)
	}

	// a2's turn holds the only slot.
	done := make(chan TurnResult, 1)
	go func() {
		res, _ := h.c.Send(ctx, a2, "hold", "", "", nil)
		done <- res
	}()
	<-entered
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	spec.Name = "n3"
	if _, err := h.c.CreateAgent(short, spec); !errors.Is(err, ErrNoSlot) || codeOf(err) != protocol.CodeUnavailable {
		t.Fatalf("create with no free slot: %v (code %d), want NoSlot (code 6)", err, codeOf(err))
	}
	let()
	if res := <-done; res.Err != nil {
		t.Fatal(res.Err)
	}

	// The creation's entries are refused: its session is abandoned.
	rs.refuse(schema.AgentCreated, errors.New("refused"))
	spec.Name, spec.Model = "n4", "m4"
	if _, err := h.c.CreateAgent(ctx, spec); err == nil {
		t.Fatal("a creation whose entries were refused succeeded")
	}
	if _, _, _, _, stopped := p.calls(); !slices.Contains(stopped, "m4") {
		t.Fatalf("stopped %v after the abandoned creation, want its m4 session", stopped)
	}
	rs.refuse(schema.AgentCreated, nil)
	spec.Name = "n5"
	bounded, cancel2 := context.WithTimeout(ctx, 10*time.Second)
	defer cancel2()
	if _, err := h.c.CreateAgent(bounded, spec); err != nil {
		t.Fatalf("a creation after the abandoned one: %v (its slot is not free)", err)
	}
}
