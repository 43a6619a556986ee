package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/schema"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// rewrite replaces a file's content durably on the in-memory filesystem.
func (h *harness) rewrite(path string, data []byte) {
	h.t.Helper()
	f, err := h.fs.OpenFile(path, os.O_WRONLY|os.O_TRUNC|os.O_CREATE, 0o600)
	if err != nil {
		h.t.Fatal(err)
	}
	if _, err := f.Write(data); err != nil {
		h.t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		h.t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		h.t.Fatal(err)
	}
}

func (h *harness) read(path string) []byte {
	h.t.Helper()
	b, err := faultfs.ReadFile(h.fs, path)
	if err != nil {
		h.t.Fatal(err)
	}
	return b
}

// stopped closes the core so files can be edited as if the daemon were down.
func (h *harness) stop() {
	h.t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := h.c.Close(ctx); err != nil {
		h.t.Fatal(err)
	}
}

func TestCorruptLogIsListedAndOthersServe(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.noWake = true })
	bad := h.create("bad", "", "echo")
	good := h.create("good", "", "echo")
	h.send(bad, "one")
	h.send(bad, "two")
	h.stop()
	path := h.c.logPath(bad)
	data := h.read(path)
	lines := bytes.SplitAfter(data, []byte("\n"))
	lines[2] = bytes.Replace(lines[2], []byte(`"turn"`), []byte(`"tUrn"`), 1) // a middle line, CRC now wrong
	h.rewrite(path, bytes.Join(lines, nil))
	h.start()
	// The damage is before the checkpoint Close wrote: the scrub after
	// recovery finds it.
	<-h.c.scrubbed
	var badView AgentView
	for _, v := range h.c.List() {
		if v.ID == bad {
			badView = v
		}
	}
	if badView.Status != "corrupt" || !strings.Contains(badView.Error, "warren repair") || badView.Name != "bad" {
		t.Fatalf("corrupt agent view = %+v", badView)
	}
	if res := h.send(good, "hi"); res.Response != "echo: hi" {
		t.Fatalf("the healthy agent must serve: %+v", res)
	}
	if _, err := h.c.Send(context.Background(), bad, "x", "", "", nil); err == nil || !strings.Contains(err.Error(), "repair") {
		t.Fatalf("a turn on the corrupt agent: %v", err)
	}
}

func TestOrphanDirectoryIsRemoved(t *testing.T) {
	h := newHarness(t)
	h.stop()
	orphan := "/home/agents/" + strings.Repeat("ab", 16)
	if err := h.fs.MkdirAll(orphan, 0o700); err != nil {
		t.Fatal(err)
	}
	h.rewrite(orphan+"/events.jsonl", nil)
	h.start()
	if ok, _ := faultfs.Exists(h.fs, orphan); ok {
		t.Fatalf("the orphan directory (no agent.created) was not cleaned up")
	}
	if len(h.c.List()) != 0 {
		t.Fatalf("an orphan became an agent")
	}
}

// A child whose parent's directory vanished (hand-deleted, say) is kept
// and listed with the reason, never terminated: only a parent's logged
// termination ends its children (SPEC 9, issue 31 D8; this test asserted
// the termination before the spec changed).
func TestChildOfMissingParentIsKept(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.noWake = true })
	root := h.create("root", "", "echo")
	kid := h.create("kid", root, "echo")
	h.stop()
	// The parent's log vanishes (say, a hand-deleted directory).
	dir := h.c.agentDir(root)
	entries, _ := h.fs.ReadDir(dir)
	for _, e := range entries {
		_ = h.fs.Remove(dir + "/" + e.Name())
	}
	_ = h.fs.Remove(dir)
	h.start()
	if s := h.statusOf(kid); s != "corrupt" {
		t.Fatalf("a child whose parent's directory is gone: status %s, want kept and listed corrupt with the reason", s)
	}
	if n := h.count(kid, "agent.terminated"); n != 0 {
		t.Fatalf("agent.terminated logged %d times for a child whose parent is missing, want 0", n)
	}
	h.restart()
	if n := h.count(kid, "agent.terminated"); n != 0 {
		t.Fatalf("recovery must not terminate it on a later start either: agent.terminated logged %d times", n)
	}
}

func TestPendingMessagesKeepOrderAndUserInboxSurvives(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.noWake = true })
	root := h.create("root", "", "echo")
	kid := h.create("kid", root, "echo")
	var want []string
	for i := 0; i < 5; i++ {
		r := h.tool(root, "send_message", map[string]any{"recipient": "kid", "text": fmt.Sprint("m", i)})
		want = append(want, r["message_id"].(string))
	}
	h.tool(root, "send_message", map[string]any{"recipient": "USER", "text": "for the operator"})
	h.crash(faultfs.PowerLoss)
	k, _ := h.c.agent(kid)
	var got []string
	for _, m := range pendingOf(k) {
		got = append(got, m.ID)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("pending after crash %v, want %v in the same order", got, want)
	}
	msgs, err := h.c.DrainUserInbox(context.Background())
	if err != nil || len(msgs) != 1 || msgs[0].Text != "for the operator" || msgs[0].From != "root" {
		t.Fatalf("USER inbox after crash = %v, %v", msgs, err)
	}
	h.crash(faultfs.PowerLoss)
	if n := len(h.c.UserPending(context.Background())); n != 0 {
		t.Fatalf("a drained USER message came back: %d", n)
	}
}

func TestMessageOnlyInSendersLogIsDelivered(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.noWake = true })
	root := h.create("root", "", "echo")
	kid := h.create("kid", root, "echo")
	r := h.tool(kid, "send_message", map[string]any{"recipient": "root", "text": "the reply"})
	id := r["message_id"].(string)
	h.stop()
	// Cut the recipient's log back to before the enqueue: the reply is only
	// in the sender's tool.call.
	path := h.c.logPath(root)
	lines := bytes.SplitAfter(h.read(path), []byte("\n"))
	var keep [][]byte
	for _, l := range lines {
		if bytes.Contains(l, []byte(id)) {
			break // the crash happened before this write
		}
		keep = append(keep, l)
	}
	h.rewrite(path, bytes.Join(keep, nil))
	h.start()
	a, _ := h.c.agent(root)
	if !look(a, func(p *projection, _ liveFlags) bool { return p.Pending.Has(id) }) {
		t.Fatalf("the reply recorded by its sender was not delivered to the recipient")
	}
	h.restart()
	if n := h.count(root, "message.enqueued"); n != 1 {
		t.Fatalf("message.enqueued in the recipient = %d, want exactly 1", n)
	}
}

func TestSessionJSONIsRebuiltWhenMissing(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.noWake = true })
	id := h.create("lead", "", "echo")
	h.send(id, "a")
	h.stop()
	if err := h.fs.Remove(h.c.snapshotPath(id)); err != nil {
		t.Fatal(err)
	}
	h.start()
	if res := h.send(id, "b"); res.Response != "echo: b" {
		t.Fatalf("after losing session.json: %+v", res)
	}
	if ok, _ := faultfs.Exists(h.fs, h.c.snapshotPath(id)); !ok {
		t.Fatalf("session.json was not rebuilt")
	}
}

// Recovery leaves session.json unread (10,000 of them cost about a second
// from a cold cache): restoring an agent only gives it a loader, and the
// file is read, and repaired, at its first use or by the scrub after
// recovery, which reads every one left.
func TestSessionJSONIsReadAtFirstUseOrByTheScrub(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.noWake = true })
	a := h.create("a", "", "echo")
	b := h.create("b", "", "echo")
	h.stop()
	garbage := []byte("{not json")
	h.rewrite(h.c.snapshotPath(a), garbage)

	// The recovery step alone reads nothing: the file is as it was until
	// the loader runs.
	l := &loaded{ID: a, State: newProjection(), Agent: newAgent(a, nil, newProjection())}
	h.c.restore(l, &RecoveryReport{})
	if got := h.read(h.c.snapshotPath(a)); !bytes.Equal(got, garbage) {
		t.Fatalf("session.json changed before its first use: %q", got)
	}
	l.Agent.Snap.Load()
	if s := l.Agent.Snap.Get(); s == nil || s.ID != a {
		t.Fatalf("loaded snapshot %+v, want one rebuilt for %s", s, a)
	}
	kept := h.keptAside(a)
	if len(kept) != 1 || !bytes.Equal(kept[0], garbage) {
		t.Fatalf("kept aside %q, want the unreadable file", kept)
	}

	// A whole start: nothing looks at agent b, and the scrub still reads
	// (and repairs) its session.json.
	h.rewrite(h.c.snapshotPath(b), garbage)
	h.start()
	<-h.c.scrubbed
	if kept := h.keptAside(b); len(kept) != 1 || !bytes.Equal(kept[0], garbage) {
		t.Fatalf("after the scrub, b's kept aside %q, want the unreadable file", kept)
	}
	if got := h.read(h.c.snapshotPath(b)); bytes.Equal(got, garbage) {
		t.Fatal("b's session.json was not rebuilt by the scrub")
	}
}

// keptAside returns the contents of id's session.json files moved aside.
func (h *harness) keptAside(id string) [][]byte {
	h.t.Helper()
	dir := filepath.Dir(h.c.snapshotPath(id))
	ents, err := h.fs.ReadDir(dir)
	if err != nil {
		h.t.Fatal(err)
	}
	var out [][]byte
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), "session.json.corrupt-") {
			out = append(out, h.read(filepath.Join(dir, e.Name())))
		}
	}
	return out
}

// A child the operator creates owes no bootstrap turn, and no restart
// starts one for it (issue 31, D10: every restart ran one on each such
// child); a spawned child whose bootstrap a crash cut off still gets it.
func TestRestartStartsNoBootstrapForACreatedChild(t *testing.T) {
	h := newHarness(t)
	root := h.create("root", "", "echo")
	child := h.create("child", root, "echo")
	h.quiet()
	h.restart()
	h.quiet()
	h.crash(faultfs.ProcessCrash)
	h.quiet()
	if n := h.count(child, schema.TurnStart); n != 0 {
		t.Fatalf("the operator-created child ran %d turns after a restart and a crash; want none", n)
	}
	for _, e := range h.entries(child) {
		if e.Event == schema.AgentCreated && strings.Contains(string(e.Data), `"bootstrap"`) {
			t.Fatalf("agent.created of an operator-created child says it owes a bootstrap turn: %s", e.Data)
		}
	}
}

// A USER log damaged in the middle does not stop the daemon (issue 31,
// D7): every agent is served; the USER inbox refuses messages and drains
// with the cause and the repair; daemon status sees the damage.
func TestDamagedUserInboxIsIsolated(t *testing.T) {
	h := newHarness(t)
	h.prov.Register("tell", func(_ context.Context, tr *inproc.Turn) (string, error) {
		r, err := tr.Call("send_message", map[string]any{"recipient": "USER", "text": "done: " + tr.Prompt})
		if err != nil {
			return "", err
		}
		if e, ok := r["error"].(string); ok {
			return "refused: " + e, nil
		}
		return "sent", nil
	})
	root := h.create("root", "", "tell")
	if res := h.send(root, "one"); res.Response != "sent" {
		t.Fatalf("first send: %+v", res)
	}
	h.stop()
	path := "/home/user.jsonl"
	data := h.read(path)
	i := bytes.LastIndex(data[:len(data)-1], []byte("\n")) + 10 // inside the last line
	data[i] ^= 0x01
	h.rewrite(path, data)
	h.start()

	if err := h.c.UserInboxDegraded(); err == nil || !strings.Contains(err.Error(), "warren repair USER") {
		t.Fatalf("UserInboxDegraded = %v, want the damage and the repair", err)
	}
	if _, err := h.c.DrainUserInbox(context.Background()); !errors.Is(err, ErrWrongState) || !strings.Contains(err.Error(), "warren repair USER") {
		t.Fatalf("DrainUserInbox = %v, want a wrong-state error naming the repair", err)
	}
	res := h.send(root, "two")
	if !strings.HasPrefix(res.Response, "refused: ") || !strings.Contains(res.Response, "USER inbox") {
		t.Fatalf("a root's message to USER: %+v, want a tool error naming the USER inbox", res)
	}
	other := h.create("other", "", "echo")
	if res := h.send(other, "hi"); res.Response != "echo: hi" {
		t.Fatalf("an agent is not served normally beside a damaged USER inbox: %+v", res)
	}
}

// A symlinked agent directory is never followed (issue 31, D8): the agent
// is listed with the refusal, and its healthy children are kept, listed
// with the reason, never terminated, their logs untouched.
func TestSymlinkedAgentDirKeepsItsChildren(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.noWake = true })
	root := h.create("root", "", "echo")
	k1 := h.create("k1", root, "echo")
	k2 := h.create("k2", root, "echo")
	h.tool(root, "gate", map[string]any{"agent_name": "k2"})
	for i := range 3 {
		h.tool(root, "send_message", map[string]any{"recipient": "k2", "text": fmt.Sprint("m", i)})
	}
	h.stop()
	before := map[string][]byte{k1: h.read(h.c.logPath(k1)), k2: h.read(h.c.logPath(k2))}
	// Move root's directory out of the home and link it back.
	dir := h.c.agentDir(root)
	if err := h.fs.MkdirAll("/elsewhere", 0o700); err != nil {
		t.Fatal(err)
	}
	if err := h.fs.Rename(dir, "/elsewhere/"+root); err != nil {
		t.Fatal(err)
	}
	if err := h.fs.Symlink("/elsewhere/"+root, dir); err != nil {
		t.Fatal(err)
	}
	h.start()
	v, ok := viewOf(h.c, root)
	if !ok || v.Status != "corrupt" || !strings.Contains(v.Error, "symbolic link") {
		t.Fatalf("root listed as %+v (%v), want corrupt with the refusal", v, ok)
	}
	for _, id := range []string{k1, k2} {
		if s := h.statusOf(id); s != "corrupt" {
			t.Errorf("child %s: status %s, want kept and listed with the reason", id, s)
		}
		if n := h.count(id, schema.AgentTerminated); n != 0 {
			t.Errorf("child %s got %d agent.terminated because its parent's directory was refused", id, n)
		}
		if got := h.read(h.c.logPath(id)); !bytes.Equal(got, before[id]) {
			t.Errorf("child %s's log changed", id)
		}
	}
	if n := pendingLen(mustAgent(t, h.c, k2)); n != 3 {
		t.Errorf("k2 holds %d pending messages, want its 3", n)
	}
	// Once the directory is back, everything is served again.
	h.stop()
	if err := h.fs.Remove(dir); err != nil {
		t.Fatal(err)
	}
	if err := h.fs.Rename("/elsewhere/"+root, dir); err != nil {
		t.Fatal(err)
	}
	h.start()
	for _, id := range []string{root, k1, k2} {
		if s := h.statusOf(id); s != "idle" {
			t.Errorf("%s after the directory came back: %s, want idle", id, s)
		}
	}
}

// A parent whose log is damaged in the middle stays in the tree, listed
// corrupt, and its healthy children keep their paths and are served
// (issue 31, D15: they were listed corrupt, "parent is not in the tree").
func TestDamagedParentKeepsItsChildrenServed(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.noWake = true })
	root := h.create("root", "", "echo")
	kid := h.create("kid", root, "echo")
	h.send(root, "one")
	h.send(root, "two")
	h.stop()
	path := h.c.logPath(root)
	data := h.read(path)
	_ = h.fs.Remove(h.c.agentDir(root) + "/checkpoint.json")
	h.rewrite(path, flip(data, bytes.Index(data, []byte(`"one"`))+2, 1)) // a line in the middle
	h.start()
	if s := h.statusOf(root); s != "corrupt" {
		t.Fatalf("root: %s, want corrupt", s)
	}
	if id, err := h.c.Resolve("root/kid"); err != nil || id != kid {
		t.Fatalf("root/kid resolves to %q, %v; want the child by its path", id, err)
	}
	if res := h.send(kid, "hi"); res.Response != "echo: hi" {
		t.Fatalf("the healthy child is not served: %+v", res)
	}
}

// TestToolCallOnCorruptAgent: an operator's tool.call for an agent whose
// log could not be opened (its last line damaged) is an error that says
// so, never a panic (issue 37: a nil log in the call's logging).
func TestToolCallOnCorruptAgent(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.noWake = true })
	bad := h.create("bad", "", "echo")
	h.create("good", "", "echo")
	h.send(bad, "one")
	h.stop()
	path := h.c.logPath(bad)
	lines := bytes.SplitAfter(h.read(path), []byte("\n"))
	lines[2] = bytes.Replace(lines[2], []byte(`"turn"`), []byte(`"tUrn"`), 1) // a middle line, CRC now wrong
	h.rewrite(path, bytes.Join(lines, nil))
	// No checkpoint: recovery folds the log, fails, and the agent has no
	// open log at all.
	if err := h.fs.Remove(path[:strings.LastIndex(path, "/")] + "/checkpoint.json"); err != nil {
		t.Fatal(err)
	}
	h.start()
	<-h.c.scrubbed
	if s := h.statusOf(bad); s != "corrupt" {
		t.Fatalf("the damaged agent is %s, want corrupt", s)
	}
	for _, tool := range []string{"send_message", "list_agents"} {
		args := map[string]any{"recipient": "good", "text": "from a corrupt agent"}
		_, err := h.c.CallTool(context.Background(), bad, tool, args)
		if err == nil || !strings.Contains(err.Error(), "repair") {
			t.Fatalf("%s as the corrupt agent: %v, want an error naming the repair", tool, err)
		}
	}
}
