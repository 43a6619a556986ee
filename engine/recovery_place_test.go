package engine

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/quarantine"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/store"
	"github.com/warren-dev/warren/token"
	"github.com/warren-dev/warren/tree"
)

// Recovery's steps one at a time: settling logs no creation finished,
// placing what was read, restoring each agent.

// writeUncreatedLog writes, in directory id of agents/, a log of n
// entries none of which is agent.created (what no creation leaves: its
// first entry is agent.created).
func writeUncreatedLog(t *testing.T, fsys faultfs.FS, id string, n int) {
	t.Helper()
	lg, err := eventlog.Open(fsys, "/home/agents/"+id+"/events.jsonl", eventlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for i := range n {
		if _, err := lg.Append(schema.MetadataUpdated, map[string]any{"key": "k", "value": fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if err := lg.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestSettleUncreated: a directory without agent.created is removed only
// when it provably holds nothing acknowledged; otherwise it is
// quarantined, or listed corrupt where it is when it cannot be moved or is
// a cluster store's log. Its log is closed either way.
func TestSettleUncreated(t *testing.T) {
	stamp := quarantine.Stamp(clockStart)
	// mkOrphan makes directory orphanID in agents/.
	mkOrphan := func(t *testing.T, h *harness) string {
		if err := h.fs.MkdirAll("/home/agents/"+orphanID, 0o700); err != nil {
			t.Fatal(err)
		}
		return orphanID
	}
	for _, tc := range []struct {
		name    string
		cluster bool
		// setup makes the directory (the daemon is down) and returns its
		// id and that of a child its id is the parent of ("" for none).
		setup     func(t *testing.T, h *harness) (id, child string)
		want      RecoveryReport
		stays     bool   // the directory is still in agents/
		corrupted string // the start of the cause the directory is listed with
		childErr  string // the cause its child is listed with ({dir}: the directory's id)
	}{{
		name:  "empty directory: an orphan, removed",
		setup: func(t *testing.T, h *harness) (string, string) { return mkOrphan(t, h), "" },
		want:  RecoveryReport{Orphans: 1},
	}, {
		name: "empty events.jsonl alone: an orphan",
		setup: func(t *testing.T, h *harness) (string, string) {
			id := mkOrphan(t, h)
			h.rewrite("/home/agents/"+id+"/events.jsonl", nil)
			return id, ""
		},
		want: RecoveryReport{Orphans: 1},
	}, {
		name: "entries without agent.created: quarantined",
		setup: func(t *testing.T, h *harness) (string, string) {
			id := mkOrphan(t, h)
			writeUncreatedLog(t, h.fs, id, 3)
			return id, ""
		},
		want: RecoveryReport{Quarantined: 1},
	}, {
		name: "named as a parent: quarantined, its child listed",
		setup: func(t *testing.T, h *harness) (string, string) {
			// The parent's directory is emptied: nothing in it would make it
			// an orphan, but its child's agent.created names it.
			h.start()
			parent := h.create("parent", "", "echo")
			kid := h.create("kid", parent, "echo")
			h.stop()
			dir := h.c.agentDir(parent)
			ents, err := h.fs.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range ents {
				if err := h.fs.Remove(filepath.Join(dir, e.Name())); err != nil {
					t.Fatal(err)
				}
			}
			return parent, kid
		},
		want: RecoveryReport{Quarantined: 1, Corrupt: 1, Resumed: 1}, // the child, from its checkpoint
		childErr: "its parent {dir} is in quarantine (/home/quarantine/{dir}-" + stamp +
			"): restore that directory to /home/agents/{dir} and restart the daemon, or remove it",
	}, {
		name:    "cluster store: listed corrupt, nothing moved",
		cluster: true,
		setup: func(t *testing.T, h *harness) (string, string) {
			id := mkOrphan(t, h)
			writeUncreatedLog(t, h.fs, id, 3)
			return id, ""
		},
		want: RecoveryReport{Corrupt: 1}, stays: true,
		corrupted: "its log in the cluster store holds no agent.created (events.jsonl holds 3 entries but no agent.created); it is not quarantined (see `warren export`)",
	}, {
		name: "the move fails: listed corrupt where it is",
		setup: func(t *testing.T, h *harness) (string, string) {
			id := mkOrphan(t, h)
			h.rewrite("/home/agents/"+id+"/events.jsonl", nil)
			h.rewrite("/home/agents/"+id+"/session.json", []byte("{}"))
			h.fs.Inject(faultfs.Rule{Kind: faultfs.OpRename, Path: "/agents/" + id, Err: syscall.EIO})
			return id, ""
		},
		want: RecoveryReport{Corrupt: 1}, stays: true,
		corrupted: "/home/agents/" + orphanID + ": no agent.created in events.jsonl, but it holds [session.json]; moving it to /home/quarantine failed: ",
	}} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, withFakeClock, func(h *harness) {
				h.noWake = true
				if tc.cluster {
					h.store = func(fsys faultfs.FS) store.Store { return newLeaseStore(fsys, h.clock.Now, nil) }
				}
			})
			h.stop()
			id, child := tc.setup(t, h)
			dir := "/home/agents/" + id
			h.start()
			if h.report != tc.want {
				t.Errorf("report %+v, want %+v", h.report, tc.want)
			}
			if ok, _ := faultfs.Exists(h.fs, dir); ok != tc.stays {
				t.Errorf("directory in agents/: %v, want %v", ok, tc.stays)
			}
			v, listed := viewOf(h.c, id)
			if tc.corrupted == "" && listed {
				t.Errorf("the directory is listed: %+v", v)
			}
			if tc.corrupted != "" {
				var cause error
				if a, ok := h.c.agent(id); ok {
					cause = a.Corrupt()
				}
				if !listed || v.Status != "corrupt" || v.Name != id || cause == nil || !strings.HasPrefix(cause.Error(), tc.corrupted) {
					t.Errorf("listed %v as %+v (cause %v); want corrupt under its id with a cause starting %q", listed, v, cause, tc.corrupted)
				}
			}
			if tc.want.Quarantined == 1 {
				q := "/home/quarantine/" + id + "-" + stamp
				if ok, _ := faultfs.Exists(h.fs, q); !ok || h.c.Quarantined() != 1 {
					t.Errorf("%s exists: %v; quarantine count %d; want it there, counted", q, ok, h.c.Quarantined())
				}
			} else if ents, _ := h.fs.ReadDir("/home/" + quarantine.Dir); len(ents) != 0 {
				t.Errorf("the quarantine holds %v, want nothing", ents)
			}
			if child != "" {
				want := strings.ReplaceAll(tc.childErr, "{dir}", id)
				if a, ok := h.c.agent(child); !ok {
					t.Errorf("the child is not listed; want it listed with %q", want)
				} else if err := a.Corrupt(); err == nil || err.Error() != want {
					t.Errorf("the child is listed with %v, want %q", err, want)
				}
				if n := h.count(child, schema.AgentTerminated); n != 0 {
					t.Errorf("the child was terminated (%d agent.terminated)", n)
				}
			}
			// The uncreated directory's log was closed: only the USER
			// inbox's and a child's hold handles.
			want := 1
			if child != "" {
				want = 2
			}
			if n := h.c.OpenLogs(); n != want {
				t.Errorf("%d logs hold handles, want %d", n, want)
			}
		})
	}
}

// TestPlaceListsWhatItCannotPlace: children of a parent whose log could
// not be opened are listed with its cause (down the tree), and an agent the
// tree refuses (a root whose name another root has) is listed corrupt;
// none of them is terminated, placed in the tree or restored (b's open run
// is not marked).
func TestPlaceListsWhatItCannotPlace(t *testing.T) {
	var fo *failingOpens
	h := newHarness(t, withFakeClock, withFailingOpens(&fo))
	<-h.c.scrubbed // the first start's scrub writes no checkpoint of the agents below
	started := make(chan *inproc.Turn, 1)
	h.prov.Register("hold", inproc.Signal(started, inproc.Block(make(chan struct{}), inproc.Echo)))
	a := h.create("a", "", "echo")
	b := h.create("b", a, "hold")
	c := h.create("c", b, "echo")
	dup := h.create("dup", "", "echo")
	go func() { _, _ = h.c.Send(context.Background(), b, "work", "", "", nil) }()
	<-started
	h.down(faultfs.ProcessCrash)
	// A root named like dup, created after it (a directory put back by
	// hand): the tree refuses it.
	refused := strings.Repeat("f1", 16)
	lg, err := eventlog.Open(h.fs, "/home/agents/"+refused+"/events.jsonl", eventlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lg.Append(schema.AgentCreated, schema.AgentCreatedData{AgentID: refused, Name: "dup", Provider: "inproc",
		Model: "echo", Metadata: map[string]string{}, CreatedAt: clockStart.Add(time.Hour).Format(time.RFC3339Nano)}); err != nil {
		t.Fatal(err)
	}
	if err := lg.Close(); err != nil {
		t.Fatal(err)
	}
	fo = &failingOpens{suffix: a + "/events.jsonl", err: syscall.EMFILE, n: -1}
	h.start()

	if want := (RecoveryReport{Agents: 1, Corrupt: 4}); h.report != want {
		t.Errorf("report %+v, want %+v", h.report, want)
	}
	for id, parents := range map[string]string{b: "its parent " + a + ": ", c: "its parent " + b + ": its parent " + a + ": "} {
		cause := mustAgent(t, h.c, id).Corrupt()
		if !errors.Is(cause, errUnopened) || !errors.Is(cause, syscall.EMFILE) || !strings.HasPrefix(fmt.Sprint(cause), parents) {
			t.Errorf("%s listed with %v; want its parent's unopened log, starting %q", id, cause, parents)
		}
	}
	if cause := mustAgent(t, h.c, refused).Corrupt(); !errors.Is(cause, tree.ErrNameTaken) ||
		!strings.HasPrefix(fmt.Sprint(cause), "cannot rebuild its place in the tree: ") {
		t.Errorf("refused agent listed with %v", cause)
	}
	if !errors.Is(mustAgent(t, h.c, a).Corrupt(), errUnopened) {
		t.Errorf("a listed with %v, want its unopened log", mustAgent(t, h.c, a).Corrupt())
	}
	for _, id := range []string{a, b, c, refused} {
		if v, ok := viewOf(h.c, id); !ok || v.Status != "corrupt" {
			t.Errorf("%s listed %v as %+v, want corrupt", id, ok, v)
		}
		if h.c.tree.Has(id) {
			t.Errorf("%s is in the tree", id)
		}
	}
	for _, id := range []string{b, c, refused} {
		if n := h.count(id, schema.AgentTerminated); n != 0 {
			t.Errorf("%s was terminated", id)
		}
	}
	if n := h.count(b, schema.RunInterrupted); n != 0 {
		t.Errorf("b, not placed, was restored: %d run.interrupted", n)
	}
	if !h.c.tree.Has(dup) {
		t.Error("dup is not in the tree")
	}
}

// TestRestore: the restore step gives a placed agent its session.json
// (read at first use), removes stale temporary files, reinstalls its resume
// tokens as the log left them (resume works after the restart), and marks
// an open run interrupted only when an earlier start ran it and the mark
// is durable.
func TestRestore(t *testing.T) {
	// block holds a turn until the kill.
	block := func(h *harness, id string) {
		started := make(chan *inproc.Turn, 1)
		h.prov.Register("hold", inproc.Signal(started, inproc.Block(make(chan struct{}), inproc.Echo)))
		go func() { _, _ = h.c.Send(context.Background(), id, "work", "", "", nil) }()
		<-started
	}
	suspend := func(t *testing.T, h *harness, id string) TurnResult {
		h.prov.Register("hold", asker(3600))
		res := h.send(id, "ask")
		if res.Status != "suspended" || res.Token == "" {
			t.Fatalf("send: %+v, want a suspended run and its token", res)
		}
		return res
	}
	deadline := clockStart.Add(time.Hour)
	for _, tc := range []struct {
		name string
		// run runs agent id (model "hold") up to the kill and returns the
		// resume token its last wait handed out ("" for none).
		run         func(t *testing.T, h *harness, id string) string
		sameBoot    bool // the step runs under the killed daemon's boot id
		fault       bool // the agent's log refuses appends during the step
		tok         token.State
		interrupted int
	}{
		{name: "no run", run: func(*testing.T, *harness, string) string { return "" }},
		{name: "ended run", run: func(t *testing.T, h *harness, id string) string {
			h.prov.Register("hold", inproc.Echo)
			h.send(id, "one")
			return ""
		}},
		{name: "consumed token", tok: token.Consumed, run: func(t *testing.T, h *harness, id string) string {
			res := suspend(t, h, id)
			if r, err := h.c.Resume(context.Background(), id, res.Token, "yes"); err != nil || r.Response != "yes" {
				t.Fatalf("resume: %+v, %v", r, err)
			}
			return res.Token
		}},
		{name: "live wait", tok: token.Live, run: func(t *testing.T, h *harness, id string) string {
			return suspend(t, h, id).Token
		}},
		{name: "open run of this start", sameBoot: true, run: func(t *testing.T, h *harness, id string) string {
			block(h, id)
			return ""
		}},
		{name: "open run of a previous start", interrupted: 1, run: func(t *testing.T, h *harness, id string) string {
			block(h, id)
			return ""
		}},
		{name: "mark not durable", fault: true, run: func(t *testing.T, h *harness, id string) string {
			block(h, id)
			return ""
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, withFakeClock, func(h *harness) { h.noWake = true })
			<-h.c.scrubbed // the first start's scrub writes no checkpoint of the agent
			h.prov.Register("hold", inproc.Echo)
			id := h.create("a", "", "hold")
			presented := tc.run(t, h, id)
			boot := h.c.BootID()
			h.down(faultfs.ProcessCrash)
			temp := h.c.agentDir(id) + "/session.json.tmp-0123abcd"
			h.rewrite(temp, []byte("{"))

			o := CoreOptions{}
			if tc.sameBoot {
				o.BootID = boot
			}
			c := h.stepCore(o)
			l := c.load(context.Background(), id, nil)
			if l.Err != nil || l.Log == nil {
				t.Fatalf("load: %+v", l)
			}
			c.adopt(l)
			before := h.events(id)
			if tc.fault {
				h.fs.Inject(faultfs.Rule{Kind: faultfs.OpAny, Path: id + "/events.pending", Err: syscall.ENOSPC, Sticky: true})
				h.fs.Inject(faultfs.Rule{Kind: faultfs.OpAny, Path: id + "/events.jsonl", Err: syscall.ENOSPC, Sticky: true})
			}
			var rep RecoveryReport
			c.restore(l, &rep)
			h.fs.ClearRules()
			if rep.Interrupted != tc.interrupted {
				t.Errorf("interrupted %d, want %d", rep.Interrupted, tc.interrupted)
			}
			after := h.events(id)
			if n := len(after) - len(before); n != tc.interrupted || (n == 1 && after[len(after)-1] != schema.RunInterrupted) {
				t.Errorf("appended %v, want %d run.interrupted", after[len(before):], tc.interrupted)
			}
			// The tokens, as the log left them.
			if tc.tok == "" {
				if tk, ok := c.tokens.Live(id); ok {
					t.Errorf("a live token %+v was installed", tk)
				}
			} else {
				tid, _, err := token.Parse(presented)
				if err != nil {
					t.Fatal(err)
				}
				tk, ok := c.tokens.Get(tid)
				want := token.Token{ID: tid, AgentID: id, RunID: tk.RunID, SecretHash: tk.SecretHash, State: tc.tok}
				if tc.tok == token.Consumed {
					want.Response = "yes"
				} else {
					want.Deadline = deadline
				}
				if !ok || tk.RunID == "" || tk.SecretHash == "" || !tk.Deadline.Equal(want.Deadline) {
					t.Errorf("token %+v (%v), want %+v", tk, ok, want)
				}
				tk.Deadline = want.Deadline
				if tk != want {
					t.Errorf("token %+v, want %+v", tk, want)
				}
			}
			if ok, _ := faultfs.Exists(h.fs, temp); ok {
				t.Error("a stale temporary file is left")
			}
			if s := l.Agent.Snap.Get(); s == nil || s.ID != id {
				t.Errorf("the agent's snapshot %+v, want its session.json", s)
			}
			if err := l.Log.Close(); err != nil {
				t.Fatal(err)
			}
			if err := c.Close(context.Background()); err != nil {
				t.Fatal(err)
			}

			// A whole start (a new boot) on the same files.
			h.start()
			switch {
			case tc.tok == token.Live:
				if r, err := h.c.Resume(context.Background(), id, presented, "yes"); err != nil || r.Response != "yes" {
					t.Errorf("resume after the restart: %+v, %v", r, err)
				}
			case tc.tok == token.Consumed:
				if _, err := h.c.Resume(context.Background(), id, presented, "yes"); err != nil {
					t.Errorf("the same resume repeated after the restart: %v", err)
				}
				if _, err := h.c.Resume(context.Background(), id, presented, "no"); codeOf(err) != codeOf(ErrTokenRejected) {
					t.Errorf("another response with the consumed token after the restart: %v, want it rejected", err)
				}
			}
			// An open run is marked once, by the step or by this start.
			want := 0
			if tc.interrupted > 0 || tc.sameBoot || tc.fault {
				want = 1
			}
			if n := h.count(id, schema.RunInterrupted); n != want {
				t.Errorf("after a restart the log holds %d run.interrupted, want %d", n, want)
			}
		})
	}
}
