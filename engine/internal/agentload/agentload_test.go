package agentload

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
	"github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/session"
	"github.com/warren-dev/warren/store"
	"github.com/warren-dev/warren/store/local"
)

const home = "/home"

// Agent ids as the store wants them (32 lowercase hex characters).
const (
	a1 = "000000000000000000000000000000a1"
	a2 = "000000000000000000000000000000a2"
)

// newLoader loads from a local store on fsys; fail, when set, fails the
// open of an id before the store is asked.
func newLoader(fsys faultfs.FS, fail func(id string) error) *Loader[string] {
	st := local.New(local.Options{FS: fsys, Home: home})
	dir := func(id string) string { return filepath.Join(home, "agents", id) }
	return &Loader[string]{
		FS: fsys, Dir: dir, LogPath: func(id string) string { return filepath.Join(dir(id), "events.jsonl") },
		Checkpoints: true,
		Open: func(id string, r *eventlog.Resume, replay func(eventlog.Entry) error) (store.Log, string, error) {
			if fail != nil {
				if err := fail(id); err != nil {
					return nil, "", err
				}
			}
			lg, err := st.OpenLog(context.Background(), id, store.LogOptions{Replay: replay, ReplayBorrows: true, MustExist: true, Resume: r})
			return lg, "bound:" + id, err
		},
		ReadSeq: st.ReadSeq,
		Sleep:   func(context.Context, time.Duration) error { return nil },
	}
}

func writeLog(t *testing.T, fsys faultfs.FS, id string, name string) {
	t.Helper()
	lg, err := eventlog.Open(fsys, filepath.Join(home, "agents", id, "events.jsonl"), eventlog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lg.Append(schema.AgentCreated, schema.AgentCreatedData{AgentID: id, Name: name}); err != nil {
		t.Fatal(err)
	}
	if err := lg.Close(); err != nil {
		t.Fatal(err)
	}
}

// A log is opened and folded in one pass; a directory without one is
// Missing; the binding of the open comes back with the log.
func TestLoadFoldsOrReportsMissing(t *testing.T) {
	fsys := faultfs.NewMem()
	writeLog(t, fsys, a1, "lead")
	if err := fsys.MkdirAll(filepath.Join(home, "agents", a2), 0o700); err != nil {
		t.Fatal(err)
	}
	got := newLoader(fsys, nil).LoadAll([]string{a1, a2})
	l1, l2 := got[0], got[1]
	if l1.Err != nil || l1.Log == nil || !l1.State.Created || l1.State.Name != "lead" || l1.Binding != "bound:"+a1 || l1.Resumed != nil {
		t.Fatalf("a1: %+v", l1)
	}
	if l1.State.Replaying() {
		t.Fatal("a1: the state is still in replay mode")
	}
	_ = l1.Log.Close()
	if !l2.Missing || l2.Log != nil || l2.Err != nil {
		t.Fatalf("a2 (no log): %+v", l2)
	}
}

// A log that cannot be opened for lack of a resource is retried until it
// opens; one that never does is marked ErrUnopened, wrapping the cause.
func TestRetryOpenFaults(t *testing.T) {
	fsys := faultfs.NewMem()
	writeLog(t, fsys, a1, "one")
	writeLog(t, fsys, a2, "two")
	tries := map[string]int{}
	ld := newLoader(fsys, func(id string) error {
		tries[id]++
		if id == a2 || tries[id] < 3 {
			return fmt.Errorf("opening: %w", syscall.EMFILE)
		}
		return nil
	})
	var slept time.Duration
	ld.Sleep = func(_ context.Context, d time.Duration) error { slept += d; return nil }
	all := []*Agent[string]{ld.Load(a1), ld.Load(a2)}
	ld.RetryOpenFaults(context.Background(), all)
	if all[0].Err != nil || all[0].State.Name != "one" || tries[a1] != 3 {
		t.Fatalf("a1 after retries: %+v (%d tries)", all[0], tries[a1])
	}
	_ = all[0].Log.Close()
	if !errors.Is(all[1].Err, ErrUnopened) || !errors.Is(all[1].Err, syscall.EMFILE) {
		t.Fatalf("a2: err %v, want ErrUnopened wrapping EMFILE", all[1].Err)
	}
	if slept < RetryLimit {
		t.Fatalf("waited %v in all, want at least RetryLimit (%v)", slept, RetryLimit)
	}
	if ResourceFault(errors.New("damage")) || !ResourceFault(store.ErrUnavailable) {
		t.Fatal("ResourceFault: damage is no resource fault, an unavailable store is")
	}
}

// A session.json that cannot be read is kept aside and rebuilt from the
// log; a provider blob of an agent that is not suspended is dropped.
func TestSnapshotAgreesWithTheLog(t *testing.T) {
	fsys := faultfs.NewMem()
	writeLog(t, fsys, a1, "lead")
	st := local.New(local.Options{FS: fsys, Home: home})
	l := newLoader(fsys, nil).Load(a1)
	_ = l.Log.Close()
	now := func() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }
	path := filepath.Join(home, "agents", a1, session.FileName)
	if err := faultfs.WriteFile(fsys, path, []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := Snapshot(st.Snapshots(), fsys, path, a1, FactsOf(l.State), now, nil)
	if s.ID != a1 || s.State != session.StateIdle || !s.CreatedAt.Equal(now()) {
		t.Fatalf("rebuilt snapshot %+v", s)
	}
	ents, err := fsys.ReadDir(filepath.Join(home, "agents", a1))
	if err != nil {
		t.Fatal(err)
	}
	aside := false
	for _, e := range ents {
		aside = aside || strings.HasPrefix(e.Name(), session.FileName+".corrupt-")
	}
	if !aside {
		t.Fatalf("the unreadable session.json was not kept aside: %v", ents)
	}
	s = s.Clone()
	s.ProviderState = []byte("stale")
	if err := st.Snapshots().Save(s); err != nil {
		t.Fatal(err)
	}
	if got := Snapshot(st.Snapshots(), fsys, path, a1, FactsOf(l.State), now, nil); len(got.ProviderState) != 0 {
		t.Fatal("a stale provider blob was kept")
	}
	if got, _ := st.Snapshots().Load(a1); len(got.ProviderState) != 0 {
		t.Fatal("the snapshot without its stale blob was not saved")
	}
}

// The session facts are the recorded provider session's (session.created),
// not the agent's preferred provider and model, which a send can change.
func TestFactsOfTakesTheRecordedSession(t *testing.T) {
	p := &projection.State{Provider: "preferred", Model: "m-pref", SessProvider: "inproc", SessModel: "echo",
		Handle: "h1", Suspended: true}
	want := SessionFacts{Provider: "inproc", Model: "echo", Handle: "h1", Suspended: true}
	if got := FactsOf(p); got != want {
		t.Fatalf("FactsOf = %+v, want %+v", got, want)
	}
}
