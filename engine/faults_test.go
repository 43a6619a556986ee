package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/protocol"
	"github.com/warren-dev/warren/provider/inproc"
)

// logFaults are faults an agent's log append meets in the field. Sticky:
// they last until cleared. Every mutating op fails on a full disk or a
// read-only remount (so a reopen fails too while they last); descriptor
// exhaustion fails every open.
var logFaults = map[string][]faultfs.Rule{
	"ENOSPC": {{Kind: faultfs.OpAny, Err: syscall.ENOSPC, Sticky: true}},
	"EROFS":  {{Kind: faultfs.OpAny, Err: syscall.EROFS, Sticky: true}},
	"EMFILE": {
		{Kind: faultfs.OpOpen, Err: syscall.EMFILE, Sticky: true},
		{Kind: faultfs.OpCreate, Err: syscall.EMFILE, Sticky: true},
	},
}

// codeOf is the wire code of err's domain condition (0 for nil), as the
// RPC edge maps it (daemon.toRPCError; its TestWireCodes pins the map).
// The engine's tests assert conditions through it to keep the codes the
// user sees in view.
func codeOf(err error) int {
	switch {
	case err == nil:
		return 0
	case errors.Is(err, ErrNotFound):
		return protocol.CodeNotFound
	case errors.Is(err, ErrInvalid), errors.Is(err, ErrWrongState):
		return protocol.CodeInvalid
	case errors.Is(err, ErrTokenRejected):
		return protocol.CodeTokenRejected
	case errors.Is(err, ErrUnavailable):
		return protocol.CodeUnavailable
	}
	var pe *protocol.Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, eventlog.ErrPoisoned) {
		return protocol.CodeUnavailable
	}
	return protocol.CodeInternal
}

// events lists the event names of an agent's log.
func (h *harness) events(id string) []string {
	var out []string
	for _, e := range h.entries(id) {
		out = append(out, e.Event)
	}
	return out
}

// faultHarness has logs that try to reopen on every append (no timer), and
// a handle cap of one log, so that an agent's log is closed while another
// agent works and must be reopened (which EMFILE refuses).
func faultHarness(t *testing.T) *harness {
	return newHarness(t, func(h *harness) {
		h.healBackoff = -1
		h.maxOpenLogs = 1
		h.noWake = true
	})
}

// TestLogFaultHealsWithoutRestart: a send whose log append meets ENOSPC,
// EROFS or EMFILE fails with code 6 and logs nothing; the agent shows the
// error in agent.inspect, agent.list and daemon.status while the fault
// lasts; once it is gone the next send succeeds without a restart, the log
// holds exactly the acknowledged entries, and a power loss after the heal
// recovers the same.
func TestLogFaultHealsWithoutRestart(t *testing.T) {
	for name, rules := range logFaults {
		t.Run(name, func(t *testing.T) {
			h := faultHarness(t)
			a := h.create("a", "", "echo")
			b := h.create("b", "", "echo")
			h.send(a, "one")
			h.send(b, "x") // a's log handles are closed for the cap
			before := h.events(a)

			for _, r := range rules {
				h.fs.Inject(r)
			}
			res, err := h.c.Send(context.Background(), a, "two", "", "", nil)
			if err == nil {
				err = res.Err
			}
			if err == nil || codeOf(err) != protocol.CodeUnavailable {
				t.Fatalf("send under %s: %v (code %d), want code 6", name, err, codeOf(err))
			}
			// A second attempt while the fault lasts is refused the same way.
			if res, err := h.c.Send(context.Background(), a, "two", "", "", nil); err == nil && res.Err == nil {
				t.Fatal("a send succeeded while the fault lasted")
			}
			m, err := h.c.Inspect(context.Background(), a)
			if err != nil {
				t.Fatal(err)
			}
			errno := rules[0].Err.Error() // "no space left on device", ...
			deg := m.Degraded
			if !strings.Contains(deg, errno) {
				t.Fatalf("inspect shows degraded %q, want the cause %s", deg, name)
			}
			if m.Status != "idle" {
				t.Fatalf("inspect status %v, want idle (no turn.start was logged)", m.Status)
			}
			listed := false
			for _, v := range h.c.List() {
				if v.ID == a && strings.Contains(v.Degraded, errno) {
					listed = true
				}
			}
			if !listed {
				t.Fatal("agent.list does not show the degraded agent's error")
			}
			if n := h.c.DegradedCount(); n != 1 {
				t.Fatalf("daemon.status degraded = %v, want 1", n)
			}
			// The state in memory is what the log holds.
			ag, _ := h.c.agent(a)
			turnNo := look(ag, func(p *projection, _ liveFlags) int { return p.TurnNo })
			if turnNo != 1 {
				t.Fatalf("projection shows turn %d; the failed turn.start must not be applied", turnNo)
			}

			h.fs.ClearRules()
			if got := h.events(a); fmt.Sprint(got) != fmt.Sprint(before) {
				t.Fatalf("the log changed under the fault: %v, was %v", got, before)
			}
			if res := h.send(a, "three"); res.Err != nil || res.Response != "echo: three" {
				t.Fatalf("send after the fault cleared: %+v", res)
			}
			m, _ = h.c.Inspect(context.Background(), a)
			if d := m.Degraded; d != "" {
				t.Fatalf("still degraded after the heal: %v", d)
			}
			want := append(before, "turn.start", "turn.complete")
			if got := h.events(a); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("log after heal: %v, want %v", got, want)
			}
			h.crash(faultfs.PowerLoss)
			if got := h.events(a); fmt.Sprint(got) != fmt.Sprint(want) {
				t.Fatalf("log after heal and power loss: %v, want %v", got, want)
			}
			if s := h.statusOf(a); s != "idle" {
				t.Fatalf("status after recovery %s", s)
			}
			if res := h.send(a, "four"); res.Response != "echo: four" {
				t.Fatalf("send after recovery: %+v", res)
			}
		})
	}
}

// TestCancelWithPoisonedLog: a running turn is cancelled while its log
// refuses appends. The turn stops; cancel says that turn.cancelled could
// not be logged (code 6), the agent shows the run's end as owed and the
// log still holds the run open (memory agrees); once the fault is gone
// cancel logs the end and the agent is idle, which a crash confirms.
func TestCancelWithPoisonedLog(t *testing.T) {
	h := faultHarness(t)
	started := make(chan *inproc.Turn, 1)
	h.prov.Register("slow", inproc.Signal(started, inproc.Block(make(chan struct{}), inproc.Echo)))
	id := h.create("lead", "", "slow")
	done := make(chan TurnResult, 1)
	go func() { res, _ := h.c.Send(context.Background(), id, "x", "", "", nil); done <- res }()
	<-started
	h.fs.Inject(faultfs.Rule{Kind: faultfs.OpAny, Err: syscall.EROFS, Sticky: true})
	err := h.c.Cancel(context.Background(), id)
	if codeOf(err) != protocol.CodeUnavailable || !strings.Contains(err.Error(), "turn.cancelled could not be logged") {
		t.Fatalf("cancel with a read-only log: %v, want code 6 saying turn.cancelled could not be logged", err)
	}
	if res := <-done; res.Err == nil {
		t.Fatalf("the cancelled send reported success: %+v", res)
	}
	a, _ := h.c.agent(id)
	open := look(a, func(p *projection, _ liveFlags) bool { return p.Run != nil && !p.Run.Ended })
	busy := look(a, func(_ *projection, l liveFlags) bool { return l.Busy })
	if !open || busy {
		t.Fatalf("after the failed cancel: run open in memory %v (want true, as in the log), busy %v (want false)", open, busy)
	}
	m, _ := h.c.Inspect(context.Background(), id)
	if d := m.Degraded; !strings.Contains(d, "turn.cancelled") || !strings.Contains(d, syscall.EROFS.Error()) {
		t.Fatalf("inspect degraded %q does not say the run's end is owed and why", d)
	}
	// Still refused while the fault lasts.
	if err := h.c.Cancel(context.Background(), id); codeOf(err) != protocol.CodeUnavailable {
		t.Fatalf("second cancel under the fault: %v", err)
	}
	if n := h.count(id, "turn.cancelled"); n != 0 {
		t.Fatalf("turn.cancelled in the log under the fault: %d", n)
	}

	h.fs.ClearRules()
	if err := h.c.Cancel(context.Background(), id); err != nil {
		t.Fatalf("cancel after the fault cleared: %v", err)
	}
	if n := h.count(id, "turn.cancelled"); n != 1 {
		t.Fatalf("turn.cancelled logged %d times, want 1", n)
	}
	if s := h.statusOf(id); s != "idle" {
		t.Fatalf("status %s after cancel, want idle", s)
	}
	if m, _ := h.c.Inspect(context.Background(), id); m.Degraded != "" {
		t.Fatalf("still degraded: %v", m.Degraded)
	}
	h.crash(faultfs.PowerLoss)
	if s := h.statusOf(id); s != "idle" {
		t.Fatalf("status after recovery %s, want idle", s)
	}
	if n := h.count(id, "run.interrupted"); n != 0 {
		t.Fatalf("recovery found the cancelled run open (%d run.interrupted)", n)
	}
}

// turnEndingOnAFullDisk creates agent "lead" on a program that waits
// for the test, starts a turn, makes every write fail with ENOSPC (until
// h.fs.ClearRules) and lets the turn end: its end cannot be logged.
func turnEndingOnAFullDisk(h *harness) (id string, res TurnResult) {
	started, release := make(chan *inproc.Turn, 1), make(chan struct{})
	h.prov.Register("gate", inproc.Signal(started, inproc.Block(release, inproc.Echo)))
	id = h.create("lead", "", "gate")
	done := make(chan TurnResult, 1)
	go func() { res, _ := h.c.Send(context.Background(), id, "x", "", "", nil); done <- res }()
	<-started
	h.fs.Inject(faultfs.Rule{Kind: faultfs.OpAny, Err: syscall.ENOSPC, Sticky: true})
	close(release)
	return id, <-done
}

// TestStuckRunEndsWhenLogHeals: a turn whose end cannot be logged leaves
// its run open in the log; the next turn, once the log accepts appends,
// logs the owed end first.
func TestStuckRunEndsWhenLogHeals(t *testing.T) {
	h := faultHarness(t)
	id, res := turnEndingOnAFullDisk(h)
	if codeOf(res.Err) != protocol.CodeUnavailable {
		t.Fatalf("turn whose turn.complete cannot be logged: %+v, want code 6", res)
	}
	if n := h.count(id, "turn.complete"); n != 0 {
		t.Fatalf("turn.complete logged %d times under ENOSPC", n)
	}
	h.fs.ClearRules()
	h.prov.Register("gate", inproc.Echo)
	if res := h.send(id, "y"); res.Response != "echo: y" {
		t.Fatalf("send after heal: %+v", res)
	}
	var got []string
	for _, e := range h.entries(id) {
		if strings.HasPrefix(e.Event, "turn.") {
			got = append(got, e.Event)
		}
	}
	if want := "[turn.start turn.failed turn.start turn.complete]"; fmt.Sprint(got) != want {
		t.Fatalf("turn entries %v, want %s (the owed end before the next turn)", got, want)
	}
}

// TestManyAgentsSmallHandleCap: 2,000 agents with a cap of 16 open logs all
// take turns, and the files open at once (counted at the filesystem) stay
// within what the cap allows: two per log (log and pending file) plus the
// USER inbox's.
func TestManyAgentsSmallHandleCap(t *testing.T) {
	const agents, capLogs = 2000, 16
	var cfs *openCountFS
	h := newHarness(t, func(h *harness) {
		h.maxOpenLogs = capLogs
		h.noWake = true
		h.wrapFS = func(fsys faultfs.FS) faultfs.FS {
			cfs = &openCountFS{FS: fsys}
			return cfs
		}
	})
	ids := make([]string, agents)
	for i := range ids {
		ids[i] = h.create(fmt.Sprintf("a%d", i), "", "echo")
	}
	for i, id := range ids {
		if res := h.send(id, fmt.Sprintf("m%d", i)); res.Response != fmt.Sprintf("echo: m%d", i) {
			t.Fatalf("agent %d: %+v", i, res)
		}
	}
	if n := h.c.OpenLogs(); n < 1 || n > capLogs {
		t.Fatalf("%d logs hold handles (the daemon.status count), want 1 to the cap, %d", n, capLogs)
	}
	// Two per log; a reader of a log (history for a session restore) opens
	// one more for a moment, and so does the checkpoint writer (one write at
	// a time).
	if max := cfs.maxOpen(); max > 2*capLogs+3 {
		t.Fatalf("%d log files were open at once; the cap allows %d", max, 2*capLogs+3)
	}
	t.Logf("log files open at most: %d (cap %d logs)", cfs.maxOpen(), capLogs)
	h.crash(faultfs.ProcessCrash)
	for i, id := range ids[:50] {
		if n := h.count(id, "turn.complete"); n != 1 {
			t.Fatalf("agent %d: %d turn.complete after recovery", i, n)
		}
	}
}

// TestBadModelOnSendIsInvalid: a send naming an unknown model or provider
// is code 2 and changes nothing: the agent keeps its preference, and a
// failed run does not change it either.
func TestBadModelOnSendIsInvalid(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.noWake = true })
	id := h.create("a", "", "echo")
	for _, c := range []struct{ prov, model string }{{"", "no-such-model"}, {"no-such-provider", ""}, {"no-such-provider", "echo"}} {
		_, err := h.c.Send(context.Background(), id, "x", c.prov, c.model, nil)
		if codeOf(err) != protocol.CodeInvalid {
			t.Fatalf("send with provider %q model %q: %v, want code 2", c.prov, c.model, err)
		}
	}
	// A model the provider knows but whose run fails.
	h.prov.Register("broken", inproc.FailPermanent(inproc.Echo))
	if res, err := h.c.Send(context.Background(), id, "x", "", "broken", nil); err != nil || res.Err == nil {
		t.Fatalf("send to a failing model: %+v, %v", res, err)
	}
	m, _ := h.c.Inspect(context.Background(), id)
	if m.Provider != "inproc" || m.Model != "echo" {
		t.Fatalf("preference after bad sends: %v/%v, want inproc/echo", m.Provider, m.Model)
	}
	if res := h.send(id, "y"); res.Response != "echo: y" {
		t.Fatalf("a later send without overrides: %+v", res)
	}
	// A run that completes on another model does become the preference.
	h.prov.Register("other", inproc.Reply("other"))
	if res, err := h.c.Send(context.Background(), id, "z", "", "other", nil); err != nil || res.Response != "other" {
		t.Fatalf("send on another model: %+v %v", res, err)
	}
	h.crash(faultfs.ProcessCrash)
	if m, _ := h.c.Inspect(context.Background(), id); m.Model != "other" {
		t.Fatalf("preference after recovery %v, want other", m.Model)
	}
}

// openCountFS counts the event log files (*.jsonl, *.pending) open
// through it, now and at most.
type openCountFS struct {
	faultfs.FS
	mu        sync.Mutex
	open, max int
}

type openCountFile struct {
	faultfs.File
	c    *openCountFS
	once sync.Once
}

func (c *openCountFS) OpenFile(name string, flag int, perm fs.FileMode) (faultfs.File, error) {
	f, err := c.FS.OpenFile(name, flag, perm)
	if err != nil || !(strings.HasSuffix(name, ".jsonl") || strings.HasSuffix(name, ".pending")) {
		return f, err
	}
	c.mu.Lock()
	c.open++
	c.max = max(c.max, c.open)
	c.mu.Unlock()
	return &openCountFile{File: f, c: c}, nil
}

func (f *openCountFile) Close() error {
	f.once.Do(func() {
		f.c.mu.Lock()
		f.c.open--
		f.c.mu.Unlock()
	})
	return f.File.Close()
}

func (c *openCountFS) maxOpen() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.max
}
