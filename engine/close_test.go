package engine

import (
	"context"
	"io/fs"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/schedule"
	"github.com/warren-dev/warren/session"
)

// holdFS holds the next fsync of a file whose path ends in a suffix (once
// armed): it reports the held sync on entered and lets it go on let.
type holdFS struct {
	faultfs.FS
	mu      sync.Mutex
	suffix  string
	entered chan struct{}
	release chan struct{}
	once    sync.Once
}

func newHoldFS() *holdFS {
	return &holdFS{entered: make(chan struct{}), release: make(chan struct{})}
}

// let lets the held sync (and any later one) go. Tests defer it, so that a
// failing test does not hang in the harness's cleanup (deferred calls run
// before cleanups).
func (h *holdFS) let() { h.once.Do(func() { close(h.release) }) }

func (h *holdFS) arm(suffix string) {
	h.mu.Lock()
	h.suffix = suffix
	h.mu.Unlock()
}

func (h *holdFS) OpenFile(name string, flag int, perm fs.FileMode) (faultfs.File, error) {
	f, err := h.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &holdFile{File: f, h: h}, nil
}

type holdFile struct {
	faultfs.File
	h *holdFS
}

func (f *holdFile) Sync() error {
	f.h.mu.Lock()
	hold := f.h.suffix != "" && strings.HasSuffix(f.Name(), f.h.suffix)
	if hold {
		f.h.suffix = ""
	}
	f.h.mu.Unlock()
	if hold {
		f.h.entered <- struct{}{}
		<-f.h.release
	}
	return f.File.Sync()
}

// TestCloseWaitsForADeadlineSweepInProgress: a wait deadline's sweep that
// fired just before Close (it is held inside its log write) finishes before
// Close returns, session.json included; a sweep or reminder firing after
// Close writes nothing. (A sweep that Close did not wait for started a
// session.json write after Close's last wait: a data race on the core's
// wait group, and a file written after the daemon let go of its home.)
func TestCloseWaitsForADeadlineSweepInProgress(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		hold := newHoldFS()
		defer hold.let()
		h := newHarness(t, func(h *harness) {
			h.saveDelay = time.Hour // only Close has the snapshot written
			h.wrapFS = func(fsys faultfs.FS) faultfs.FS { hold.FS = fsys; return hold }
			h.clock = schedule.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		})
		asker := func(timeout int) inproc.Program {
			return func(ctx context.Context, tr *inproc.Turn) (string, error) {
				r, err := tr.Call("await_input", map[string]any{"kind": "question", "prompt": "name?", "timeout": timeout})
				if err != nil {
					return "", err
				}
				return r["response"].(string), nil
			}
		}
		h.prov.Register("soon", asker(60))
		h.prov.Register("later", asker(3600))
		soon := h.create("soon", "", "soon")
		later := h.create("later", "", "later")
		if res := h.send(soon, "ask"); res.Status != "suspended" {
			t.Fatalf("soon: %+v", res)
		}
		if res := h.send(later, "ask"); res.Status != "suspended" {
			t.Fatalf("later: %+v", res)
		}

		if _, err := h.c.CallTool(context.Background(), later, "remind_me", map[string]any{"reason": "late", "timeout": 3600}); err != nil {
			t.Fatal(err)
		}
		hold.arm(soon + "/events.jsonl")
		swept := make(chan struct{})
		// soon's deadline timer fires on this goroutine and holds in its write.
		go func() { h.clock.Advance(2 * time.Minute); close(swept) }()
		<-hold.entered
		closed := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			closed <- h.c.Close(ctx)
		}()
		// Let the sweep go once Close has begun: once every goroutine is
		// blocked, Close waits for the sweep held in its write.
		synctest.Wait()
		if !h.c.stopping() {
			t.Fatal("Close is blocked, yet it has not begun")
		}
		hold.let()
		if err := <-closed; err != nil {
			t.Fatalf("Close: %v", err)
		}
		<-swept
		if n := h.clock.Pending(); n != 0 {
			t.Fatalf("%d timers (later's deadline, its reminder) still armed on the clock after Close, want 0", n)
		}
		store := session.NewStore(h.fs, "/home/agents")
		s, err := store.Load(soon)
		if err != nil {
			t.Fatal(err)
		}
		if s.State != session.StateIdle {
			t.Fatalf("session.json of the expired agent after Close: state %s, want idle (the sweep's snapshot was not waited for)", s.State)
		}
		if n := h.count(soon, "token.expired"); n != 1 {
			t.Fatalf("token.expired logged %d times, want 1", n)
		}

		// After Close, later's deadline and reminder are due: nothing fires,
		// and a sweep called directly does nothing either.
		ops := h.fs.MutatingOps()
		h.clock.Advance(2 * time.Hour)
		h.c.SweepWaits()
		if n := h.fs.MutatingOps(); n != ops {
			t.Fatalf("timers and a sweep after Close did %d filesystem operations, want 0", n-ops)
		}

		if n := h.count(later, "token.expired"); n != 0 {
			t.Fatalf("a sweep after Close expired a wait (token.expired x%d)", n)
		}
	})
}
