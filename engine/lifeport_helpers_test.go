package engine

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"path"
	"strings"
	"sync"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/checkpoint"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/eventlog/record"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/session"
	"github.com/warren-dev/warren/store"
	"github.com/warren-dev/warren/store/local"
)

// Helpers of the tests ported from the engine's former internal packages
// waits and lifecycle (waits_port_test.go, resume_test.go, create_test.go,
// spawn_test.go, terminate_test.go). Those tests drove the packages
// through recording fakes and checked the order of the calls; these check
// the durable effects through a real Core: the log's writes, session.json,
// the tree, the errors and the inbox messages.

// groupWrites is a filesystem (harness wrapFS) that records, for each
// agent, the events of each write to its events.jsonl joined by "+": the
// event log writes a committed group in one write (eventlog's
// writeGroup), so "agent.created+session.created" is one write. Group
// commit joins only appends that come concurrently to the same log; the
// tests that read these writes append to a log from one goroutine at a
// time.
type groupWrites struct {
	faultfs.FS
	mu sync.Mutex
	w  map[string][]string // agent id -> the events of each write
}

// recordWrites installs lw as the harness's filesystem wrapper (over the
// same crashable filesystem at every start: set once, so that a core
// abandoned by a crash may still read it).
func recordWrites(lw *groupWrites) func(h *harness) {
	return func(h *harness) {
		h.wrapFS = func(fsys faultfs.FS) faultfs.FS {
			if lw.FS == nil {
				lw.FS = fsys
			}
			return lw
		}
	}
}

func (l *groupWrites) OpenFile(name string, flag int, perm fs.FileMode) (faultfs.File, error) {
	f, err := l.FS.OpenFile(name, flag, perm)
	if err != nil || path.Base(name) != "events.jsonl" {
		return f, err
	}
	return &groupWritesFile{File: f, l: l, id: path.Base(path.Dir(name))}, nil
}

// of lists the writes to agent id's log so far.
func (l *groupWrites) of(id string) []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]string(nil), l.w[id]...)
}

type groupWritesFile struct {
	faultfs.File
	l  *groupWrites
	id string
}

func (f *groupWritesFile) Write(p []byte) (int, error) {
	n, err := f.File.Write(p)
	if err != nil {
		return n, err
	}
	var events []string
	for _, line := range bytes.SplitAfter(p[:n], []byte("\n")) {
		if e, perr := record.ParseLine(bytes.TrimSuffix(line, []byte("\n"))); perr == nil {
			events = append(events, e.Event)
		}
	}
	if len(events) > 0 {
		f.l.mu.Lock()
		if f.l.w == nil {
			f.l.w = map[string][]string{}
		}
		f.l.w[f.id] = append(f.l.w[f.id], strings.Join(events, "+"))
		f.l.mu.Unlock()
	}
	return n, nil
}

// hasWrite fails the test unless one write of agent id's log is exactly
// want ("a+b": those records, in that order, in one write).
func hasWrite(t *testing.T, lw *groupWrites, id, want string) {
	t.Helper()
	ws := lw.of(id)
	for _, w := range ws {
		if w == want {
			return
		}
	}
	t.Fatalf("no write of %s's log is %q; its writes: %q", id, want, ws)
}

// writesFollow reports whether writes holds want as consecutive writes.
func writesFollow(writes []string, want ...string) bool {
	for i := 0; i+len(want) <= len(writes); i++ {
		if strings.Join(writes[i:i+len(want)], "\n") == strings.Join(want, "\n") {
			return true
		}
	}
	return false
}

// effects lists the filesystem changes since the first n ops of h.fs
// (len(h.fs.Ops())), less what the core does in the background on its
// own timers: the checkpoints, and the removal of a log's pending file
// once the log is idle (eventlog's PendingIdle); and less the directory
// syncs (every change that matters comes with others).
func effects(h *harness, n int) []faultfs.Op {
	var out []faultfs.Op
	for _, op := range h.fs.Ops()[n:] {
		switch {
		case op.Kind == faultfs.OpSyncDir:
		case strings.Contains(op.Path, checkpoint.Name) || strings.Contains(op.To, checkpoint.Name):
		case op.Kind == faultfs.OpRemove && path.Base(op.Path) == "events.pending":
		default:
			out = append(out, op)
		}
	}
	return out
}

// probeCtx is a context whose Done, the first time it is called, closes
// asked. A resume calls its context's Done only when it starts to wait
// (for the turn that logged the wait to unwind, or for the first resume's
// result), so asked tells the test, without a sleep, that it waits.
type probeCtx struct {
	context.Context
	once  sync.Once
	asked chan struct{}
}

func newProbeCtx() *probeCtx {
	return &probeCtx{Context: context.Background(), asked: make(chan struct{})}
}

func (p *probeCtx) Done() <-chan struct{} {
	p.once.Do(func() { close(p.asked) })
	return p.Context.Done()
}

// lifeProv is the harness's inproc provider, under its name "inproc",
// counting the sessions it creates and those stopped (restored ones
// included); while createErr is set, Create fails with it.
type lifeProv struct {
	*inproc.Provider
	mu        sync.Mutex
	createErr error
	created   []string // handles
	stopped   []string // handles
}

// withLifeProv puts lp (over the harness's inproc provider) in its place.
func withLifeProv(lp *lifeProv) func(h *harness) {
	return func(h *harness) {
		lp.Provider = h.prov
		h.extra = map[string]provider.Provider{"inproc": lp}
	}
}

func (p *lifeProv) Create(ctx context.Context, spec provider.Spec) (provider.Session, error) {
	p.mu.Lock()
	err := p.createErr
	p.mu.Unlock()
	if err != nil {
		return nil, err
	}
	s, err := p.Provider.Create(ctx, spec)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.created = append(p.created, s.Handle())
	p.mu.Unlock()
	return &lifeSess{Session: s, p: p}, nil
}

// Restore restores through the inproc provider; the session restored is
// counted as Create's are.
func (p *lifeProv) Restore(ctx context.Context, spec provider.Spec, blob []byte, handle string) (provider.Session, error) {
	s, err := p.Provider.Restore(ctx, spec, blob, handle)
	if err != nil {
		return nil, err
	}
	return &lifeSess{Session: s, p: p}, nil
}

func (p *lifeProv) failCreate(err error) {
	p.mu.Lock()
	p.createErr = err
	p.mu.Unlock()
}

// counts is how many sessions were created and stopped so far.
func (p *lifeProv) counts() (created, stopped int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.created), len(p.stopped)
}

// wasStopped reports whether the session of handle was stopped.
func (p *lifeProv) wasStopped(handle string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, s := range p.stopped {
		if s == handle {
			return true
		}
	}
	return false
}

type lifeSess struct {
	provider.Session
	p *lifeProv
}

func (s *lifeSess) Stop() error {
	s.p.mu.Lock()
	s.p.stopped = append(s.p.stopped, s.Handle())
	s.p.mu.Unlock()
	return s.Session.Stop()
}

// stepStore holds the agents' log steps that fail on the test's word: an
// append (refused before anything is written, as a store other than the
// files may refuse one without poisoning the log) and Close. The
// harness's store is store/local on its files with these steps
// (stepStoreOn), a new one at each start.
type stepStore struct {
	mu        sync.Mutex
	appendErr map[string]error
	closeErr  map[string]error
}

// withStepStore makes the harness's store store/local with s's steps.
func withStepStore(s *stepStore) func(h *harness) {
	return func(h *harness) {
		h.store = func(fsys faultfs.FS) store.Store {
			return &stepStoreOn{Store: local.New(local.Options{FS: fsys, Home: "/home"}), s: s}
		}
	}
}

// refuse makes agent id's appends fail with err (nil: succeed again).
func (s *stepStore) refuse(id string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.appendErr == nil {
		s.appendErr = map[string]error{}
	}
	s.appendErr[id] = err
}

// failClose makes the Close of agent id's log fail with err.
func (s *stepStore) failClose(id string, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closeErr == nil {
		s.closeErr = map[string]error{}
	}
	s.closeErr[id] = err
}

func (s *stepStore) errs(id string) (appendErr, closeErr error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.appendErr[id], s.closeErr[id]
}

// stepStoreOn is store/local whose agents' logs take s's steps.
type stepStoreOn struct {
	*local.Store
	s *stepStore
}

func (o *stepStoreOn) OpenLog(ctx context.Context, id string, opts store.LogOptions) (store.Log, error) {
	lg, err := o.Store.OpenLog(ctx, id, opts)
	if err != nil {
		return nil, err
	}
	return &stepLog{Log: lg, s: o.s, id: id}, nil
}

type stepLog struct {
	store.Log
	s  *stepStore
	id string
}

func (l *stepLog) Append(event string, data any) (eventlog.Entry, error) {
	if err, _ := l.s.errs(l.id); err != nil {
		return eventlog.Entry{}, err
	}
	return l.Log.Append(event, data)
}

func (l *stepLog) AppendBatch(recs []eventlog.Record) ([]eventlog.Entry, error) {
	if err, _ := l.s.errs(l.id); err != nil {
		return nil, err
	}
	return l.Log.AppendBatch(recs)
}

func (l *stepLog) Close() error {
	err := l.Log.Close()
	if _, cerr := l.s.errs(l.id); cerr != nil {
		return cerr
	}
	return err
}

// logBuf is a log output the test reads.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// captureLog turns the harness core's logging on, at every level, into the
// returned buffer (the operator's log of what it did), from the actions
// after the call. The core's logger stays the one it was given, so its
// background work (the scrub after a recovery) may log at the same time.
func captureLog(h *harness) *logBuf {
	lb := &logBuf{}
	h.tap.set(lb)
	h.c.log.SetLevel(hclog.Trace)
	return lb
}

// logTap is the harness's log output, moved under a lock.
type logTap struct {
	mu sync.Mutex
	to io.Writer // nil: nowhere
}

func (t *logTap) set(w io.Writer) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.to = w
}

func (t *logTap) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.to == nil {
		return len(p), nil
	}
	return t.to.Write(p)
}

// savedSession is agent id's session.json once the snapshot writes in
// flight have landed (the harness runs with saveDelay -1).
func savedSession(t *testing.T, h *harness, id string) *session.Session {
	t.Helper()
	h.c.snaps.Wait()
	s, err := session.NewStore(h.fs, "/home/agents").Load(id)
	if err != nil {
		t.Fatalf("session.json of %s: %v", id, err)
	}
	return s
}

// held is a program that signals started and then waits, ignoring its
// turn's context, for release; then it runs prog.
func held(started chan<- struct{}, release <-chan struct{}, prog inproc.Program) inproc.Program {
	return func(ctx context.Context, tr *inproc.Turn) (string, error) {
		started <- struct{}{}
		<-release
		return prog(ctx, tr)
	}
}

// busyAgent starts a send to agent id whose program (held) waits on
// release, and returns once the turn runs; the send's result comes on
// the returned channel.
func busyAgent(h *harness, id string, started <-chan struct{}) <-chan TurnResult {
	done := make(chan TurnResult, 1)
	go func() {
		res, err := h.c.Send(context.Background(), id, "work", "", "", nil)
		if err != nil {
			res.Err = err
		}
		done <- res
	}()
	<-started
	return done
}

// errIsNot fails the test if err is one of the engine's domain conditions
// in kinds (the old tests' "not a refusal").
func errIsNot(t *testing.T, err error, kinds ...error) {
	t.Helper()
	for _, k := range kinds {
		if errors.Is(err, k) {
			t.Fatalf("%v is %v", err, k)
		}
	}
}
