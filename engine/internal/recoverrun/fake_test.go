package recoverrun

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/engine/internal/agentload"
	"github.com/warren-dev/warren/engine/internal/placement"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/token"
)

// The agent ids of the tests (32 hex characters, as the store and the
// quarantine index want them); calls name an agent by its last two.
const (
	root    = "000000000000000000000000000000a1"
	child   = "000000000000000000000000000000a2"
	damaged = "000000000000000000000000000000d1"
	gone    = "000000000000000000000000000000b1"
	orphan  = "000000000000000000000000000000e1"
	unknown = "000000000000000000000000000000e2"
	lost    = "000000000000000000000000000000c0" // a parent nobody has
	lostKid = "000000000000000000000000000000c1"
	away    = "000000000000000000000000000000f1" // held by another daemon
)

const home = "/home"

func dir(id string) string { return home + "/agents/" + id }

func short(id string) string { return id[len(id)-2:] }

// fakeAgent is the engine's agent as the fake host makes it; it records
// what the run asks of it in its host's calls.
type fakeAgent struct {
	h       *fakeHost
	id      string
	corrupt error
}

func (a *fakeAgent) NeedsRestartMark(boot string) bool {
	a.h.rec("NeedsRestartMark %s %s", short(a.id), boot)
	return a.h.restart[a.id]
}

func (a *fakeAgent) MarkCorrupt(err error) {
	a.h.rec("MarkCorrupt %s", short(a.id))
	if a.corrupt == nil {
		a.corrupt = err
	}
}

// fakeLog is a store.Log that records what is done to it.
type fakeLog struct {
	events    []string
	closed    int
	verify    error // VerifyPrefix's answer
	appendErr error
	last      uint64
}

func (l *fakeLog) Append(event string, _ any) (eventlog.Entry, error) {
	if l.appendErr != nil {
		return eventlog.Entry{}, l.appendErr
	}
	l.events = append(l.events, event)
	l.last++
	return eventlog.Entry{Seq: l.last, Event: event}, nil
}

func (l *fakeLog) AppendBatch([]eventlog.Record) ([]eventlog.Entry, error) {
	return nil, errors.New("not used")
}
func (l *fakeLog) LastSeq() uint64                                   { return l.last }
func (l *fakeLog) Degraded() error                                   { return nil }
func (l *fakeLog) VerifyPrefix() error                               { return l.verify }
func (l *fakeLog) ReadAll(context.Context) ([]eventlog.Entry, error) { return nil, nil }
func (l *fakeLog) Abandon()                                          {}
func (l *fakeLog) Close() error                                      { l.closed++; return nil }

// fakeHost records every call, in order, as "Method args".
type fakeHost struct {
	calls []string

	ids       []string // AgentIDs
	storeIDs  []string // StoreAgents
	elsewhere map[string]bool
	known     map[string]bool
	loads     map[string]*Agent[*fakeAgent]
	tree      map[string]error // AddToTree's answer by id
	restart   map[string]bool  // NeedsRestartMark by id
	pending   map[string]int   // Arm's count by id
	tokenErr  error
	stopping  bool
	noBack    bool // Background refuses
	scanErr   error
	prepErr   error
	inboxErr  error

	listed     map[string]*fakeAgent
	quarantine map[string]string
	tokens     []token.Token
	existing   placement.Existing // as FinishCutSpawns saw it
	armed      []time.Time
	next       func() // the last function armed
}

func newFakeHost() *fakeHost {
	return &fakeHost{elsewhere: map[string]bool{}, known: map[string]bool{}, loads: map[string]*Agent[*fakeAgent]{},
		tree: map[string]error{}, restart: map[string]bool{}, pending: map[string]int{}, listed: map[string]*fakeAgent{}}
}

func (h *fakeHost) rec(format string, args ...any) {
	h.calls = append(h.calls, fmt.Sprintf(format, args...))
}

// agent adds what Load returns for id: an opened log and its agent.
func (h *fakeHost) agent(id string, s *projection.State) *Agent[*fakeAgent] {
	l := &Agent[*fakeAgent]{ID: id, Log: &fakeLog{}, State: s, Agent: &fakeAgent{h: h, id: id}}
	h.loads[id] = l
	h.ids = append(h.ids, id)
	return l
}

func (h *fakeHost) Prepare() error        { h.rec("Prepare"); return h.prepErr }
func (h *fakeHost) SetRecovering(on bool) { h.rec("SetRecovering %v", on) }
func (h *fakeHost) OpenUserInbox() error  { h.rec("OpenUserInbox"); return h.inboxErr }
func (h *fakeHost) AgentIDs() ([]string, error) {
	h.rec("AgentIDs")
	return h.ids, nil
}
func (h *fakeHost) StoreAgents() ([]string, error) { h.rec("StoreAgents"); return h.storeIDs, nil }
func (h *fakeHost) Known(id string) bool           { return h.known[id] }
func (h *fakeHost) Stopping() bool                 { h.rec("Stopping"); return h.stopping }

func (h *fakeHost) Claimable(ids []string) (take, elsewhere []string) {
	for _, id := range ids {
		if h.known[id] {
			continue // the real rule takes only what no daemon holds
		}
		if h.elsewhere[id] {
			elsewhere = append(elsewhere, id)
		} else {
			take = append(take, id)
		}
	}
	h.rec("Claimable %s", names(ids))
	return take, elsewhere
}

func (h *fakeHost) DropLease(id string) { h.rec("DropLease %s", short(id)) }
func (h *fakeHost) Scan() error         { h.rec("Scan"); return h.scanErr }
func (h *fakeHost) ArmTakeover(at time.Time, f func()) {
	h.rec("ArmTakeover")
	h.armed = append(h.armed, at)
	h.next = f
}

func (h *fakeHost) Load(ids []string, retry bool) []*Agent[*fakeAgent] {
	h.rec("Load %s retry=%v", names(ids), retry)
	out := make([]*Agent[*fakeAgent], len(ids))
	for i, id := range ids {
		out[i] = h.loads[id]
	}
	return out
}

func (h *fakeHost) ListCorrupt(l *Agent[*fakeAgent], cause error) {
	h.rec("ListCorrupt %s: %v", short(l.ID), cause)
	l.Agent = &fakeAgent{h: h, id: l.ID, corrupt: cause}
	h.listed[l.ID] = l.Agent
}

func (h *fakeHost) Forget(l *Agent[*fakeAgent]) { h.rec("Forget %s", short(l.ID)) }
func (h *fakeHost) RemoveOrphanDir(id string)   { h.rec("RemoveOrphanDir %s", short(id)) }
func (h *fakeHost) SetQuarantine(q map[string]string) {
	h.rec("SetQuarantine %d", len(q))
	h.quarantine = q
}

func (h *fakeHost) Parents(cands []placement.Candidate) map[string]placement.Parent {
	h.rec("Parents")
	ps := map[string]placement.Parent{}
	for _, c := range cands {
		a, ok := h.listed[c.Parent]
		ps[c.Parent] = placement.Parent{Listed: ok, Unopened: ok && errors.Is(a.corrupt, agentload.ErrUnopened),
			Quarantined: h.quarantine[c.Parent] != ""}
	}
	return ps
}

func (h *fakeHost) QuarantinedAs(id string) string { return h.quarantine[id] }
func (h *fakeHost) ParentCause(id string) error    { return h.listed[id].corrupt }
func (h *fakeHost) AddToTree(l *Agent[*fakeAgent]) error {
	h.rec("AddToTree %s", short(l.ID))
	return h.tree[l.ID]
}

func (h *fakeHost) List(l *Agent[*fakeAgent], cause error) {
	if cause != nil {
		h.rec("List %s: %v", short(l.ID), cause)
		l.Agent.corrupt = cause
	} else {
		h.rec("List %s", short(l.ID))
	}
	h.listed[l.ID] = l.Agent
}

func (h *fakeHost) Snapshot(l *Agent[*fakeAgent])     { h.rec("Snapshot %s", short(l.ID)) }
func (h *fakeHost) LoadSnapshot(l *Agent[*fakeAgent]) { h.rec("LoadSnapshot %s", short(l.ID)) }
func (h *fakeHost) AddToken(tok token.Token) error {
	h.rec("AddToken %s %s", tok.ID, tok.State)
	h.tokens = append(h.tokens, tok)
	return h.tokenErr
}

func (h *fakeHost) IndexSubscription(sub projection.Subscription, subscriber string) {
	h.rec("IndexSubscription %s->%s", short(subscriber), short(sub.Target))
}
func (h *fakeHost) Redeliver(l *Agent[*fakeAgent])   { h.rec("Redeliver %s", short(l.ID)) }
func (h *fakeHost) OwedNotices(l *Agent[*fakeAgent]) { h.rec("OwedNotices %s", short(l.ID)) }
func (h *fakeHost) SettleWaits()                     { h.rec("SettleWaits") }
func (h *fakeHost) AdoptTaken(placed []*Agent[*fakeAgent]) {
	h.rec("AdoptTaken %s", agentNames(placed))
}
func (h *fakeHost) Arm(l *Agent[*fakeAgent]) int {
	h.rec("Arm %s", short(l.ID))
	return h.pending[l.ID]
}
func (h *fakeHost) FinishCutSpawns(l *Agent[*fakeAgent], existing placement.Existing) {
	h.rec("FinishCutSpawns %s", short(l.ID))
	h.existing = existing
}
func (h *fakeHost) Prune(l *Agent[*fakeAgent], _ placement.Existing) { h.rec("Prune %s", short(l.ID)) }
func (h *fakeHost) BootstrapUnstarted(l *Agent[*fakeAgent]) {
	h.rec("BootstrapUnstarted %s", short(l.ID))
}
func (h *fakeHost) Wake(l *Agent[*fakeAgent]) { h.rec("Wake %s", short(l.ID)) }
func (h *fakeHost) WakeAll()                  { h.rec("WakeAll") }
func (h *fakeHost) Changed()                  { h.rec("Changed") }

// Background runs f at once, on the caller's goroutine.
func (h *fakeHost) Background(f func()) bool {
	h.rec("Background")
	if h.noBack {
		return false
	}
	f()
	return true
}
func (h *fakeHost) CheckpointAll()             { h.rec("CheckpointAll") }
func (h *fakeHost) Scrubbed()                  { h.rec("Scrubbed") }
func (h *fakeHost) RemoveCheckpoint(id string) { h.rec("RemoveCheckpoint %s", short(id)) }

func names(ids []string) string {
	s := make([]string, len(ids))
	for i, id := range ids {
		s[i] = short(id)
	}
	return strings.Join(s, ",")
}

func agentNames(ls []*Agent[*fakeAgent]) string {
	s := make([]string, len(ls))
	for i, l := range ls {
		s[i] = short(l.ID)
	}
	sort.Strings(s)
	return strings.Join(s, ",")
}

var t0 = time.Date(2024, 5, 1, 12, 0, 0, 0, time.UTC)

// created is the state of a log with agent.created (parent "" for a
// root), created d after t0.
func created(id, parent string, d time.Duration) *projection.State {
	s := projection.New()
	s.Created, s.ID, s.Name, s.ParentID, s.CreatedTS = true, id, "n"+short(id), parent, t0.Add(d)
	return s
}

// newRun is a run of h on a fresh in-memory home, the clock at t0.
func newRun(h *fakeHost) (*Run[*fakeAgent], *faultfs.Mem) {
	fsys := faultfs.NewMem()
	if err := fsys.MkdirAll(home+"/agents", 0o700); err != nil {
		panic(err)
	}
	return &Run[*fakeAgent]{Host: h, FS: fsys, Home: home, Dir: dir, Now: func() time.Time { return t0 },
		BootID: "boot2", Checkpoints: true, Every: 250 * time.Millisecond, Logger: hclog.NewNullLogger()}, fsys
}
