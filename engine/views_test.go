package engine

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/warren-dev/warren/checkpoint"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/store"
)

// The views (views.go: agent.list, agent.inspect, waits.list) of a real
// engine's agents: their order, paths and statuses, an agent's children
// and inbox page, the pending waits.

// approveThen is a program that waits for an approval (its deadline
// timeout seconds away), then answers "approved".
func approveThen(timeout int) inproc.Program {
	return func(ctx context.Context, tr *inproc.Turn) (string, error) {
		if _, err := tr.Call("await_input", map[string]any{"kind": "approval", "prompt": "deploy?", "timeout": timeout}); err != nil {
			return "", err
		}
		return "approved", nil
	}
}

// holding registers model on h's inproc provider: a turn on it signals
// started, then waits for release (or its context).
func holdingTurn(h *harness, model string) (started chan *inproc.Turn, release chan struct{}) {
	started, release = make(chan *inproc.Turn), make(chan struct{})
	h.prov.Register(model, inproc.Signal(started, inproc.Block(release, inproc.Echo)))
	return started, release
}

func TestListerListsInOrderWithPathsAndStatus(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.noWake = true })
	started, release := holdingTurn(h, "hold")
	h.prov.Register("approver", approveThen(3600))
	root := h.create("lead", "", "hold")
	solo := h.create("solo", "", "echo")
	kid := h.create("kid", root, "approver") // created after solo, listed before it
	if res := h.send(kid, "deploy"); res.Status != "suspended" {
		t.Fatalf("kid's turn = %+v, want suspended", res)
	}
	done := make(chan TurnResult, 1)
	go func() { done <- h.send(root, "work") }()
	<-started
	got := h.c.List()
	close(release)
	if res := <-done; res.Err != nil {
		t.Fatal(res.Err)
	}
	var ids, paths, statuses []string
	for _, v := range got {
		ids, paths, statuses = append(ids, v.ID), append(paths, v.Path), append(statuses, v.Status)
	}
	if want := []string{root, kid, solo}; !reflect.DeepEqual(ids, want) {
		t.Fatalf("List = %v, want lead, kid, solo (depth-first) %v", ids, want)
	}
	if want := []string{"lead", "lead/kid", "solo"}; !reflect.DeepEqual(paths, want) {
		t.Errorf("List: paths %v, want %v", paths, want)
	}
	if want := []string{"running", "suspended", "idle"}; !reflect.DeepEqual(statuses, want) {
		t.Errorf("List: statuses %v, want %v", statuses, want)
	}
}

func TestListerDetail(t *testing.T) {
	// A provider whose session creation waits: a child being created is
	// in the tree (its name reserved) but not loaded yet.
	creating, letCreate := make(chan struct{}), make(chan struct{})
	p := &sessProv{create: func() { close(creating); <-letCreate }}
	var st *probeStore
	h := fakeHarness(t, p, &st)
	h.prov.Register("approver", approveThen(3600))
	ctx := context.Background()
	root := h.create("lead", "", "echo")
	kid := h.create("kid", root, "approver")
	// Three messages from kid, each too large to stay resident: the
	// inspect reads their payloads back from the log.
	var texts []string
	for i := 1; i <= 3; i++ {
		text := fmt.Sprintf("m%d:%s", i, strings.Repeat("x", 2000))
		texts = append(texts, text)
		if r := h.tool(kid, "send_message", map[string]any{"recipient": "lead", "text": text}); r["status"] != "sent" {
			t.Fatalf("send_message = %v", r)
		}
	}
	if res := h.send(kid, "deploy"); res.Status != "suspended" {
		t.Fatalf("kid's turn = %+v, want suspended", res)
	}
	pending := h.pendingOf(root)
	if len(pending) != 3 || !pending[0].Spilled() {
		t.Fatalf("setup: lead has %d pending (first spilled %v), want kid's 3 large messages", len(pending), len(pending) > 0 && pending[0].Spilled())
	}
	created := make(chan error, 1)
	go func() {
		_, err := h.c.CreateAgent(ctx, CreateSpec{Name: "coming", ParentID: root, Provider: "fake", Model: "m"})
		created <- err
	}()
	<-creating
	st.mu.Lock()
	st.readSeqs = nil
	st.mu.Unlock()
	d, err := h.c.InspectPage(ctx, root, 0, 2)
	close(letCreate)
	if cerr := <-created; cerr != nil {
		t.Fatal(cerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	// "coming" is a child in the tree that is not loaded: left out.
	if want := []ChildView{{ID: kid, Name: "kid", Status: "suspended"}}; !reflect.DeepEqual(d.Children, want) {
		t.Errorf("Children = %+v, want %+v", d.Children, want)
	}
	es := h.entries(root)
	if !d.HasLog || d.LastSeq != es[len(es)-1].Seq || !d.HasMore || d.InboxNextSeq != pending[1].Ref.Seq {
		t.Errorf("HasLog %v LastSeq %d HasMore %v InboxNextSeq %d; want true %d true %d",
			d.HasLog, d.LastSeq, d.HasMore, d.InboxNextSeq, es[len(es)-1].Seq, pending[1].Ref.Seq)
	}
	if len(d.Inbox) != 2 || d.Inbox[0].From != "kid" || d.Inbox[0].Text != texts[0] || d.Inbox[1].MessageID != pending[1].ID ||
		d.Inbox[1].Text != texts[1] {
		var got []string
		for _, it := range d.Inbox {
			got = append(got, fmt.Sprintf("%s from %s (%d bytes)", it.MessageID, it.From, len(it.Text)))
		}
		t.Errorf("Inbox = %v, want %s and %s from kid, their texts read back", got, pending[0].ID, pending[1].ID)
	}
	st.mu.Lock()
	readBack := st.readSeqs
	st.mu.Unlock()
	if want := []string{fmt.Sprintf("%s@%d", root, pending[0].Ref.Seq), fmt.Sprintf("%s@%d", root, pending[1].Ref.Seq)}; !reflect.DeepEqual(readBack, want) {
		t.Errorf("payloads read back %v, want %v (the page only)", readBack, want)
	}

	// A payload that cannot be read back fails the detail.
	boom := errors.New("unreadable")
	st.mu.Lock()
	st.readSeqErr = boom
	st.mu.Unlock()
	if _, err := h.c.InspectPage(ctx, root, 0, 2); !errors.Is(err, boom) {
		t.Errorf("Detail with an unreadable payload: err %v, want %v", err, boom)
	}
	st.mu.Lock()
	st.readSeqErr = nil
	st.mu.Unlock()

	// An agent listed corrupt has no log: kid's log damaged in the middle,
	// with no checkpoint to start from, is not opened at recovery.
	h.stop()
	path := h.c.logPath(kid)
	lines := bytes.SplitAfter(h.read(path), []byte("\n"))
	lines[1] = bytes.Replace(lines[1], []byte(`"handle"`), []byte(`"hAndle"`), 1) // CRC now wrong
	h.rewrite(path, bytes.Join(lines, nil))
	if err := h.fs.Remove(h.c.agentDir(kid) + "/" + checkpoint.Name); err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	h.start()
	d, err = h.c.Inspect(ctx, kid)
	if err != nil || d.HasLog || d.Status != "corrupt" || d.Children == nil || len(d.Children) != 0 {
		t.Errorf("Detail of a corrupt agent: status %q, HasLog %v, Children %#v, err %v; want corrupt, false, [] and nil",
			d.Status, d.HasLog, d.Children, err)
	}
}

func TestListerWaitsSnapshotsOnlyWaitingAgents(t *testing.T) {
	var st *probeStore
	h := newHarness(t, withFakeClock, func(h *harness) {
		h.noWake = true
		h.store = func(fsys faultfs.FS) store.Store { st = newProbeStore(fsys); return st }
	})
	h.prov.Register("approver", approveThen(3600))
	h.prov.Register("brief", approveThen(60))
	root := h.create("lead", "", "echo")
	kid := h.create("kid", root, "approver")
	old := h.create("old", root, "brief")
	res := h.send(kid, "deploy")
	if res.Status != "suspended" || res.Wait == nil {
		t.Fatalf("kid's turn = %+v, want suspended", res)
	}
	kidTok := res.Wait.TokenID
	if res := h.send(old, "deploy"); res.Status != "suspended" {
		t.Fatalf("old's turn = %+v, want suspended", res)
	}
	// old's wait ends (its deadline passes): its run stays open, its
	// wait's token expired. (A consumed token, the old fake's state, is
	// not seen in an open run: the resumed run's turn.start drops it.)
	h.clock.Advance(2 * time.Minute)
	h.until("old's wait expired", func() bool { return h.count(old, schema.TokenExpired) == 1 })
	a, _ := h.c.agent(old)
	if ws := look(a, func(p *projection, _ liveFlags) string {
		if p.Run == nil || p.Run.Ended || p.Run.Wait == nil {
			return "no open run with a wait"
		}
		return p.Run.Wait.TokenState
	}); ws != string(schema.TokExpired) {
		t.Fatalf("setup: old's wait is %s, want expired in an open run", ws)
	}

	st.mu.Lock()
	clear(st.degraded)
	st.mu.Unlock()
	got := h.c.Waits()
	st.mu.Lock()
	snapped := map[string]int{"lead": st.degraded[root], "kid": st.degraded[kid], "old": st.degraded[old]}
	st.mu.Unlock()
	if len(got) != 1 || got[0].AgentID != kid || got[0].TokenID != kidTok || got[0].Path != "lead/kid" {
		t.Fatalf("Waits = %+v, want kid's %s at lead/kid", got, kidTok)
	}
	// An agent's snapshot reads its log's state (Degraded): the waiting
	// agent's was taken, those of the agents with no live wait were not.
	if snapped["kid"] == 0 || snapped["lead"] != 0 || snapped["old"] != 0 {
		t.Errorf("snapshots taken (log state reads) %v; want kid's only", snapped)
	}
}

// agent.list pages: ListPage reads only its page's agents and stops near
// pageBytes, so a deep tree's listing is bounded per reply, and following
// next through the pages lists every agent once, in List's order (issue
// 31, D5).
func TestListPagesADeepTree(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.noWake = true; h.cfg.Limits.TreeDepth = 1000 })
	parent := ""
	name := strings.Repeat("n", 63)
	for i := range 700 {
		parent = h.create(fmt.Sprintf("%s%d", name[:60], i), parent, "echo")
	}
	all := h.c.List()
	var got []AgentView
	pages, after := 0, ""
	for {
		page, next := h.c.ListPage(after, 0, nil)
		pages++
		size := 0
		for _, v := range page {
			size += len(v.Path)
		}
		if size > pageBytes+len(page[len(page)-1].Path)+64<<10 {
			t.Fatalf("page %d holds %d bytes of paths; want about %d at most", pages, size, pageBytes)
		}
		got = append(got, page...)
		if next == "" {
			break
		}
		after = next
	}
	if pages < 2 {
		t.Fatalf("%d page(s) for %d agents whose paths total more than %d bytes; want several", pages, len(all), pageBytes)
	}
	if len(got) != len(all) {
		t.Fatalf("the pages list %d agents, List %d", len(got), len(all))
	}
	for i := range all {
		if got[i].ID != all[i].ID {
			t.Fatalf("agent %d: pages give %s, List %s", i, got[i].ID, all[i].ID)
		}
	}
	// A status filter pages the same way.
	idle, _ := h.c.ListPage("", 5, func(s string) bool { return s == "idle" })
	if len(idle) != 5 {
		t.Fatalf("filtered page: %d agents, want 5", len(idle))
	}
}

// A refusal naming busy agents names ten at most, and how many more.
func TestListCutBoundsErrorTexts(t *testing.T) {
	var items []string
	for i := range 3000 {
		items = append(items, fmt.Sprintf("lead/worker-%04d", i))
	}
	s := listCut(items, 10, 1024)
	if !strings.HasSuffix(s, " and 2990 more") || strings.Count(s, ",") != 9 {
		t.Fatalf("listCut = %q", s)
	}
	if s := listCut([]string{strings.Repeat("x", 5000)}, 10, 1024); len(s) > 1100 {
		t.Fatalf("one long path gives %d bytes", len(s))
	}
}
