package engine

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/warren-dev/warren/checkpoint"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
)

// The scrub after recovery (recovery.go): the lines a checkpoint let
// recovery skip, read once the daemon serves.

// TestScrub: the scrub after recovery reads every placed agent's
// session.json, writes the checkpoints of the logs recovery folded, then
// checks the lines a checkpoint let recovery skip: a damaged prefix lists
// the agent corrupt and removes its checkpoint; a read failure is only
// logged. Without checkpoints it only reads the session.json files. It
// stops with the engine.
func TestScrub(t *testing.T) {
	garbage := []byte("{not json")
	ckptExists := func(h *harness, id string) bool {
		ok, _ := faultfs.Exists(h.fs, filepath.Join(h.c.agentDir(id), checkpoint.Name))
		return ok
	}
	// damage changes a line of id's log before its checkpoint.
	damage := func(h *harness, id string) {
		path := h.c.logPath(id)
		lines := bytes.SplitAfter(h.read(path), []byte("\n"))
		lines[2] = bytes.Replace(lines[2], []byte(`"turn"`), []byte(`"tUrn"`), 1)
		h.rewrite(path, bytes.Join(lines, nil))
	}

	t.Run("with checkpoints", func(t *testing.T) {
		var rf *readFault
		h := newHarness(t, withFakeClock, func(h *harness) {
			h.noWake = true
			h.wrapFS = func(inner faultfs.FS) faultfs.FS {
				if rf == nil {
					return inner
				}
				rf.FS = inner
				return rf
			}
		})
		bad := h.create("bad", "", "echo")
		unread := h.create("unread", "", "echo")
		folded := h.create("folded", "", "echo")
		for _, id := range []string{bad, unread, folded} {
			h.send(id, "one")
			h.send(id, "two")
		}
		h.stop() // writes every checkpoint
		damage(h, bad)
		if err := h.fs.Remove(filepath.Join(h.c.agentDir(folded), checkpoint.Name)); err != nil {
			t.Fatal(err)
		}
		for _, id := range []string{bad, unread, folded} {
			h.rewrite(h.c.snapshotPath(id), garbage)
		}
		// unread's third read-only open is the scrub's (the first reads the
		// lines its checkpoint's facts come from, the second checks the
		// checkpoint's line): it fails.
		rf = &readFault{suffix: unread + "/events.jsonl", nth: 3, err: syscall.EIO}
		h.start()
		<-h.c.scrubbed

		if h.report.Resumed != 2 || h.report.Corrupt != 0 {
			t.Fatalf("report %+v; want bad and unread resumed, none corrupt at recovery", h.report)
		}
		for _, id := range []string{bad, unread, folded} {
			if kept := h.keptAside(id); len(kept) != 1 || !bytes.Equal(kept[0], garbage) {
				t.Errorf("%s's session.json was not read by the scrub (kept aside %q)", id, kept)
			}
		}
		if !ckptExists(h, folded) {
			t.Error("no checkpoint written for the agent whose whole log recovery folded")
		}
		if v, _ := viewOf(h.c, bad); v.Status != "corrupt" || !errors.Is(mustAgent(t, h.c, bad).Corrupt(), eventlog.ErrCorrupt) {
			t.Errorf("bad listed %+v, want corrupt with its damage", v)
		}
		if ckptExists(h, bad) {
			t.Error("bad's checkpoint is still there")
		}
		if rf.failed() != 1 {
			t.Fatalf("%d reads of unread's log failed, want the scrub's", rf.failed())
		}
		for _, id := range []string{unread, folded} {
			if v, _ := viewOf(h.c, id); v.Status != "idle" {
				t.Errorf("%s listed %+v, want idle", id, v)
			}
		}
		if !ckptExists(h, unread) {
			t.Error("unread's checkpoint was removed for a read failure")
		}
	})

	t.Run("without checkpoints", func(t *testing.T) {
		h := newHarness(t, withFakeClock, func(h *harness) { h.noWake, h.ckptEvery = true, -1 })
		a := h.create("a", "", "echo")
		h.send(a, "one")
		h.stop()
		h.rewrite(h.c.snapshotPath(a), garbage)
		h.start()
		<-h.c.scrubbed
		if kept := h.keptAside(a); len(kept) != 1 {
			t.Errorf("the session.json was not read by the scrub (kept aside %q)", kept)
		}
		if ckptExists(h, a) {
			t.Error("a checkpoint was written with checkpoints off")
		}
	})

	t.Run("stopping", func(t *testing.T) {
		h := newHarness(t, withFakeClock, func(h *harness) { h.noWake = true })
		bad := h.create("bad", "", "echo")
		h.send(bad, "one")
		h.send(bad, "two")
		h.stop()
		damage(h, bad)
		h.rewrite(h.c.snapshotPath(bad), garbage)
		c := h.stepCore(CoreOptions{})
		l := c.load(context.Background(), bad, nil)
		if l.Err != nil || l.Resumed == nil {
			t.Fatalf("load: %+v; want bad resumed from its checkpoint", l)
		}
		defer l.Log.Close()
		c.adopt(l)
		c.restore(l, &RecoveryReport{})
		if err := c.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		// The engine stops: a scrub that was running checks nothing more,
		// and one that had not started reads nothing and is over at once.
		c.scrub([]*loaded{l})
		c.startScrub([]*loaded{l})
		select {
		case <-c.scrubbed:
		default:
			t.Fatal("the scrub of a stopped engine is not over")
		}
		if err := l.Agent.Corrupt(); err != nil {
			t.Errorf("a stopping engine's scrub listed the agent corrupt: %v", err)
		}
		if !ckptExists(h, bad) {
			t.Error("a stopping engine's scrub removed the checkpoint")
		}
		if kept := h.keptAside(bad); len(kept) != 0 {
			t.Error("a stopped engine's scrub read session.json")
		}
	})
}

// readFault fails the nth read-only open of a file whose path ends in
// suffix with err, and counts the opens it failed.
type readFault struct {
	faultfs.FS
	suffix string
	nth    int
	err    error
	mu     sync.Mutex
	seen   int
	fails  int
}

func (f *readFault) OpenFile(name string, flag int, perm fs.FileMode) (faultfs.File, error) {
	if flag&(os.O_WRONLY|os.O_RDWR|os.O_CREATE) == 0 && strings.HasSuffix(name, f.suffix) {
		f.mu.Lock()
		f.seen++
		fail := f.seen == f.nth
		if fail {
			f.fails++
		}
		f.mu.Unlock()
		if fail {
			return nil, &fs.PathError{Op: "open", Path: name, Err: f.err}
		}
	}
	return f.FS.OpenFile(name, flag, perm)
}

func (f *readFault) failed() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.fails
}
