package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/quarantine"
	"github.com/warren-dev/warren/schema"
)

// The steps of a recovery (recovery.go, takeover.go), ported from the tests
// of engine/internal/recoverrun, which drove them through a recording fake
// host. Here they run on the real engine: a harness's Core on its crashable
// in-memory files, or a Core that has not recovered (stepCore) on which a
// test runs one step. Where the old tests checked the order of the host's
// calls, these check what the steps leave: the report, agent.list, the
// tree, the logs, the tokens, the quarantine, the checkpoints.

// down kills the daemon as crash does (the filesystem crashes with mode,
// the core is abandoned) without starting another: the test changes the
// files, then starts one (h.start, or a stepCore).
func (h *harness) down(mode faultfs.RebootMode) {
	h.t.Helper()
	h.fs.Crash()
	h.c.Abandon()
	h.fs.Reboot(faultfs.RebootOptions{Mode: mode})
}

// stepCore returns a Core on h's files that has not recovered: a test runs
// recovery's steps on it one at a time, or Recover with options of its own.
// What o leaves zero is the harness's (provider, config, clock, sleep,
// store, checkpoints, NoWake). It is closed when the test ends.
func (h *harness) stepCore(o CoreOptions) *Core {
	h.t.Helper()
	var fsys faultfs.FS = h.fs
	if h.wrapFS != nil {
		fsys = h.wrapFS(h.fs)
	}
	o.FS, o.Home = fsys, "/home"
	if o.Providers == nil {
		o.Providers = map[string]provider.Provider{"inproc": h.prov}
	}
	if o.DefaultModel == "" {
		o.DefaultModel = "echo"
	}
	if o.Config.Pools == nil {
		o.Config = h.cfg
	}
	o.NoWake = o.NoWake || h.noWake
	if o.Logger == nil {
		o.Logger = hclog.NewNullLogger()
	}
	if o.Sleep == nil {
		o.Sleep = h.sleep()
	}
	if o.Jitter == nil {
		o.Jitter = func() float64 { return 0.5 }
	}
	if o.Clock == nil && h.clock != nil {
		o.Clock = h.clock
	}
	if o.Store == nil && h.store != nil {
		o.Store = h.store(fsys)
	}
	if o.CheckpointEvery == 0 {
		o.CheckpointEvery = h.ckptEvery
	}
	if o.SessionSaveDelay == 0 {
		o.SessionSaveDelay = h.saveDelay
	}
	c, err := NewCore(context.Background(), withDefaults(o))
	if err != nil {
		h.t.Fatalf("NewCore: %v", err)
	}
	h.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	return c
}

// viewOf is agent id's line of agent.list (false: not listed).
func viewOf(c *Core, id string) (AgentView, bool) {
	for _, v := range c.List() {
		if v.ID == id {
			return v, true
		}
	}
	return AgentView{}, false
}

// orphanID and unknownID name directories that no agent.created names
// (32 hex characters, as agent ids are).
var (
	orphanID  = strings.Repeat("e1", 16)
	unknownID = strings.Repeat("e2", 16)
)

// TestRecoverStepsInOrder: a recovery of a home holding every kind of agent
// directory settles each kind as it should, and reports it: a resumed root
// with messages pending and subscriptions, a child whose open run a kill
// cut (marked interrupted once), a damaged log without a name (listed
// corrupt under its id), a terminated agent whose notice a crash kept back
// (delivered), an empty directory (removed), a directory without
// agent.created that holds files (quarantined), and a child whose parent
// is gone (terminated). On a cluster store, the agents another daemon
// holds are left to it and the spawns that created them are not redone.
func TestRecoverStepsInOrder(t *testing.T) {
	t.Run("local store", func(t *testing.T) {
		h := newHarness(t, withFakeClock, func(h *harness) { h.noWake = true })
		<-h.c.scrubbed // the first start's scrub writes no checkpoint of the agents below
		started := make(chan *inproc.Turn, 1)
		h.prov.Register("hold", inproc.Signal(started, inproc.Block(make(chan struct{}), inproc.Echo)))
		root := h.create("root", "", "echo")
		child := h.create("child", root, "hold")
		damaged := h.create("damaged", root, "echo")
		gone := h.create("gone", root, "echo")
		lost := h.create("lost", "", "echo")
		lostKid := h.create("lostkid", lost, "echo")
		h.send(damaged, "one")
		h.tool(root, "subscribe", map[string]any{"agent_name": "child", "transition": "busy->idle"})
		h.tool(root, "subscribe", map[string]any{"agent_name": "damaged", "transition": "idle->busy"})
		goneSub := h.tool(root, "subscribe", map[string]any{"agent_name": "gone", "transition": "*->terminated"})["subscription_id"].(string)
		for i := range 2 {
			h.tool(child, "send_message", map[string]any{"recipient": "root", "text": fmt.Sprint("m", i)})
		}
		ra := mustAgent(t, h.c, root)
		h.c.ckpts.Write(ra, 1)
		if ra.Ckpt.Seq.Load() == 0 {
			t.Fatal("no checkpoint written for the root")
		}
		if err := h.c.Terminate(context.Background(), gone); err != nil {
			t.Fatal(err)
		}
		go func() { _, _ = h.c.Send(context.Background(), child, "work", "", "", nil) }()
		<-started
		h.down(faultfs.ProcessCrash)

		// The crash came before gone's notice reached root's log: cut it
		// (root's last line) and what follows, and the pending file (the
		// log's write-ahead copy of its last write) with it.
		path := h.c.logPath(root)
		lines := bytes.SplitAfter(h.read(path), []byte("\n"))
		cut := -1
		for i, l := range lines {
			if bytes.Contains(l, []byte(schema.MessageEnqueued)) && bytes.Contains(l, []byte(goneSub)) {
				cut = i
				break
			}
		}
		if cut < 0 {
			t.Fatalf("no notice of gone's termination in root's log")
		}
		h.rewrite(path, bytes.Join(lines[:cut], nil))
		if err := h.fs.Remove(filepath.Join(h.c.agentDir(root), "events.pending")); err != nil {
			t.Fatal(err)
		}
		// damaged's first line (its agent.created) damaged: no name.
		dpath := h.c.logPath(damaged)
		data := h.read(dpath)
		h.rewrite(dpath, flip(data, bytes.Index(data, []byte(`"damaged"`))+2, 1))
		// lost's directory is gone (a hand-deleted directory).
		ents, _ := h.fs.ReadDir(h.c.agentDir(lost))
		for _, e := range ents {
			if err := h.fs.Remove(filepath.Join(h.c.agentDir(lost), e.Name())); err != nil {
				t.Fatal(err)
			}
		}
		if err := h.fs.Remove(h.c.agentDir(lost)); err != nil {
			t.Fatal(err)
		}
		// An empty directory, and one with files but no agent.created.
		if err := h.fs.MkdirAll("/home/agents/"+orphanID, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := h.fs.MkdirAll("/home/agents/"+unknownID, 0o700); err != nil {
			t.Fatal(err)
		}
		h.rewrite("/home/agents/"+unknownID+"/events.jsonl", []byte("x"))
		h.rewrite("/home/agents/"+unknownID+"/session.json", []byte("{}"))

		var logs logBuffer
		c := h.stepCore(CoreOptions{Logger: hclog.New(&hclog.LoggerOptions{Output: &logs, Level: hclog.Info})})
		rep, err := c.Recover(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		h.c, h.report = c, rep

		want := RecoveryReport{Agents: 2, Terminated: 1, Orphans: 1, Corrupt: 2, Interrupted: 1, Pending: 3, Quarantined: 1, Resumed: 1}
		if rep != want {
			t.Errorf("report %+v, want %+v", rep, want)
		}
		if line := "recovery finished: agents=2 terminated=1 orphans=1 corrupt=2 quarantined=1 interrupted=1 pending=3 from_checkpoints=1"; !strings.Contains(logs.String(), line) {
			t.Errorf("log lacks %q:\n%s", line, logs.String())
		}
		if c.agents.WakesHeld() {
			t.Error("wakes are still held after the recovery")
		}
		// The tree: root and child placed; damaged listed corrupt under its
		// id; gone remembered as terminated, not listed; lostkid, whose
		// parent's directory is gone, kept and listed with the reason
		// (SPEC 9: nothing is terminated because of damage).
		if p := c.tree.Children(root); len(p) != 1 || p[0] != child {
			t.Errorf("root's children in the tree %v, want [child]", p)
		}
		if v, ok := viewOf(c, damaged); !ok || v.Status != "corrupt" || v.Name != damaged {
			t.Errorf("damaged listed as %+v (%v), want corrupt under its id", v, ok)
		}
		if v, ok := viewOf(c, lostKid); !ok || v.Status != "corrupt" || !strings.Contains(v.Error, "nothing is terminated") {
			t.Errorf("lostkid listed as %+v (%v), want kept, corrupt, with its parent's reason", v, ok)
		}
		for _, id := range []string{gone} {
			if _, ok := c.agent(id); ok || !c.agents.Known(id) {
				t.Errorf("terminated agent %s: listed %v, known %v; want known as terminated, not listed", id, ok, c.agents.Known(id))
			}
		}
		if n := h.count(child, schema.RunInterrupted); n != 1 {
			t.Errorf("child's log holds %d run.interrupted, want 1", n)
		}
		if s := h.statusOf(child); s != "interrupted_startup" {
			t.Errorf("child's status %s, want interrupted_startup", s)
		}
		if n := h.count(lostKid, schema.AgentTerminated); n != 0 {
			t.Errorf("the child of a missing parent got %d agent.terminated, want none", n)
		}
		// The placed and the kept agents' logs (and the USER inbox's) stay
		// open: those of gone and of the uncreated directory are closed.
		if n := c.OpenLogs(); n != 4 {
			t.Errorf("%d logs hold handles, want 4 (root, child, lostkid, USER)", n)
		}
		// Subscriptions to live agents are indexed, not those to an agent
		// listed corrupt.
		if w := c.agents.Watchers(child); len(w) != 1 || w[0].Subscriber != root {
			t.Errorf("watchers of child %+v, want root's subscription", w)
		}
		if w := c.agents.Watchers(damaged); len(w) != 0 {
			t.Errorf("watchers of the corrupt agent %+v, want none", w)
		}
		// The notice gone's termination owed root is delivered again.
		notices := func() int {
			n := 0
			for _, e := range h.entries(root) {
				if e.Event == schema.MessageEnqueued && bytes.Contains(e.Data, []byte(goneSub)) {
					n++
				}
			}
			return n
		}
		if n := notices(); n != 1 {
			t.Errorf("root's log holds %d notices of gone's termination, want 1", n)
		}
		if n := pendingLen(mustAgent(t, c, root)); n != 3 {
			t.Errorf("root has %d messages pending, want 3 (two messages and the notice)", n)
		}
		// The directories: the orphan removed, the unknown one quarantined.
		if ok, _ := faultfs.Exists(h.fs, "/home/agents/"+orphanID); ok {
			t.Error("the empty directory is still in agents/")
		}
		if ok, _ := faultfs.Exists(h.fs, "/home/agents/"+unknownID); ok {
			t.Error("the unknown directory is still in agents/")
		}
		q := filepath.Join("/home", quarantine.Dir, unknownID+"-"+quarantine.Stamp(clockStart))
		if st := dirState(t, h.fs, q); st["session.json"] != "{}" {
			t.Errorf("quarantined %s holds %q, want the directory's files", q, st)
		}
		if c.Quarantined() != 1 || c.agents.QuarantinedAs(unknownID) != q {
			t.Errorf("quarantine index: %d, %q; want 1, %s", c.Quarantined(), c.agents.QuarantinedAs(unknownID), q)
		}
		<-c.scrubbed

		// A restart changes nothing of it.
		h.restart()
		if n := h.count(child, schema.RunInterrupted); n != 1 {
			t.Errorf("after a restart child's log holds %d run.interrupted, want 1", n)
		}
		if n := h.count(lostKid, schema.AgentTerminated); n != 0 {
			t.Errorf("after a restart the child of a missing parent holds %d agent.terminated, want none", n)
		}
		if n := notices(); n != 1 {
			t.Errorf("after a restart root's log holds %d notices of gone's termination, want 1", n)
		}
	})

	t.Run("cluster store", func(t *testing.T) {
		lt := newLeaseTeam(t)
		lt.owned = map[string]bool{lt.lead: true, lt.helper: true}
		lt.h.down(faultfs.PowerLoss)
		lt.h.start()
		h, st := lt.h, lt.st
		if want := (RecoveryReport{Agents: 2}); h.report != want {
			t.Errorf("report %+v, want %+v (boss and other)", h.report, want)
		}
		for _, id := range []string{lt.lead, lt.helper} {
			if _, ok := h.c.agent(id); ok {
				t.Errorf("%s, held by another daemon, is listed", id)
			}
			if n := st.opensOf(id); n != 0 {
				t.Errorf("%s, held by another daemon, was opened %d times", id, n)
			}
		}
		// boss's spawn of lead is not redone: lead exists (another daemon
		// runs it), so nothing claims it again after the claim refused.
		if n := st.ownsOf(lt.lead); n != 1 {
			t.Errorf("lead was claimed %d times, want once (boss's spawn of it must not be redone)", n)
		}
		if n := h.count(lt.lead, schema.AgentCreated); n != 1 {
			t.Errorf("lead's log holds %d agent.created, want 1", n)
		}
	})
}

// TestRecoverFailsBeforeAgents: a failure to prepare the home or to open
// the operator's inbox (other than damage, which is isolated) ends the
// recovery with that error before any agent
// is read, with wakes let go again.
func TestRecoverFailsBeforeAgents(t *testing.T) {
	t.Run("prepare", func(t *testing.T) {
		h := newHarness(t, func(h *harness) { h.noWake = true })
		id := h.create("a", "", "echo")
		h.stop()
		user := h.read("/home/user.jsonl")
		h.fs.Inject(faultfs.Rule{Kind: faultfs.OpSyncDir, Path: "/home", Err: syscall.EIO})
		c := h.stepCore(CoreOptions{})
		_, err := c.Recover(context.Background())
		if !errors.Is(err, syscall.EIO) || !strings.Contains(err.Error(), "syncing /home") {
			t.Fatalf("Recover = %v, want the failed sync of the home", err)
		}
		if _, ok := c.agent(id); ok || c.user != nil {
			t.Fatalf("after a failed preparation: agent listed %v, USER inbox opened %v; want neither", ok, c.user != nil)
		}
		if got := h.read("/home/user.jsonl"); !bytes.Equal(got, user) {
			t.Fatal("the USER inbox's log changed")
		}
		if c.agents.WakesHeld() {
			t.Fatal("wakes are held after the failed recovery")
		}
	})
	t.Run("inbox", func(t *testing.T) {
		h := newHarness(t, func(h *harness) { h.noWake = true })
		id := h.create("a", "", "echo")
		h.tool(id, "send_message", map[string]any{"recipient": "USER", "text": "hi"})
		h.stop()
		// An I/O error opening the inbox (damage is isolated instead:
		// TestDamagedUserInboxIsIsolated) ends the recovery.
		h.fs.Inject(faultfs.Rule{Kind: faultfs.OpRead, Path: "/home/user.jsonl", Err: syscall.EIO, Sticky: true})
		c := h.stepCore(CoreOptions{})
		_, err := c.Recover(context.Background())
		h.fs.ClearRules()
		if !errors.Is(err, syscall.EIO) {
			t.Fatalf("Recover = %v, want the USER inbox's read error", err)
		}
		if _, ok := c.agent(id); ok {
			t.Fatal("an agent was read after the USER inbox failed to open")
		}
		if c.agents.WakesHeld() {
			t.Fatal("wakes are still held after the failed recovery")
		}
	})
}
