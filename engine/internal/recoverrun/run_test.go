package recoverrun

import (
	"bytes"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/engine/internal/agentload"
	"github.com/warren-dev/warren/engine/internal/placement"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/store"
	"github.com/warren-dev/warren/token"
)

func checkCalls(t *testing.T, h *fakeHost, want []string) {
	t.Helper()
	if !reflect.DeepEqual(h.calls, want) {
		t.Fatalf("calls:\n  %s\nwant:\n  %s", strings.Join(h.calls, "\n  "), strings.Join(want, "\n  "))
	}
}

func writeFile(t *testing.T, fsys faultfs.FS, name string) {
	t.Helper()
	mkdir(t, fsys, filepath.Dir(name))
	if err := faultfs.WriteFile(fsys, name, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
}

func mkdir(t *testing.T, fsys faultfs.FS, name string) {
	t.Helper()
	if err := fsys.MkdirAll(name, 0o700); err != nil {
		t.Fatal(err)
	}
}

// TestRecoverStepsInOrder: a recovery of a home holding every kind of
// agent directory does recovery's steps in their order, settles each kind
// as it should, and reports it.
func TestRecoverStepsInOrder(t *testing.T) {
	h := newFakeHost()
	r, fsys := newRun(h)
	var logs bytes.Buffer
	r.Logger = hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})

	rl := h.agent(root, created(root, "", 0))
	rl.Resumed = &eventlog.Resume{Seq: 5}
	rl.State.Subs["s1"] = projection.Subscription{ID: "s1", Target: child}
	rl.State.Subs["s2"] = projection.Subscription{ID: "s2", Target: "zz"} // not recovered: not indexed
	h.pending[root] = 2
	cl := h.agent(child, created(child, root, time.Second))
	cl.State.Run = &projection.Run{RunID: "run1"}
	h.restart[child] = true
	h.loads[damaged] = &Agent[*fakeAgent]{ID: damaged, State: projection.New(), Err: errors.New("line 3: bad crc")}
	h.ids = append(h.ids, damaged)
	gl := h.agent(gone, created(gone, "", 2*time.Second))
	gl.State.Terminated = true
	gl.State.Notices = &projection.Notices{Seq: 9, NoticesOwedData: schema.NoticesOwedData{From: "idle", To: "terminated", Key: gone}} // its termination's
	h.loads[orphan] = &Agent[*fakeAgent]{ID: orphan, State: projection.New(), Missing: true}
	h.ids = append(h.ids, orphan)
	mkdir(t, fsys, dir(orphan))
	ul := h.agent(unknown, projection.New())
	ul.Agent = nil
	writeFile(t, fsys, dir(unknown)+"/events.jsonl")
	writeFile(t, fsys, dir(unknown)+"/session.json")
	kl := h.agent(lostKid, created(lostKid, lost, 3*time.Second))
	h.ids = append(h.ids, away)
	h.elsewhere[away] = true

	rep, err := r.Recover()
	if err != nil {
		t.Fatal(err)
	}
	checkCalls(t, h, []string{
		"Prepare", "SetRecovering true", "OpenUserInbox", "AgentIDs",
		"Claimable a1,a2,d1,b1,e1,e2,c1,f1",
		"Load a1,a2,d1,b1,e1,e2,c1 retry=true",
		// classify, in the loaded order
		"ListCorrupt d1: line 3: bad crc",
		"Forget b1", "DropLease b1",
		"RemoveOrphanDir e1",
		// e2 is moved to quarantine, then the quarantine is indexed
		"SetQuarantine 1",
		// place, parents first; c1's parent is nowhere: terminated
		"Parents", "AddToTree a1", "List a1", "AddToTree a2", "List a2", "Forget c1",
		// restore the placed agents
		"Snapshot a1", "Snapshot a2", "NeedsRestartMark a2 boot2",
		// adopt
		"IndexSubscription a1->a2", "Redeliver a1", "Redeliver a2",
		"OwedNotices a1", "OwedNotices a2", "OwedNotices b1", "SettleWaits", "Arm a1", "Arm a2",
		"SetRecovering false",
		// finish, each step over every agent
		"FinishCutSpawns a1", "FinishCutSpawns a2", "Prune a1", "Prune a2",
		"BootstrapUnstarted a1", "BootstrapUnstarted a2", "WakeAll",
		// the scrub: the session.json files left to read, then the resumed a1
		"Background", "Stopping", "LoadSnapshot a1", "Stopping", "LoadSnapshot a2", "CheckpointAll", "Stopping", "Scrubbed",
		"SetRecovering false", // deferred
	})
	want := Report{Agents: 2, Terminated: 2, Orphans: 1, Corrupt: 1, Interrupted: 1, Pending: 2, Quarantined: 1, Resumed: 1}
	if rep != want {
		t.Errorf("report %+v, want %+v", rep, want)
	}
	if line := "recovery finished: agents=2 terminated=2 orphans=1 corrupt=1 quarantined=1 interrupted=1 pending=2 from_checkpoints=1"; !strings.Contains(logs.String(), line) {
		t.Errorf("log lacks %q:\n%s", line, logs.String())
	}
	if ev := cl.Log.(*fakeLog).events; !reflect.DeepEqual(ev, []string{schema.RunInterrupted}) {
		t.Errorf("child's log got %v, want run.interrupted", ev)
	}
	if k := kl.Log.(*fakeLog); !reflect.DeepEqual(k.events, []string{schema.AgentTerminated}) || k.closed != 1 {
		t.Errorf("orphan child's log got %v, closed %d; want agent.terminated, closed once", k.events, k.closed)
	}
	if gl.Log.(*fakeLog).closed != 1 || ul.Log.(*fakeLog).closed != 1 {
		t.Error("the logs of a terminated agent and of an uncreated one are not closed")
	}
	if n := h.loads[damaged].State.Name; n != damaged {
		t.Errorf("a corrupt agent without a name is listed as %q, want its id", n)
	}
	if ok, _ := faultfs.Exists(fsys, dir(unknown)); ok {
		t.Error("the unknown directory is still in agents/")
	}
	if q := h.quarantine[unknown]; q != home+"/quarantine/"+unknown+"-20240501T120000.000Z" {
		t.Errorf("quarantined as %q", q)
	}
	// Spawns of agents another daemon holds, or that exist, are not redone.
	if want := (placement.Existing{root: true, child: true, gone: true, lostKid: true, away: true}); !reflect.DeepEqual(h.existing, want) {
		t.Errorf("existing %v, want %v", h.existing, want)
	}
}

// TestRecoverFailsBeforeAgents: a failure to prepare or to open the
// operator's inbox ends the recovery, with wakes let go again.
func TestRecoverFailsBeforeAgents(t *testing.T) {
	h := newFakeHost()
	h.prepErr = errors.New("no disk")
	r, _ := newRun(h)
	if _, err := r.Recover(); err != h.prepErr {
		t.Fatalf("err %v", err)
	}
	checkCalls(t, h, []string{"Prepare"})

	h = newFakeHost()
	h.inboxErr = errors.New("inbox damaged")
	r, _ = newRun(h)
	if _, err := r.Recover(); err != h.inboxErr {
		t.Fatalf("err %v", err)
	}
	checkCalls(t, h, []string{"Prepare", "SetRecovering true", "OpenUserInbox", "SetRecovering false"})
}

// TestSettleUncreated: a directory without agent.created is removed only
// when it provably holds nothing acknowledged; otherwise it is
// quarantined, or listed corrupt where it is when it cannot be moved or
// is a cluster store's log.
func TestSettleUncreated(t *testing.T) {
	for _, tc := range []struct {
		name      string
		setup     func(t *testing.T, h *fakeHost, r *Run[*fakeAgent], fsys *faultfs.Mem)
		want      Report
		call      string // the settling call expected, "" for none
		stays     bool   // the directory is still in agents/
		corrupted string // part of the cause it is listed with
	}{{
		name: "empty directory: an orphan, removed",
		setup: func(t *testing.T, h *fakeHost, _ *Run[*fakeAgent], fsys *faultfs.Mem) {
			h.loads[orphan].Log, h.loads[orphan].Missing = nil, true
		},
		want: Report{Orphans: 1}, call: "RemoveOrphanDir e1", stays: true, // the host removes it
	}, {
		name: "empty events.jsonl alone: an orphan",
		setup: func(t *testing.T, h *fakeHost, _ *Run[*fakeAgent], fsys *faultfs.Mem) {
			writeFile(t, fsys, dir(orphan)+"/events.jsonl")
		},
		want: Report{Orphans: 1}, call: "RemoveOrphanDir e1", stays: true,
	}, {
		name: "entries without agent.created: quarantined",
		setup: func(t *testing.T, h *fakeHost, _ *Run[*fakeAgent], fsys *faultfs.Mem) {
			writeFile(t, fsys, dir(orphan)+"/events.jsonl")
			h.loads[orphan].Log.(*fakeLog).last = 3
		},
		want: Report{Quarantined: 1},
	}, {
		name: "named as a parent: quarantined, its child listed",
		setup: func(t *testing.T, h *fakeHost, _ *Run[*fakeAgent], fsys *faultfs.Mem) {
			h.loads[orphan].Log, h.loads[orphan].Missing = nil, true
			h.agent(child, created(child, orphan, 0))
		},
		want: Report{Quarantined: 1, Corrupt: 1},
		call: "List a2: its parent " + orphan + " is in quarantine (" + home + "/quarantine/" + orphan +
			"-20240501T120000.000Z): restore that directory to " + dir(orphan) + " and restart the daemon, or remove it",
	}, {
		name: "cluster store: listed corrupt, nothing moved",
		setup: func(t *testing.T, h *fakeHost, r *Run[*fakeAgent], fsys *faultfs.Mem) {
			r.Clustered = true
			h.loads[orphan].Log.(*fakeLog).last = 3
		},
		want: Report{Corrupt: 1}, stays: true,
		call: "ListCorrupt e1: its log in the cluster store holds no agent.created (events.jsonl holds 3 entries but no agent.created); it is not quarantined (see `warren export`)",
	}, {
		name: "the move fails: listed corrupt where it is",
		setup: func(t *testing.T, h *fakeHost, _ *Run[*fakeAgent], fsys *faultfs.Mem) {
			writeFile(t, fsys, dir(orphan)+"/session.json")
			fsys.Inject(faultfs.Rule{Kind: faultfs.OpRename, Err: syscall.EIO})
		},
		want: Report{Corrupt: 1}, stays: true,
		call: "ListCorrupt e1: " + dir(orphan) + ": no agent.created in events.jsonl, but it holds [session.json]; moving it to " +
			home + "/quarantine failed: ",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newFakeHost()
			r, fsys := newRun(h)
			h.agent(orphan, projection.New())
			mkdir(t, fsys, dir(orphan))
			tc.setup(t, h, r, fsys)
			rep, err := r.Recover()
			if err != nil {
				t.Fatal(err)
			}
			if rep != tc.want {
				t.Errorf("report %+v, want %+v", rep, tc.want)
			}
			found := tc.call == ""
			for _, c := range h.calls {
				if tc.call != "" && strings.HasPrefix(c, tc.call) {
					found = true
				}
				if c == "RemoveOrphanDir e1" && tc.want.Orphans == 0 {
					t.Errorf("removed a directory that is no orphan")
				}
			}
			if !found {
				t.Errorf("no call %q in\n  %s", tc.call, strings.Join(h.calls, "\n  "))
			}
			if ok, _ := faultfs.Exists(fsys, dir(orphan)); ok != tc.stays {
				t.Errorf("directory in agents/: %v, want %v", ok, tc.stays)
			}
			if l := h.loads[orphan].Log; l != nil && l.(*fakeLog).closed != 1 {
				t.Error("the uncreated agent's log is not closed")
			}
		})
	}
}

// TestPlaceListsWhatItCannotPlace: children of a parent whose log could
// not be opened are listed with its cause (down the tree), and an agent
// the tree refuses is listed corrupt; neither is terminated.
func TestPlaceListsWhatItCannotPlace(t *testing.T) {
	h := newFakeHost()
	r, _ := newRun(h)
	unopened := fmt.Errorf("%w: EMFILE", agentload.ErrUnopened)
	h.loads[root] = &Agent[*fakeAgent]{ID: root, State: created(root, "", 0), Err: unopened}
	h.ids = append(h.ids, root)
	h.agent(child, created(child, root, time.Second))
	grandchild := "000000000000000000000000000000a3"
	h.agent(grandchild, created(grandchild, child, 2*time.Second))
	refused := "000000000000000000000000000000a4"
	h.agent(refused, created(refused, "", 3*time.Second))
	h.tree[refused] = errors.New("name taken")

	rep, err := r.Recover()
	if err != nil {
		t.Fatal(err)
	}
	if want := (Report{Corrupt: 4}); rep != want {
		t.Errorf("report %+v, want %+v", rep, want)
	}
	for _, id := range []string{child, grandchild} {
		if c := h.listed[id].corrupt; !errors.Is(c, agentload.ErrUnopened) || !strings.HasPrefix(c.Error(), "its parent ") {
			t.Errorf("%s listed with %v, want its parent's unopened log", short(id), c)
		}
	}
	if c := h.listed[refused].corrupt; c == nil || c.Error() != "cannot rebuild its place in the tree: name taken" {
		t.Errorf("refused agent listed with %v", c)
	}
	for _, c := range h.calls {
		if strings.HasPrefix(c, "Forget") || strings.HasPrefix(c, "Snapshot") || c == "AddToTree a2" || c == "AddToTree a3" {
			t.Errorf("unexpected %q", c)
		}
	}
}

// TestRestore: tokens are reinstalled as the log left them; an open run
// is marked interrupted only when the host says a previous start ran it
// and the mark is durable.
func TestRestore(t *testing.T) {
	deadline := t0.Add(time.Hour)
	for _, tc := range []struct {
		name        string
		run         *projection.Run
		last        *projection.Resume
		restart     bool
		appendErr   error
		tokens      []token.Token
		interrupted int
		asked       bool // NeedsRestartMark was asked
	}{
		{name: "no run"},
		{name: "ended run", run: &projection.Run{RunID: "r1", Ended: true}, restart: true},
		{name: "consumed token", last: &projection.Resume{TokenID: "t1", RunID: "r0", SecretHash: "h", Response: "yes"},
			tokens: []token.Token{{ID: "t1", AgentID: root, RunID: "r0", SecretHash: "h", State: token.Consumed, Response: "yes"}}},
		{name: "live wait", restart: true,
			run:    &projection.Run{RunID: "r1", Wait: &projection.Wait{TokenID: "t2", SecretHash: "h2", Deadline: deadline, TokenState: string(schema.TokLive)}},
			tokens: []token.Token{{ID: "t2", AgentID: root, RunID: "r1", SecretHash: "h2", Deadline: deadline, State: token.Live}}},
		{name: "open run of this start", run: &projection.Run{RunID: "r1"}, asked: true},
		{name: "open run of a previous start", run: &projection.Run{RunID: "r1"}, restart: true, asked: true, interrupted: 1},
		{name: "mark not durable", run: &projection.Run{RunID: "r1"}, restart: true, asked: true, appendErr: syscall.ENOSPC},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newFakeHost()
			r, fsys := newRun(h)
			l := h.agent(root, created(root, "", 0))
			l.State.Run, l.State.LastResume = tc.run, tc.last
			l.Log.(*fakeLog).appendErr = tc.appendErr
			h.restart[root] = tc.restart
			temp := dir(root) + "/session.json.tmp-0123abcd"
			writeFile(t, fsys, temp)
			var rep Report
			r.restore(l, &rep)
			if rep.Interrupted != tc.interrupted {
				t.Errorf("interrupted %d, want %d", rep.Interrupted, tc.interrupted)
			}
			if !reflect.DeepEqual(h.tokens, tc.tokens) {
				t.Errorf("tokens %+v, want %+v", h.tokens, tc.tokens)
			}
			asked := false
			for _, c := range h.calls {
				asked = asked || c == "NeedsRestartMark a1 boot2"
			}
			if asked != tc.asked {
				t.Errorf("NeedsRestartMark asked: %v, want %v", asked, tc.asked)
			}
			if ev := l.Log.(*fakeLog).events; len(ev) != tc.interrupted {
				t.Errorf("appended %v", ev)
			}
			if h.calls[0] != "Snapshot a1" {
				t.Errorf("first call %q, want the snapshot", h.calls[0])
			}
			if ok, _ := faultfs.Exists(fsys, temp); ok {
				t.Error("a stale temporary file is left")
			}
		})
	}
}

// TestTakeoverRestoresBeforePlacing: a takeover scan claims what no
// daemon holds, leaves an agent the cluster did not serve to the next
// scan, and marks runs before an agent is placed (where a turn could
// start).
func TestTakeoverRestoresBeforePlacing(t *testing.T) {
	h := newFakeHost()
	r, _ := newRun(h)
	r.Clustered = true
	h.known[root] = true
	h.listed[root] = &fakeAgent{h: h, id: root}
	h.agent(child, created(child, root, 0))
	h.loads[damaged] = &Agent[*fakeAgent]{ID: damaged, State: projection.New(), Err: fmt.Errorf("reading: %w", store.ErrUnavailable)}
	h.storeIDs = []string{root, child, damaged, away}
	h.elsewhere[away] = true
	h.pending[child] = 1

	rep, err := r.Takeover()
	if err != nil {
		t.Fatal(err)
	}
	checkCalls(t, h, []string{
		"Stopping", "StoreAgents", "Claimable a1,a2,d1,f1", "Load a2,d1 retry=false",
		"DropLease d1", // the next scan takes it
		"Snapshot a2", "LoadSnapshot a2", "Parents", "AddToTree a2", "List a2",
		"AdoptTaken a2", "Arm a2", "FinishCutSpawns a2", "Prune a2", "BootstrapUnstarted a2", "Wake a2", "Changed",
	})
	if want := (Report{Agents: 1, Pending: 1}); rep != want {
		t.Errorf("report %+v, want %+v", rep, want)
	}
	if want := (placement.Existing{root: true, child: true, damaged: true, away: true}); !reflect.DeepEqual(h.existing, want) {
		t.Errorf("existing %v, want every id of the store %v", h.existing, want)
	}
}

// TestTakeoverDoesNothing: on the local store, once stopping, and when
// the store holds nothing the engine does not know, a scan claims
// nothing.
func TestTakeoverDoesNothing(t *testing.T) {
	h := newFakeHost()
	r, _ := newRun(h)
	if _, err := r.Takeover(); err != nil {
		t.Fatal(err)
	}
	checkCalls(t, h, nil)

	r.Clustered, h.stopping = true, true
	if _, err := r.Takeover(); err != nil {
		t.Fatal(err)
	}
	checkCalls(t, h, []string{"Stopping"})

	h.calls, h.stopping = nil, false
	h.storeIDs = []string{root}
	h.known[root] = true
	if _, err := r.Takeover(); err != nil {
		t.Fatal(err)
	}
	checkCalls(t, h, []string{"Stopping", "StoreAgents"})
}

// TestTakeoverScanEvery: on a cluster store the scan is armed Every after
// the recovery and again Every after each scan ends, even a failed one.
func TestTakeoverScanEvery(t *testing.T) {
	h := newFakeHost()
	r, _ := newRun(h)
	r.startTakeover()
	if len(h.armed) != 0 {
		t.Fatal("armed on the local store")
	}
	now := t0
	r.Now = func() time.Time { return now }
	r.Clustered = true
	r.startTakeover()
	now = t0.Add(time.Second)
	h.scanErr = errors.New("no quorum")
	h.next()
	now = t0.Add(2 * time.Second)
	h.next()
	want := []time.Time{t0.Add(r.Every), t0.Add(time.Second + r.Every), t0.Add(2*time.Second + r.Every)}
	if !reflect.DeepEqual(h.armed, want) {
		t.Errorf("armed at %v, want %v", h.armed, want)
	}
	checkCalls(t, h, []string{"ArmTakeover", "Scan", "ArmTakeover", "Scan", "ArmTakeover"})
}

// TestScrub: the scrub first reads every placed agent's session.json (with
// checkpoints or without), then checks only the logs a checkpoint let
// recovery skip; a damaged prefix lists the agent corrupt and removes its
// checkpoint; a read failure is only logged; it stops with the engine.
func TestScrub(t *testing.T) {
	resumed := func(h *fakeHost, id string, verify error) *Agent[*fakeAgent] {
		l := h.agent(id, created(id, "", 0))
		l.Resumed = &eventlog.Resume{Seq: 9}
		l.Log.(*fakeLog).verify = verify
		return l
	}
	damage := &eventlog.CorruptError{Path: "events.jsonl", Line: 4, Seq: 4}

	h := newFakeHost()
	r, _ := newRun(h)
	bad := resumed(h, root, damage)
	unread := resumed(h, child, syscall.EIO)
	folded := h.agent(gone, created(gone, "", 0))
	folded.Log.(*fakeLog).verify = damage // not resumed: not checked
	r.startScrub([]*Agent[*fakeAgent]{bad, unread, folded})
	checkCalls(t, h, []string{"Background", "Stopping", "LoadSnapshot a1", "Stopping", "LoadSnapshot a2", "Stopping", "LoadSnapshot b1",
		"CheckpointAll", "Stopping", "MarkCorrupt a1", "RemoveCheckpoint a1", "Changed", "Stopping", "Scrubbed"})
	if !errors.Is(bad.Agent.corrupt, eventlog.ErrCorrupt) || unread.Agent.corrupt != nil || folded.Agent.corrupt != nil {
		t.Errorf("corrupt: %v, %v, %v", bad.Agent.corrupt, unread.Agent.corrupt, folded.Agent.corrupt)
	}

	h.calls, h.stopping = nil, true
	r.startScrub([]*Agent[*fakeAgent]{bad})
	checkCalls(t, h, []string{"Background", "Stopping", "Scrubbed"})

	// Without checkpoints, the scrub only reads the session.json files.
	h.calls, h.stopping, r.Checkpoints = nil, false, false
	r.startScrub([]*Agent[*fakeAgent]{bad, unread})
	checkCalls(t, h, []string{"Background", "Stopping", "LoadSnapshot a1", "Stopping", "LoadSnapshot a2", "Scrubbed"})

	h.calls, h.noBack = nil, true
	r.startScrub([]*Agent[*fakeAgent]{bad})
	checkCalls(t, h, []string{"Background", "Scrubbed"})
}
