package views

import (
	"errors"
	"reflect"
	"testing"
	"time"

	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/projection"
)

// fakeAgent is an agent of the listings: a projection and the flags
// beside it, read without a lock (the tests are single-threaded).
type fakeAgent struct {
	id       string
	p        *projection.State
	busy     bool
	lastSeq  uint64
	hasLog   bool
	snapshot int // how many snapshots were taken
}

func (f *fakeAgent) ID() string   { return f.id }
func (f *fakeAgent) Name() string { return f.p.Name }
func (f *fakeAgent) Snapshot(path string) Snapshot {
	f.snapshot++
	return Take(f.p, Flags{ID: f.id, Path: path, Busy: f.busy})
}
func (f *fakeAgent) Status(bootID string, now time.Time) string {
	return Status(nil, Facts(f.p, false), f.busy, bootID, now)
}
func (f *fakeAgent) Settings(sinceSeq uint64, limit int) Settings {
	return TakeSettings(f.p, sinceSeq, limit)
}
func (f *fakeAgent) HasLiveWait() bool       { return f.p.Run != nil && f.p.Run.Wait != nil }
func (f *fakeAgent) LastSeq() (uint64, bool) { return f.lastSeq, f.hasLog }

type fakeTree map[string][]string // parent -> children; paths are "/"+id

func (t fakeTree) Path(id string) string       { return "/" + id }
func (t fakeTree) Children(id string) []string { return t[id] }

func newLister(agents ...*fakeAgent) Lister[*fakeAgent] {
	byID := map[string]*fakeAgent{}
	for _, a := range agents {
		byID[a.id] = a
	}
	return Lister[*fakeAgent]{
		Ordered:   func() []*fakeAgent { return agents },
		Lookup:    func(id string) (*fakeAgent, bool) { a, ok := byID[id]; return a, ok },
		Tree:      fakeTree{"root": {"kid", "gone"}},
		BootID:    "b1",
		Now:       func() time.Time { return t0.Add(3 * time.Minute) },
		Fill:      func(owner string, msgs []inbox.Message) ([]inbox.Message, error) { return msgs, nil },
		Name:      func(id string) string { return "name:" + id },
		PageBytes: 1 << 20,
	}
}

func idleAgent(id, name string) *fakeAgent {
	p := projection.New()
	p.Name = name
	return &fakeAgent{id: id, p: p, hasLog: true, lastSeq: 7}
}

func TestListerListsInOrderWithPathsAndStatus(t *testing.T) {
	root, kid := idleAgent("root", "lead"), &fakeAgent{id: "kid", p: waitingState("live")}
	root.busy = true
	got := newLister(root, kid).List()
	if len(got) != 2 || got[0].ID != "root" || got[1].ID != "kid" {
		t.Fatalf("List = %+v, want root then kid", got)
	}
	if got[0].Path != "/root" || got[0].Status != "running" || got[1].Status != "suspended" {
		t.Errorf("List: paths and statuses %q %q, %q %q; want /root running, suspended",
			got[0].Path, got[0].Status, got[1].Path, got[1].Status)
	}
}

func TestListerDetail(t *testing.T) {
	root, kid := idleAgent("root", "lead"), &fakeAgent{id: "kid", p: waitingState("live")}
	for i, id := range []string{"m1", "m2", "m3"} {
		m := inbox.Message{ID: id, Sender: "kid", Recipient: "root", Kind: inbox.KindRequest, Payload: "p" + id,
			Ref: inbox.Ref{Seq: uint64(10 + i)}}
		if err := root.p.Pending.Push(m); err != nil {
			t.Fatal(err)
		}
	}
	l := newLister(root, kid)
	var filled []string
	l.Fill = func(owner string, msgs []inbox.Message) ([]inbox.Message, error) {
		for _, m := range msgs {
			filled = append(filled, owner+":"+m.ID)
		}
		return msgs, nil
	}
	d, err := l.Detail(root, 0, 2)
	if err != nil {
		t.Fatal(err)
	}
	// "gone" is a child in the tree that is not loaded: left out.
	if want := []ChildView{{ID: "kid", Name: "kid", Status: "suspended"}}; !reflect.DeepEqual(d.Children, want) {
		t.Errorf("Children = %+v, want %+v", d.Children, want)
	}
	if !d.HasLog || d.LastSeq != 7 || !d.HasMore || d.InboxNextSeq != 11 {
		t.Errorf("HasLog %v LastSeq %d HasMore %v InboxNextSeq %d; want true 7 true 11", d.HasLog, d.LastSeq, d.HasMore, d.InboxNextSeq)
	}
	if len(d.Inbox) != 2 || d.Inbox[0].From != "name:kid" || d.Inbox[1].MessageID != "m2" {
		t.Errorf("Inbox = %+v, want m1 and m2 from name:kid", d.Inbox)
	}
	if want := []string{"root:m1", "root:m2"}; !reflect.DeepEqual(filled, want) {
		t.Errorf("payloads read back for %v, want %v (the page only)", filled, want)
	}

	// An agent listed corrupt has no log; a payload that cannot be read
	// back fails the detail.
	kid.hasLog = false
	if d, err := l.Detail(kid, 0, 2); err != nil || d.HasLog || d.Children == nil {
		t.Errorf("Detail of an agent without a log: HasLog %v, Children %v, err %v; want false, [] and nil", d.HasLog, d.Children, err)
	}
	boom := errors.New("unreadable")
	l.Fill = func(string, []inbox.Message) ([]inbox.Message, error) { return nil, boom }
	if _, err := l.Detail(root, 0, 2); !errors.Is(err, boom) {
		t.Errorf("Detail with an unreadable payload: err %v, want %v", err, boom)
	}
}

func TestListerWaitsSnapshotsOnlyWaitingAgents(t *testing.T) {
	root, kid := idleAgent("root", "lead"), &fakeAgent{id: "kid", p: waitingState("live")}
	ended := &fakeAgent{id: "old", p: waitingState("consumed")}
	got := newLister(root, kid, ended).Waits()
	if len(got) != 1 || got[0].AgentID != "kid" || got[0].TokenID != "tok_1" || got[0].Path != "/kid" {
		t.Fatalf("Waits = %+v, want kid's tok_1 at /kid", got)
	}
	if root.snapshot != 0 {
		t.Errorf("an agent with no wait was snapshotted %d times, want 0", root.snapshot)
	}
}
