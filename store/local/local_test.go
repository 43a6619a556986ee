package local_test

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/session"
	"github.com/warren-dev/warren/store"
	"github.com/warren-dev/warren/store/local"
	"github.com/warren-dev/warren/store/storetest"
)

func harness(fsys func() faultfs.FS) storetest.Harness {
	return storetest.Harness{
		New: func(t *testing.T) store.Store {
			s := local.New(local.Options{FS: fsys(), Home: t.TempDir(), PendingIdle: -1})
			t.Cleanup(func() { _ = s.Close() })
			return s
		},
		Reopen: func(t *testing.T, s store.Store) store.Store {
			old := s.(*local.Store)
			_ = old.Close()
			s2 := local.New(old.Options())
			t.Cleanup(func() { _ = s2.Close() })
			return s2
		},
		Raw: func(t *testing.T, s store.Store, id string) []byte {
			ls := s.(*local.Store)
			b, err := faultfs.ReadFile(ls.Options().FS, ls.LogPath(id))
			if err != nil {
				t.Fatal(err)
			}
			return b
		},
	}
}

func TestConformanceOS(t *testing.T) {
	storetest.Run(t, harness(func() faultfs.FS { return faultfs.OS{} }))
}

func TestConformanceMem(t *testing.T) {
	m := faultfs.NewMem()
	storetest.Run(t, harness(func() faultfs.FS { return m }))
}

// The store writes the files the daemon always wrote: the log where
// eventlog puts it, session.json as session.Store writes it.
func TestSameFiles(t *testing.T) {
	home := t.TempDir()
	s := local.New(local.Options{FS: faultfs.OS{}, Home: home})
	id := storetest.NewID(t)
	ctx := context.Background()
	l, _ := s.Own(ctx, id)
	lg, err := s.OpenLog(ctx, id, store.LogOptions{Lease: l})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := lg.Append("e", nil); err != nil {
		t.Fatal(err)
	}
	_ = lg.Close()
	es, err := eventlog.ReadAll(faultfs.OS{}, filepath.Join(home, "agents", id, "events.jsonl"))
	if err != nil || len(es) != 1 {
		t.Fatalf("agents/<id>/events.jsonl: %d entries, %v", len(es), err)
	}
	u, err := s.UserLog(ctx, store.LogOptions{})
	if err != nil {
		t.Fatal(err)
	}
	_ = u.Close()
	if _, err := os.Stat(filepath.Join(home, "user.jsonl")); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2026, 11, 24, 7, 0, 0, 0, time.UTC)
	sn := &session.Session{ID: id, State: session.StateIdle, CreatedAt: now, UpdatedAt: now}
	if err := s.Snapshots().Save(sn); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(home, "agents", id, "session.json"))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := json.Marshal(sn)
	if string(got) != string(want)+"\n" {
		t.Fatalf("session.json = %q, want %q", got, want)
	}
	if l.Epoch() != 1 || l.Lost() != nil {
		t.Fatal("the home lease must have epoch 1 and never be lost")
	}
}

// A second daemon on the same home is refused at the lock: the local
// store's fence.
func TestLockRefusesSecondOwner(t *testing.T) {
	home := t.TempDir()
	l1, err := local.Lock(home)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := local.Lock(home); !errors.Is(err, local.ErrLocked) {
		t.Fatalf("second Lock: %v, want ErrLocked", err)
	}
	s := local.New(local.Options{FS: faultfs.OS{}, Home: home, Lock: l1})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	l2, err := local.Lock(home)
	if err != nil {
		t.Fatalf("Lock after Close released it: %v", err)
	}
	_ = l2.Unlock()
}
