package engine

import (
	"bytes"
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/checkpoint"
	"github.com/warren-dev/warren/faultfs"
	fold "github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/session"
	"github.com/warren-dev/warren/store"
)

// Loading agents back (load.go), ported from the tests of
// engine/internal/agentload, which ran its loader against a fake opener on
// an in-memory filesystem. Here the loads run on a Core that has not
// recovered (stepCore), on the files a harness's daemon wrote.

// TestLoadFoldsOrReportsMissing: a log is opened and folded in one pass
// (from the agent's checkpoint when it has one); a directory without a log
// is Missing; the log comes back bound to the agent's record, which its
// commits then reach.
func TestLoadFoldsOrReportsMissing(t *testing.T) {
	h := newHarness(t, withFakeClock, func(h *harness) { h.noWake = true })
	a1 := h.create("lead", "", "echo")
	h.stop()
	a2 := strings.Repeat("a2", 16)
	if err := h.fs.MkdirAll("/home/agents/"+a2, 0o700); err != nil {
		t.Fatal(err)
	}
	c := h.stepCore(CoreOptions{})
	ctx := context.Background()

	l := c.load(ctx, a1, nil)
	if l.Err != nil || l.Log == nil || l.Resumed == nil || l.State.Name != "lead" {
		t.Fatalf("a1 with its checkpoint: %+v; want it loaded from the checkpoint", l)
	}
	if err := l.Log.Close(); err != nil {
		t.Fatal(err)
	}
	if err := h.fs.Remove(filepath.Join(h.c.agentDir(a1), checkpoint.Name)); err != nil {
		t.Fatal(err)
	}
	l1, l2 := c.load(ctx, a1, nil), c.load(ctx, a2, nil)
	if l1.Err != nil || l1.Log == nil || !l1.State.Created || l1.State.Name != "lead" || l1.Resumed != nil || l1.Missing {
		t.Fatalf("a1: %+v", l1)
	}
	defer l1.Log.Close()
	if l1.State.Replaying() {
		t.Fatal("a1: the state is still in replay mode")
	}
	if l1.State.LastSeq != l1.Log.LastSeq() {
		t.Fatalf("a1: folded up to seq %d, the log ends at %d", l1.State.LastSeq, l1.Log.LastSeq())
	}
	if !l2.Missing || l2.Log != nil || l2.Err != nil {
		t.Fatalf("a2 (no log): %+v", l2)
	}
	// The binding: once the record is made, what is logged reaches it.
	c.adopt(l1)
	if l1.Agent == nil {
		t.Fatal("a1: no record made")
	}
	v := "v"
	e, err := l1.Log.Append(schema.MetadataUpdated, schema.MetadataUpdatedData{Key: "k", Value: &v})
	if err != nil {
		t.Fatal(err)
	}
	seq := look(l1.Agent, func(p *projection, _ liveFlags) uint64 { return p.LastSeq })
	if seq != e.Seq {
		t.Fatalf("the record is at seq %d after an append of seq %d: the log is not bound to it", seq, e.Seq)
	}
}

// TestRetryOpenFaults: a log that cannot be opened for lack of a resource
// is retried until it opens; one that never does is marked errUnopened,
// wrapping the cause, once the retries have waited openRetryLimit.
func TestRetryOpenFaults(t *testing.T) {
	h := newHarness(t, withFakeClock, func(h *harness) { h.noWake = true })
	a1 := h.create("one", "", "echo")
	a2 := h.create("two", "", "echo")
	h.stop()
	first := &failingOpens{suffix: a1 + "/events.jsonl", err: syscall.EMFILE, n: 2}
	always := &failingOpens{FS: first, suffix: a2 + "/events.jsonl", err: syscall.EMFILE, n: -1}
	h.wrapFS = func(inner faultfs.FS) faultfs.FS { first.FS = inner; return always }
	c := h.stepCore(CoreOptions{})
	ctx := context.Background()
	all := []*loaded{c.load(ctx, a1, nil), c.load(ctx, a2, nil)}
	for _, l := range all {
		if !resourceFault(l.Err) {
			t.Fatalf("%s at the first load: %v, want a resource fault", l.ID, l.Err)
		}
	}
	h.delays = nil
	c.retryOpenFaults(ctx, all)
	if all[0].Err != nil || all[0].Log == nil || all[0].State.Name != "one" {
		t.Fatalf("a1 after retries: %+v", all[0])
	}
	defer all[0].Log.Close()
	if !errors.Is(all[1].Err, errUnopened) || !errors.Is(all[1].Err, syscall.EMFILE) || all[1].Log != nil {
		t.Fatalf("a2: %+v, want errUnopened wrapping EMFILE", all[1])
	}
	var slept, last = h.delays[0], h.delays[0]
	for _, d := range h.delays[1:] {
		if d < last {
			t.Fatalf("the waits %v shrink", h.delays)
		}
		slept, last = slept+d, d
	}
	if slept < openRetryLimit {
		t.Fatalf("waited %v in all (%v), want at least openRetryLimit (%v)", slept, h.delays, openRetryLimit)
	}
	if resourceFault(errors.New("damage")) || !resourceFault(store.ErrUnavailable) {
		t.Fatal("resourceFault: damage is no resource fault, an unavailable store is")
	}
}

// TestSnapshotAgreesWithTheLog: a session.json that cannot be read is kept
// aside and rebuilt from the log; a provider blob of an agent that is not
// suspended is dropped (and the snapshot saved without it), one of a
// suspended agent kept.
func TestSnapshotAgreesWithTheLog(t *testing.T) {
	h := newHarness(t, withFakeClock, func(h *harness) { h.noWake = true })
	a1 := h.create("lead", "", "echo")
	h.down(faultfs.ProcessCrash) // killed: its session is not suspended
	garbage := []byte("{not json")
	h.rewrite(h.c.snapshotPath(a1), garbage)
	c := h.stepCore(CoreOptions{})
	l := c.load(context.Background(), a1, nil)
	if l.Err != nil || l.Log == nil {
		t.Fatalf("load: %+v", l)
	}
	_ = l.Log.Close()
	facts := factsOf(l.State)
	if facts.Suspended || facts.Provider != "inproc" {
		t.Fatalf("facts %+v, want the inproc session, not suspended", facts)
	}
	s := c.restoredSnapshot(a1, facts)
	if s.ID != a1 || s.State != session.StateIdle || !s.CreatedAt.Equal(clockStart) || s.Provider != "inproc" || s.Model != "echo" {
		t.Fatalf("rebuilt snapshot %+v", s)
	}
	if kept := h.keptAside(a1); len(kept) != 1 || !bytes.Equal(kept[0], garbage) {
		t.Fatalf("the unreadable session.json was not kept aside: %q", kept)
	}
	if saved, err := c.store.Load(a1); err != nil || saved.ID != a1 {
		t.Fatalf("the rebuilt snapshot was not saved: %+v, %v", saved, err)
	}
	s = s.Clone()
	s.ProviderState = []byte("stale")
	if err := c.store.Save(s); err != nil {
		t.Fatal(err)
	}
	if got := c.restoredSnapshot(a1, facts); len(got.ProviderState) != 0 {
		t.Fatal("a stale provider blob was kept")
	}
	if got, _ := c.store.Load(a1); len(got.ProviderState) != 0 {
		t.Fatal("the snapshot without its stale blob was not saved")
	}
	if err := c.store.Save(s); err != nil {
		t.Fatal(err)
	}
	facts.Suspended = true
	if got := c.restoredSnapshot(a1, facts); string(got.ProviderState) != "stale" {
		t.Fatal("the provider blob of a suspended session was dropped")
	}
}

// TestFactsOfTakesTheRecordedSession: the session facts are the recorded
// provider session's (session.created), not the agent's preferred provider
// and model, which a send can change.
func TestFactsOfTakesTheRecordedSession(t *testing.T) {
	p := &fold.State{Provider: "preferred", Model: "m-pref", SessProvider: "inproc", SessModel: "echo",
		Handle: "h1", Suspended: true}
	want := sessionFacts{Provider: "inproc", Model: "echo", Handle: "h1", Suspended: true}
	if got := factsOf(p); got != want {
		t.Fatalf("factsOf = %+v, want %+v", got, want)
	}
}

// TestIDsListsDirectoriesThenTheStores: the agents to recover are the
// directories of agents/ named by a normalized agent id, then, on a
// cluster store, the store's agents not listed yet; anything else in the
// directory is left out.
func TestIDsListsDirectoriesThenTheStores(t *testing.T) {
	const a, b, c = "000000000000000000000000000000a1", "000000000000000000000000000000b1", "000000000000000000000000000000c1"
	h := newHarness(t, func(h *harness) { h.noWake = true })
	h.stop()
	for _, d := range []string{a, b, "000000000000000000000000000000A2", "notes"} {
		if err := h.fs.MkdirAll("/home/agents/"+d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	h.rewrite("/home/agents/000000000000000000000000000000d1", nil) // a file
	ctx := context.Background()
	if ids, _, err := h.stepCore(CoreOptions{}).agentIDs(ctx); err != nil || !slices.Equal(ids, []string{a, b}) {
		t.Fatalf("the local store's agents = %v, %v; want %v", ids, err, []string{a, b})
	}
	st := newLeaseStore(h.fs, time.Now, nil)
	st.agents = []string{b, c}
	if ids, _, err := h.stepCore(CoreOptions{Store: st}).agentIDs(ctx); err != nil || !slices.Equal(ids, []string{a, b, c}) {
		t.Fatalf("with the store's = %v, %v; want %v", ids, err, []string{a, b, c})
	}
	bad := errors.New("no quorum")
	st.set(func(s *leaseStore) { s.agentsErr = bad })
	if _, _, err := h.stepCore(CoreOptions{Store: st}).agentIDs(ctx); !errors.Is(err, bad) {
		t.Fatalf("when the store fails = %v, want its error", err)
	}
	none, err := NewCore(ctx, withDefaults(CoreOptions{FS: h.fs, Home: "/none", Logger: hclog.NewNullLogger()}))
	if err != nil {
		t.Fatal(err)
	}
	defer none.Close(ctx)
	if _, _, err := none.agentIDs(ctx); err == nil {
		t.Fatal("a missing directory listed")
	}
}

// TestRemoveOrphanDir: an orphan directory is removed with its files,
// durably (a power loss after it keeps the removal), and the other agents
// are left alone; a directory that is not there is no error.
func TestRemoveOrphanDir(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.noWake = true })
	b := h.create("b", "", "echo")
	a := strings.Repeat("a1", 16)
	dir := "/home/agents/" + a
	if err := h.fs.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	h.rewrite(dir+"/events.jsonl", []byte("{}\n"))
	for _, d := range []string{"/home/agents", dir} {
		if err := h.fs.SyncDir(d); err != nil {
			t.Fatal(err)
		}
	}
	h.c.removeOrphanDir(a)
	h.c.removeOrphanDir(strings.Repeat("c1", 16)) // none: nothing happens
	h.down(faultfs.PowerLoss)
	if ok, _ := faultfs.Exists(h.fs, dir); ok {
		t.Fatal("after the removal and a power loss the orphan directory is back")
	}
	if ok, _ := faultfs.Exists(h.fs, h.c.logPath(b)); !ok {
		t.Fatal("the other agent's log is gone")
	}
	h.start()
	if res := h.send(b, "hi"); res.Response != "echo: hi" {
		t.Fatalf("the other agent after the restart: %+v", res)
	}
}
