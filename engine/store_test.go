package engine

import (
	"context"
	"errors"
	"fmt"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/store"
	"github.com/warren-dev/warren/store/local"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fenceStore is store/local on the harness's files, whose appends can be
// fenced (as store/jetstream's are after another daemon claims the agent)
// and whose leases can be lost, on the test's word.
type fenceStore struct {
	*local.Store
	fenced atomic.Bool
	mu     sync.Mutex
	lost   map[string]chan struct{}
}

func newFenceStore(fsys faultfs.FS) *fenceStore {
	return &fenceStore{Store: local.New(local.Options{FS: fsys, Home: "/home"}), lost: map[string]chan struct{}{}}
}

func (s *fenceStore) OpenLog(ctx context.Context, id string, o store.LogOptions) (store.Log, error) {
	lg, err := s.Store.OpenLog(ctx, id, o)
	if err != nil {
		return nil, err
	}
	return &fenceLog{Log: lg, s: s}, nil
}

func (s *fenceStore) UserLog(ctx context.Context, o store.LogOptions) (store.Log, error) {
	return s.OpenLog(ctx, store.UserID, o)
}

func (s *fenceStore) Own(ctx context.Context, id string) (store.Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ch := make(chan struct{})
	s.lost[id] = ch
	return fenceLease{id: id, lost: ch}, nil
}

// lose closes the Lost channel of id's lease.
func (s *fenceStore) lose(id string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	close(s.lost[id])
}

var errTestFenced = fmt.Errorf("test: %w (%w)", store.ErrFenced, store.ErrPoisoned)

type fenceLog struct {
	store.Log
	s *fenceStore
}

func (l *fenceLog) Append(event string, data any) (eventlog.Entry, error) {
	if l.s.fenced.Load() {
		return eventlog.Entry{}, errTestFenced
	}
	return l.Log.Append(event, data)
}

func (l *fenceLog) AppendBatch(recs []eventlog.Record) ([]eventlog.Entry, error) {
	if l.s.fenced.Load() {
		return nil, errTestFenced
	}
	return l.Log.AppendBatch(recs)
}

func (l *fenceLog) Degraded() error {
	if l.s.fenced.Load() {
		return errTestFenced
	}
	return l.Log.Degraded()
}

type fenceLease struct {
	id   string
	lost chan struct{}
}

func (l fenceLease) ID() string                      { return l.id }
func (fenceLease) Epoch() uint64                     { return 1 }
func (l fenceLease) Lost() <-chan struct{}           { return l.lost }
func (fenceLease) Expires() time.Time                { return time.Time{} }
func (fenceLease) Release(ctx context.Context) error { return nil }

func fenceHarness(t *testing.T) (*harness, **fenceStore) {
	var fs *fenceStore
	h := newHarness(t, func(h *harness) {
		h.store = func(fsys faultfs.FS) store.Store { fs = newFenceStore(fsys); return fs }
	})
	return h, &fs
}

func releasedErr(h *harness, id string) error {
	a, _ := h.c.agent(id)
	return look(a, func(_ *projection, l liveFlags) error { return l.Released })
}

// TestFencedAppendReleasesAgent: an append refused with store.ErrFenced
// (another daemon claimed the agent) releases the agent: even once its
// log would take appends again, this daemon starts no turn for it.
func TestFencedAppendReleasesAgent(t *testing.T) {
	h, fsp := fenceHarness(t)
	fs := *fsp
	h.prov.Register("fence", func(_ context.Context, tr *inproc.Turn) (string, error) {
		fs.fenced.Store(true) // another daemon claims the agent mid-turn
		return "done", nil
	})
	id := h.create("a", "", "fence")
	_, _ = h.c.Send(context.Background(), id, "go", "", "", nil)
	if err := releasedErr(h, id); !errors.Is(err, store.ErrFenced) {
		t.Fatalf("after a fenced append the agent is not released: released=%v", err)
	}
	if h.count(id, schema.TurnComplete) != 0 {
		t.Fatalf("a turn.complete was logged past the fence")
	}
	fs.fenced.Store(false)
	_, err := h.c.Send(context.Background(), id, "again", "", "", nil)
	if err == nil || !strings.Contains(err.Error(), "no longer run by this daemon") {
		t.Fatalf("a released agent started a turn: err=%v", err)
	}
	a, _ := h.c.agent(id)
	deg := a.Degraded()
	if !strings.Contains(deg, "released") {
		t.Fatalf("agent.inspect's degraded does not say the agent is released: %q", deg)
	}
}

// TestLostLeaseStopsTurns: when the lease on an agent is lost, its running
// turn is cancelled and no turn starts for it again in this daemon.
func TestLostLeaseStopsTurns(t *testing.T) {
	h, fsp := fenceHarness(t)
	fs := *fsp
	started := make(chan struct{})
	h.prov.Register("block", func(ctx context.Context, tr *inproc.Turn) (string, error) {
		close(started)
		<-ctx.Done()
		return "", ctx.Err()
	})
	id := h.create("a", "", "block")
	done := make(chan error, 1)
	go func() {
		_, err := h.c.Send(context.Background(), id, "go", "", "", nil)
		done <- err
	}()
	<-started
	fs.lose(id)
	select {
	case <-done:
	case <-time.After(15 * time.Second):
		t.Fatal("the turn of an agent whose lease was lost was not cancelled")
	}
	if err := releasedErr(h, id); err == nil || !strings.Contains(err.Error(), "lease") {
		t.Fatalf("after a lost lease the agent is not released: %v", err)
	}
	_, err := h.c.Send(context.Background(), id, "again", "", "", nil)
	if err == nil || !strings.Contains(err.Error(), "no longer run by this daemon") {
		t.Fatalf("an agent whose lease was lost started a turn: err=%v", err)
	}
}
