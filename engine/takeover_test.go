package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/warren-dev/warren/config"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/store"
	"github.com/warren-dev/warren/store/local"
)

// The takeover scan's steps (takeover.go) on the real engine, over
// leaseStore: store/local with the leases of a cluster store played by
// the test (which ids another daemon holds, which logs the cluster does
// not serve).

// TestTakeoverRestoresBeforePlacing: a takeover scan claims what no daemon
// holds, leaves an agent whose log the cluster did not serve to the next
// scan (its claim given back), restores the agents it takes (run marked
// interrupted, session.json read) as it places them, and does not redo the
// spawn of an agent that exists in the store.
func TestTakeoverRestoresBeforePlacing(t *testing.T) {
	lt := newLeaseTeam(t)
	h := lt.h
	lt.owned = map[string]bool{lt.lead: true, lt.helper: true, lt.other: true}
	h.down(faultfs.ProcessCrash)
	garbage := []byte("{not json")
	h.rewrite(h.c.snapshotPath(lt.lead), garbage)
	h.rewrite(h.c.snapshotPath(lt.other), garbage)
	h.start()
	st := lt.st
	got := h.report
	got.Resumed = 0 // from a checkpoint or not: what the crash left
	if want := (RecoveryReport{Agents: 1}); got != want {
		t.Fatalf("recovery %+v, want %+v (boss alone)", h.report, want)
	}
	// lead's owner's lease lapsed; other's too, but the cluster does not
	// serve its log yet. helper stays held.
	st.set(func(s *leaseStore) {
		delete(s.owned, lt.lead)
		delete(s.owned, lt.other)
		s.unavailable[lt.other] = true
	})
	helperClaims := st.ownsOf(lt.helper)
	rep, err := h.c.Takeover(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rep.Resumed = 0 // from a checkpoint or not: what the crash left
	if want := (RecoveryReport{Agents: 1, Interrupted: 1, Pending: 1}); rep != want {
		t.Errorf("takeover %+v, want %+v", rep, want)
	}
	if p, ok := h.c.tree.Parent(lt.lead); !ok || p != lt.boss {
		t.Errorf("lead's parent in the tree %q (%v), want boss", p, ok)
	}
	if n := h.count(lt.lead, schema.RunInterrupted); n != 1 {
		t.Errorf("lead's log holds %d run.interrupted, want 1", n)
	}
	if s := h.statusOf(lt.lead); s != "interrupted_startup" {
		t.Errorf("lead's status %s, want interrupted_startup", s)
	}
	if kept := h.keptAside(lt.lead); len(kept) != 1 || !bytes.Equal(kept[0], garbage) {
		t.Errorf("lead's unreadable session.json kept aside %q; want it read (and kept aside) by the takeover", kept)
	}
	// helper exists (held by another daemon): lead's spawn of it is not
	// redone, so nothing claims it but the scan.
	if n := st.ownsOf(lt.helper) - helperClaims; n != 1 {
		t.Errorf("helper was claimed %d times by the scan, want once", n)
	}
	if _, ok := h.c.agent(lt.helper); ok || h.count(lt.helper, schema.AgentCreated) != 1 {
		t.Errorf("helper listed %v, %d agent.created; want not listed, created once", ok, h.count(lt.helper, schema.AgentCreated))
	}
	// other was claimed, not served: given back for the next scan.
	if _, ok := h.c.agent(lt.other); ok || h.c.claims.Holds(lt.other) || !slices.Contains(st.releasedIDs(), lt.other) {
		t.Errorf("other: listed %v, claim held %v, released %v; want its claim given back", ok, h.c.claims.Holds(lt.other), st.releasedIDs())
	}
	st.set(func(s *leaseStore) { delete(s.unavailable, lt.other) })
	rep, err = h.c.Takeover(context.Background())
	rep.Resumed = 0
	if err != nil || rep != (RecoveryReport{Agents: 1}) {
		t.Fatalf("the next scan: %+v, %v; want other taken", rep, err)
	}
	if _, ok := h.c.agent(lt.other); !ok {
		t.Error("other is not listed after the next scan")
	}
	if kept := h.keptAside(lt.other); len(kept) != 1 || !bytes.Equal(kept[0], garbage) {
		t.Errorf("other's unreadable session.json kept aside %q; want it read (and kept aside) by the takeover", kept)
	}
	if n := h.count(lt.lead, schema.RunInterrupted); n != 1 {
		t.Errorf("after the next scan lead's log holds %d run.interrupted, want 1", n)
	}
}

// TestTakeoverDoesNothing: on the local store, once the core is stopping,
// and when the store holds nothing the core does not know, a scan claims
// and opens nothing.
func TestTakeoverDoesNothing(t *testing.T) {
	t.Run("local store", func(t *testing.T) {
		h := newHarness(t, func(h *harness) { h.noWake = true })
		x := h.create("x", "", "echo")
		h.stop()
		// x's directory is away during the start, back after it: a log the
		// core does not know.
		if err := h.fs.Rename(h.c.agentDir(x), "/home/aside"); err != nil {
			t.Fatal(err)
		}
		h.start()
		if err := h.fs.Rename("/home/aside", h.c.agentDir(x)); err != nil {
			t.Fatal(err)
		}
		if rep, err := h.c.Takeover(context.Background()); err != nil || rep != (RecoveryReport{}) {
			t.Fatalf("takeover on the local store: %+v, %v; want nothing", rep, err)
		}
		if _, ok := h.c.agent(x); ok {
			t.Fatal("the local store's scan took an agent")
		}
	})
	t.Run("stopping", func(t *testing.T) {
		lt := newLeaseTeam(t)
		lt.owned = map[string]bool{lt.lead: true, lt.helper: true}
		lt.h.down(faultfs.ProcessCrash)
		lt.h.start()
		st := lt.st
		st.set(func(s *leaseStore) { s.owned = map[string]bool{} })
		lt.h.stop()
		listed := len(st.listings())
		if rep, err := lt.h.c.Takeover(context.Background()); err != nil || rep != (RecoveryReport{}) {
			t.Fatalf("takeover once stopping: %+v, %v; want nothing", rep, err)
		}
		if n := len(st.listings()); n != listed || st.opensOf(lt.lead) != 0 || st.ownsOf(lt.lead) != 1 {
			t.Fatalf("a stopping core's scan listed the store (%d -> %d), claimed lead %d times, opened it %d times",
				listed, n, st.ownsOf(lt.lead), st.opensOf(lt.lead))
		}
	})
	t.Run("nothing unknown", func(t *testing.T) {
		lt := newLeaseTeam(t)
		lt.h.down(faultfs.ProcessCrash)
		lt.h.start()
		st := lt.st
		ids := []string{lt.boss, lt.lead, lt.helper, lt.other}
		listed := len(st.listings())
		owns, opens := map[string]int{}, map[string]int{}
		for _, id := range ids {
			owns[id], opens[id] = st.ownsOf(id), st.opensOf(id)
		}
		if rep, err := lt.h.c.Takeover(context.Background()); err != nil || rep != (RecoveryReport{}) {
			t.Fatalf("takeover: %+v, %v; want nothing", rep, err)
		}
		if n := len(st.listings()); n != listed+1 {
			t.Fatalf("the scan listed the store %d times, want once", n-listed)
		}
		for _, id := range ids {
			if st.ownsOf(id) != owns[id] || st.opensOf(id) != opens[id] {
				t.Fatalf("the scan claimed or opened %s, which the core runs", id)
			}
		}
	})
}

// TestTakeoverScanEvery: on a cluster store the scan is armed TakeoverEvery
// after the recovery and again TakeoverEvery after each scan ends, even a
// failed one; on the local store none is armed.
func TestTakeoverScanEvery(t *testing.T) {
	h := newHarness(t, withFakeClock, func(h *harness) { h.noWake = true })
	if h.c.sched.Cancel("", takeoverTimer) {
		t.Fatal("a takeover scan is armed on the local store")
	}

	lt := newLeaseHarness(t)
	st, every := lt.st, config.DefaultTakeoverEvery
	if got := st.listings(); len(got) != 1 || !got[0].Equal(clockStart) {
		t.Fatalf("the store was listed at %v, want once by the recovery", got)
	}
	lt.h.clock.Advance(every - time.Nanosecond)
	if n := len(st.listings()); n != 1 {
		t.Fatalf("a scan ran before TakeoverEvery had passed")
	}
	lt.h.clock.Advance(time.Nanosecond)
	st.set(func(s *leaseStore) { s.agentsErr = errors.New("test: no quorum") })
	lt.h.clock.Advance(every)
	st.set(func(s *leaseStore) { s.agentsErr = nil })
	lt.h.clock.Advance(every)
	want := []time.Time{clockStart, clockStart.Add(every), clockStart.Add(2 * every), clockStart.Add(3 * every)}
	if got := st.listings(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the store was listed at %v, want %v (a scan every TakeoverEvery, the failed one too)", got, want)
	}
}

// newLeaseStore is a leaseStore on fsys's home /home; now stamps its
// listings; owned lists the ids another daemon holds.
func newLeaseStore(fsys faultfs.FS, now func() time.Time, owned map[string]bool) *leaseStore {
	if owned == nil {
		owned = map[string]bool{}
	}
	return &leaseStore{Store: local.New(local.Options{FS: fsys, Home: "/home", Files: eventlog.NewFiles(config.DefaultMaxOpenLogs)}), now: now, owned: owned,
		unavailable: map[string]bool{}, owns: map[string]int{}, opens: map[string]int{}}
}

// leaseStore is store/local on the harness's files playing a cluster store
// (the engine takes any store but *local.Store for one): the ids in owned
// are held by another daemon (Own: store.ErrOwned), the logs of the ids in
// unavailable are not served (OpenLog: store.ErrUnavailable), and
// agentsErr fails the listing. It records when the store's agents were
// listed, the claims and opens of each id, and the claims given back.
type leaseStore struct {
	*local.Store
	now func() time.Time

	mu          sync.Mutex
	owned       map[string]bool
	unavailable map[string]bool
	agentsErr   error
	agents      []string // when set, the listing (else store/local's)
	listed      []time.Time
	owns, opens map[string]int
	released    []string
}

func (s *leaseStore) Agents(ctx context.Context) ([]string, error) {
	s.mu.Lock()
	s.listed = append(s.listed, s.now())
	err, ids := s.agentsErr, s.agents
	s.mu.Unlock()
	if err != nil {
		return nil, err
	}
	if ids != nil {
		return ids, nil
	}
	return s.Store.Agents(ctx)
}

func (s *leaseStore) Own(ctx context.Context, id string) (store.Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.owns[id]++
	if s.owned[id] {
		return nil, fmt.Errorf("test: %s: %w", id, store.ErrOwned)
	}
	return &leaseStoreLease{id: id, s: s}, nil
}

func (s *leaseStore) OpenLog(ctx context.Context, id string, o store.LogOptions) (store.Log, error) {
	s.mu.Lock()
	s.opens[id]++
	unavailable := s.unavailable[id]
	s.mu.Unlock()
	if unavailable {
		return nil, fmt.Errorf("test: read %s: %w", id, store.ErrUnavailable)
	}
	return s.Store.OpenLog(ctx, id, o)
}

func (s *leaseStore) set(f func(s *leaseStore)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

func (s *leaseStore) ownsOf(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.owns[id]
}

func (s *leaseStore) opensOf(id string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.opens[id]
}

func (s *leaseStore) listings() []time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]time.Time(nil), s.listed...)
}

func (s *leaseStore) releasedIDs() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.released...)
}

// leaseStoreLease is a claim of a leaseStore: never lost, never expiring.
type leaseStoreLease struct {
	id string
	s  *leaseStore
}

func (l *leaseStoreLease) ID() string            { return l.id }
func (l *leaseStoreLease) Epoch() uint64         { return 1 }
func (l *leaseStoreLease) Lost() <-chan struct{} { return nil }
func (l *leaseStoreLease) Expires() time.Time    { return time.Time{} }
func (l *leaseStoreLease) Release(context.Context) error {
	l.s.mu.Lock()
	defer l.s.mu.Unlock()
	l.s.released = append(l.s.released, l.id)
	return nil
}

// leaseTeam is a harness (fake clock, no wakes) on leaseStores, one per
// start, holding what one daemon built before it was killed: boss, a
// root, spawned lead in a turn; lead spawned helper in its first turn and
// was in its second when the daemon died, a message from boss pending for
// it; other is a root of its own. Each start's store holds
// the ids in owned for another daemon.
type leaseTeam struct {
	h                         *harness
	st                        *leaseStore // the running core's store
	owned                     map[string]bool
	boss, lead, helper, other string
}

// newLeaseHarness starts a harness whose stores are leaseStores (an empty
// home); build adds the team.
func newLeaseHarness(t *testing.T) *leaseTeam {
	t.Helper()
	lt := &leaseTeam{owned: map[string]bool{}}
	lt.h = newHarness(t, withFakeClock, func(h *harness) {
		h.noWake = true
		h.store = func(fsys faultfs.FS) store.Store {
			owned := map[string]bool{}
			for id, v := range lt.owned {
				owned[id] = v
			}
			lt.st = newLeaseStore(fsys, h.clock.Now, owned)
			return lt.st
		}
	})
	return lt
}

// newLeaseTeam builds the team; the daemon that built it is still running
// (the test kills it with h.down or h.crash).
func newLeaseTeam(t *testing.T) *leaseTeam {
	t.Helper()
	lt := newLeaseHarness(t)
	h := lt.h
	// spawn is a turn that spawns a child (recorded in the run, so that a
	// recovery would redo it if the child did not exist).
	spawn := func(name, model string) inproc.Program {
		return func(ctx context.Context, tr *inproc.Turn) (string, error) {
			r, err := tr.Call("spawn_agent", map[string]any{"name": name, "instructions": "work", "model": model})
			if err != nil {
				return "", err
			}
			if r["error"] != nil {
				return "", fmt.Errorf("spawn_agent: %v", r["error"])
			}
			return "spawned", nil
		}
	}
	child := func(parent string) string {
		kids := h.c.tree.Children(parent)
		if len(kids) != 1 {
			t.Fatalf("children %v, want one", kids)
		}
		return kids[0]
	}
	started := make(chan *inproc.Turn, 1)
	h.prov.Register("boss", spawn("lead", "lead"))
	h.prov.Register("lead", inproc.Sequence(spawn("helper", "echo"),
		inproc.Signal(started, inproc.Block(make(chan struct{}), inproc.Echo))))
	lt.boss = h.create("boss", "", "boss")
	lt.other = h.create("other", "", "echo")
	if res := h.send(lt.boss, "spawn"); res.Response != "spawned" {
		t.Fatalf("boss's turn: %+v", res)
	}
	lt.lead = child(lt.boss)
	if res := h.send(lt.lead, "spawn"); res.Response != "spawned" {
		t.Fatalf("lead's first turn: %+v", res)
	}
	lt.helper = child(lt.lead)
	go func() { _, _ = h.c.Send(context.Background(), lt.lead, "work", "", "", nil) }()
	<-started
	h.tool(lt.boss, "send_message", map[string]any{"recipient": "lead", "text": "news"})
	return lt
}
