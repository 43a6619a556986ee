package engine

import (
	"context"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/warren-dev/warren/faultfs"
)

// failingOpens fails the first n opens of files whose path ends in suffix
// with err (n < 0: every open).
type failingOpens struct {
	faultfs.FS
	suffix string
	err    error
	mu     sync.Mutex
	n      int
}

func (f *failingOpens) OpenFile(name string, flag int, perm fs.FileMode) (faultfs.File, error) {
	f.mu.Lock()
	fail := strings.HasSuffix(name, f.suffix) && f.n != 0
	if fail && f.n > 0 {
		f.n--
	}
	f.mu.Unlock()
	if fail {
		return nil, &fs.PathError{Op: "open", Path: name, Err: f.err}
	}
	return f.FS.OpenFile(name, flag, perm)
}

// withFailingOpens makes a harness without wake turns whose filesystem
// goes through *fo once the test sets it (nil: straight through).
func withFailingOpens(fo **failingOpens) func(*harness) {
	return func(h *harness) {
		h.noWake = true
		h.wrapFS = func(inner faultfs.FS) faultfs.FS {
			if *fo == nil {
				return inner
			}
			(*fo).FS = inner
			return *fo
		}
	}
}

// TestOpenFaultAtRecoveryIsRetried: a log that cannot be opened at
// recovery for lack of a resource (EMFILE, ENOSPC) is not damaged:
// recovery waits and retries it, and once the cause is gone the agent and
// the agents under it are recovered whole, with nothing listed corrupt.
func TestOpenFaultAtRecoveryIsRetried(t *testing.T) {
	for _, e := range []syscall.Errno{syscall.EMFILE, syscall.ENOSPC} {
		t.Run(e.Error(), func(t *testing.T) {
			var fo *failingOpens
			h := newHarness(t, withFailingOpens(&fo))
			a := h.create("a", "", "echo")
			b := h.create("b", a, "echo")
			h.send(a, "one")
			h.send(b, "one")
			fo = &failingOpens{suffix: a + "/events.jsonl", err: e, n: 3}
			h.delays = nil
			rep := h.crashReport()
			if rep.Corrupt != 0 || rep.Agents != 2 {
				t.Fatalf("recovery report %+v; want both agents recovered, none corrupt", rep)
			}
			// One wait per failed attempt (an attempt may open the log more
			// than once), doubling from 100 ms.
			if len(h.delays) == 0 || len(h.delays) > 3 || h.delays[0] != 100*time.Millisecond ||
				h.delays[len(h.delays)-1] != 100*time.Millisecond<<(len(h.delays)-1) {
				t.Fatalf("recovery waited %v; want one to three waits doubling from 100ms", h.delays)
			}
			for _, id := range []string{a, b} {
				if res := h.send(id, "two"); res.Err != nil || res.Response != "echo: two" {
					t.Fatalf("send after recovery: %+v", res)
				}
			}
		})
	}
}

// TestOpenFaultThatLastsIsNotCalledDamage: when the cause outlasts the
// retries, the agent is listed with it (no `warren repair` advice), the
// agents under it say their parent's log could not be opened, a send gets
// code 6, nothing on disk changes, and a restart once the cause is gone
// recovers both.
func TestOpenFaultThatLastsIsNotCalledDamage(t *testing.T) {
	var fo *failingOpens
	h := newHarness(t, withFailingOpens(&fo))
	a := h.create("a", "", "echo")
	b := h.create("b", a, "echo")
	h.send(a, "one")
	before := fmt.Sprint(h.events(a), h.events(b))
	fo = &failingOpens{suffix: a + "/events.jsonl", err: syscall.EMFILE, n: -1}
	h.crashReport()
	for _, id := range []string{a, b} {
		m, err := h.c.Inspect(context.Background(), id)
		if err != nil {
			t.Fatal(err)
		}
		msg := m.Error
		if !strings.Contains(msg, "could not be opened") || !strings.Contains(msg, "too many open files") || strings.Contains(msg, "repair") {
			t.Fatalf("agent %s listed with %q; want the cause, and no repair advice", id, msg)
		}
	}
	if _, err := h.c.Send(context.Background(), a, "two", "", "", nil); codeOf(err) != 6 {
		t.Fatalf("send to the unopened agent: %v (code %d); want code 6", err, codeOf(err))
	}
	fo.mu.Lock()
	fo.n = 0
	fo.mu.Unlock()
	h.restart()
	if got := fmt.Sprint(h.events(a), h.events(b)); got != before {
		t.Fatalf("logs after the fault: %s; were %s", got, before)
	}
	if res := h.send(b, "two"); res.Err != nil {
		t.Fatalf("send after a restart with the cause gone: %+v", res)
	}
}

// crashReport is crash (a process crash) returning the recovery's report.
func (h *harness) crashReport() RecoveryReport {
	h.t.Helper()
	h.crash(faultfs.ProcessCrash)
	return h.report
}
