package eventlog

import (
	"container/list"
	"fmt"
	"io"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/warren-dev/warren/eventlog/record"
	"github.com/warren-dev/warren/faultfs"
)

// Options configures a Log. The zero value is usable.
type Options struct {
	// Logger receives recovery and failure reports. Nil means no logging.
	Logger hclog.Logger
	// Now stamps entries. Nil means time.Now.
	Now func() time.Time
	// OnAppend, if set, is called with each committed group of entries in
	// seq order after they are durable and before their appenders return.
	// It runs on the committing goroutine and holds up later appends, so it
	// must be quick and must not append to the same log.
	OnAppend func([]Entry)
	// Replay, if set, is called by Open with every entry of the recovered
	// log in seq order: the good prefix as it is checked, then the entries
	// replayed from the pending file. Recovery reads each line once. An
	// error from Replay fails Open. If Open then fails (say, ErrCorrupt),
	// Replay has seen the good prefix before the damage.
	Replay func(Entry) error
	// ReplayBorrows lends Replay each entry of the log's good prefix with
	// Data in Open's read buffer, valid only until Replay returns (a Replay
	// that keeps data copies it), instead of a copy per line. Entries
	// replayed from the pending file are not affected.
	ReplayBorrows bool
	// ReadBuffer, if it has a capacity, is the buffer Open reads the log
	// into when it scans it from the start (a larger one is made for a
	// longer line). It is Open's until Open returns: a caller opening
	// many logs one after another lends each the same one instead of a
	// new buffer per log.
	ReadBuffer []byte
	// Resume, if set, starts Open's scan after the line it names instead of
	// at the start of the file (see Resume). Replay then sees only the
	// entries after it. Open returns an error wrapping ErrResumeMismatch,
	// having changed nothing, when that line is not where Resume says.
	Resume *Resume
	// PendingIdle is how long the pending file is kept open for reuse after
	// the last group before it is removed (see the package documentation).
	// Zero means DefaultPendingIdle; a negative value keeps it until Close,
	// which crash tests use so that no timer adds operations.
	PendingIdle time.Duration
	// HealBackoff is how long a handle poisoned by a failed write waits
	// before it tries to reopen the log (on the next append, or from a
	// timer if none comes); each failed attempt doubles it, up to
	// MaxHealBackoff. Zero means DefaultHealBackoff. A negative value means
	// no wait and no timer: every append on a poisoned handle first tries
	// to reopen it (tests use it so that only their own calls act).
	HealBackoff time.Duration
	// OnHeal, if set, is called after a poisoned handle was reopened and
	// accepts appends again, on the goroutine that reopened it, after it
	// let go of the log: it may append.
	OnHeal func()
	// Files, if set, caps the logs holding open handles (see Files).
	Files *Files
	// Syncer, if set, shares the write protocol's fsyncs with the other
	// logs using it (see Syncer). Nil means an fsync per file.
	Syncer *Syncer
	// MustExist makes Open fail with an error wrapping fs.ErrNotExist
	// instead of creating a missing log (or its directory). Recovery uses
	// it so that it never creates an empty log beside a snapshot.
	MustExist bool
}

// DefaultPendingIdle is the default Options.PendingIdle.
const DefaultPendingIdle = time.Second

// Log is an open event log. Its methods are safe for concurrent use.
type Log struct {
	fsys        faultfs.FS
	path        string
	pendingPath string
	dir         string
	logger      hclog.Logger
	now         func() time.Time
	onAppend    func([]Entry)
	onHeal      func()
	replay      func(Entry) error
	borrow      bool   // Options.ReplayBorrows
	readBuf     []byte // Options.ReadBuffer, until recover starts its scan
	files       *Files
	elem        *list.Element // in files' LRU while handles are open; guarded by files.mu
	syncer      *Syncer
	dev         uint64 // the log's filesystem (faultfs.Device), for syncer
	maxLine     int    // MaxLineBytes; smaller in tests
	// mustSync holds the directories whose fsync Open cannot do without.
	mustSync map[string]bool
	// The lines Open skipped by resuming (see VerifyPrefix).
	verified  atomic.Bool
	verifyMu  sync.Mutex
	resumed   *Resume
	verifyErr error

	mu      sync.Mutex
	idle    *sync.Cond // signalled when leading turns false
	queue   []*waiter
	leading bool
	closed  bool
	poison  error
	lastSeq uint64 // last durable seq
	// Healing a poisoned handle (heal.go).
	poisonedAt time.Time
	healErr    error // why the last reopen attempt failed
	broken     error // the file changed under the handle: no reopen until restart
	healBase   time.Duration
	healWait   time.Duration
	healAt     time.Time // earliest next reopen attempt
	healTimer  *time.Timer
	// released is the number of callers a promoted leader waits for (see
	// commit).
	released int
	// The pending file's idle removal (pending_write.go).
	pendingIdle time.Duration
	lastGroup   time.Time   // when the last group committed
	retire      *time.Timer // armed while pf is open; nil before the first
	retireArmed bool
	retired     func() // test hook: called after each idle removal

	// Owned by the current leader. f is nil while the handles are closed
	// (Files' cap, or a failure); size and nextSeq are what reopening needs.
	f       faultfs.File
	nextSeq uint64 // seq of the next entry to write
	size    int64  // bytes of the acknowledged entries
	// logTouched: a write to the log failed; bytes past size are its
	// unacknowledged remains.
	logTouched bool
	buf        []byte
	// pf is the pending file, open for in-place reuse between groups (nil
	// when it is absent); pfDurable says its directory entry was fsynced.
	pf        faultfs.File
	pfDurable bool
	// deferred holds the directories a new log's Open left to the first
	// group's flush, deepest first (with a Syncer; see doc.go step 4); nil
	// once they and the log file are durable.
	deferred []string
}

// maxJoinYields bounds how often a promoted leader yields to let callers
// just released re-join the queue before it takes the queue as its group.
const maxJoinYields = 64

// waiter is one Append or AppendBatch call waiting in the commit queue.
type waiter struct {
	recs    []record.Prepared
	entries []Entry
	err     error
	done    bool          // set under mu when entries/err are final
	wake    chan struct{} // receives once: done, or promoted to leader
}

// Path returns the log's path.
func (l *Log) Path() string { return l.path }

// LastSeq returns the seq of the last durable entry (0 for an empty log).
func (l *Log) LastSeq() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lastSeq
}

// Append appends one entry and returns once it is durable. Concurrent
// callers share one pending-file write and one fsync.
func (l *Log) Append(event string, data any) (Entry, error) {
	p, err := record.Prepare(Record{Event: event, Data: data}, l.maxLine)
	if err != nil {
		return Entry{}, err
	}
	es, err := l.commit([]record.Prepared{p})
	if err != nil {
		return Entry{}, err
	}
	return es[0], nil
}

// AppendBatch appends several entries with consecutive seqs, all or none:
// after a crash either every one of them is in the log or none is. It
// returns once they are durable.
func (l *Log) AppendBatch(recs []Record) ([]Entry, error) {
	if len(recs) == 0 {
		return nil, nil
	}
	ps := make([]record.Prepared, len(recs))
	for i, r := range recs {
		p, err := record.Prepare(r, l.maxLine)
		if err != nil {
			return nil, fmt.Errorf("record %d: %w", i, err)
		}
		ps[i] = p
	}
	return l.commit(ps)
}

// commit queues recs and returns when they are durable or have failed. The
// first caller to find no active leader becomes the leader: it writes the
// whole queue as one group, wakes its members, and hands leadership to the
// first caller that queued meanwhile.
func (l *Log) commit(recs []record.Prepared) ([]Entry, error) {
	if err := l.VerifyPrefix(); err != nil {
		return nil, fmt.Errorf("eventlog: append to %s refused: %w", l.path, err)
	}
	w := &waiter{recs: recs, wake: make(chan struct{}, 1)}
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil, fmt.Errorf("eventlog: append to %s: %w", l.path, ErrClosed)
	}
	if l.poison != nil && !l.healDue() {
		err := l.poisonedErr()
		l.mu.Unlock()
		return nil, err
	}
	l.queue = append(l.queue, w)
	if l.leading {
		l.mu.Unlock()
		<-w.wake
		l.mu.Lock()
		if w.done {
			l.mu.Unlock()
			return w.entries, w.err
		}
		// Promoted: this caller leads the next group.
	} else {
		l.leading = true
	}
	// The callers of the group just committed were woken together and
	// usually append again at once; give them a moment (bounded yields, no
	// timer) to join this group rather than form one of their own. A lone
	// writer finds itself the only caller expected and does not yield.
	for i := 0; i < maxJoinYields && len(l.queue) < l.released; i++ {
		l.mu.Unlock()
		runtime.Gosched()
		l.mu.Lock()
	}
	group := l.queue
	l.queue = nil
	poisoned := l.poison != nil
	heal := poisoned && l.healDue()
	var err error
	if poisoned && !heal {
		err = l.poisonedErr()
	}
	l.mu.Unlock()

	var acked bool
	var reopenErr error
	if err == nil {
		acked, reopenErr, err = l.writeLeading(group, heal)
	}

	l.mu.Lock()
	if heal {
		l.settleHeal(reopenErr)
	}
	l.settleGroup(group, w, poisoned && !(heal && reopenErr == nil), acked, reopenErr, err)
	healed := heal && acked
	if acked {
		l.lastGroup = time.Now()
		l.armRetire()
	}
	// Callers expected back soon: the group just released plus those
	// already queued.
	l.released = len(group) + len(l.queue)
	l.handOff()
	l.mu.Unlock()
	if healed && l.onHeal != nil {
		l.onHeal()
	}
	return w.entries, w.err
}

// writeLeading writes a group as its leader, without l.mu. A poisoned
// handle due for a retry (heal) is reopened first, and a handle closed for
// the Files cap is reopened cheaply; if that fails (reopenErr) the group is
// refused and nothing was written. A group that was written and not
// acknowledged drops the handles.
func (l *Log) writeLeading(group []*waiter, heal bool) (acked bool, reopenErr, err error) {
	if heal || l.f == nil {
		if reopenErr = l.reopen(heal); reopenErr != nil {
			return false, reopenErr, nil
		}
	} else if l.files != nil {
		l.files.touch(l)
	}
	acked, err = l.writeGroup(group)
	if acked && l.onAppend != nil {
		var all []Entry
		for _, g := range group {
			all = append(all, g.entries...)
		}
		l.onAppend(all)
	}
	if !acked {
		l.dropHandles()
	}
	return acked, nil, err
}

// settleGroup records a group's outcome, under l.mu: the handle poisoned
// when the write or the reopen failed, lastSeq advanced when it was
// acknowledged, and every member given its result (refused: the handle was
// and stays poisoned, nothing written) and woken, except w, the leader.
func (l *Log) settleGroup(group []*waiter, w *waiter, refused, acked bool, reopenErr, err error) {
	switch {
	case refused:
		// Still poisoned: refused with the reason, nothing written.
		err = l.poisonedErr()
	case reopenErr != nil:
		// The cheap reopen failed (say, EMFILE): nothing was written,
		// but the handle is unusable until reopened.
		err = reopenErr
		l.poisonLocked(err)
	case err != nil:
		l.poisonLocked(err)
	}
	if acked {
		l.lastSeq = l.nextSeq - 1
	}
	for _, g := range group {
		g.done = true
		switch {
		case acked:
			g.err = nil
		case refused:
			g.entries, g.err = nil, err
		default:
			g.entries = nil
			g.err = fmt.Errorf("eventlog: append to %s failed and is not acknowledged: %w (%w)", l.path, err, ErrPoisoned)
		}
		if g != w {
			g.wake <- struct{}{}
		}
	}
}

// handOff ends the current leadership: it wakes the first queued caller to
// lead the next group, or marks the log idle. l.mu must be held.
func (l *Log) handOff() {
	if len(l.queue) > 0 {
		l.queue[0].wake <- struct{}{}
	} else {
		l.leading = false
		l.idle.Broadcast()
	}
}

// poisonedErr describes why a poisoned handle refuses appends. l.mu must be
// held.
func (l *Log) poisonedErr() error {
	switch {
	case l.broken != nil:
		return fmt.Errorf("eventlog: append to %s refused: %w (cause: %v); restart the daemon to check the log", l.path, ErrPoisoned, l.broken)
	case l.healErr != nil && l.healBase < 0:
		return fmt.Errorf("eventlog: append to %s refused: %w (cause: %v; reopening failed: %v)", l.path, ErrPoisoned, l.poison, l.healErr)
	case l.healErr != nil:
		return fmt.Errorf("eventlog: append to %s refused: %w (cause: %v; reopening failed: %v; next attempt in %s)",
			l.path, ErrPoisoned, l.poison, l.healErr, l.retryIn())
	case l.healBase > 0:
		return fmt.Errorf("eventlog: append to %s refused: %w (cause: %v; it is reopened automatically, next attempt in %s)",
			l.path, ErrPoisoned, l.poison, l.retryIn())
	case l.healBase < 0:
		return fmt.Errorf("eventlog: append to %s refused: %w (cause: %v; the next append tries to reopen it)", l.path, ErrPoisoned, l.poison)
	}
	return fmt.Errorf("eventlog: append to %s refused: %w (cause: %v)", l.path, ErrPoisoned, l.poison)
}

// retryIn is the time left before the next reopen attempt. l.mu must be
// held.
func (l *Log) retryIn() time.Duration {
	return max(time.Until(l.healAt), 0).Round(time.Millisecond)
}

// writeGroup runs the write protocol for one group: the pending file
// (written in place, fsynced, and its directory fsynced when the group holds
// a multi-record batch), then one write and fsync of the log. The pending
// file stays for the next group; retirePending removes it once the log is
// idle. acked reports whether the entries are durable in the log; err is
// non-nil when the handle must be poisoned.
func (l *Log) writeGroup(group []*waiter) (acked bool, err error) {
	ts := l.now().UTC().Truncate(time.Millisecond)
	seq := l.nextSeq
	buf := l.buf[:0]
	base := l.size
	for _, g := range group {
		g.entries = make([]Entry, len(g.recs))
		for i := range g.recs {
			p := &g.recs[i]
			off := base + int64(len(buf))
			buf = record.AppendLine(buf, seq, ts, p)
			g.entries[i] = Entry{Seq: seq, TS: ts, Event: p.Event, Data: p.Data, Off: off}
			seq++
		}
	}
	lines := len(buf)
	nlines := int(seq - l.nextSeq)
	buf = record.AppendTrailer(buf, nlines)
	if cap(buf) <= 1<<20 {
		l.buf = buf
	}
	if err := l.writePending(buf); err != nil {
		return false, err
	}
	buf = buf[:lines]
	l.logTouched = true
	mark := l.syncMark()
	n, err := l.f.Write(buf)
	if err == nil && n != len(buf) {
		err = fmt.Errorf("wrote %d of %d bytes: %w", n, len(buf), io.ErrShortWrite)
	}
	if err != nil {
		return false, fmt.Errorf("write %s: %w", l.path, err)
	}
	if _, err := l.syncFile(l.f, mark, false); err != nil {
		return false, fmt.Errorf("fsync %s: %w", l.path, err)
	}
	l.nextSeq = seq
	l.size += int64(len(buf))
	l.logTouched = false
	return true, nil
}

// syncMark is what the Syncer needs noted before a write that syncFile
// will sync (Syncer.mark); 0 without a Syncer. Called by the leader.
func (l *Log) syncMark() uint64 {
	if l.syncer == nil {
		return 0
	}
	return l.syncer.mark(l.dev, l.dir)
}

// syncFile is the write protocol's fsync of f (the log or its pending
// file), written after mark was taken: through the Syncer when the log has
// one. With whole the caller needs the directory entries it made durable
// too; all reports that the flush did that (a syncfs), so that otherwise
// the caller syncs them itself. Called by the leader.
func (l *Log) syncFile(f faultfs.File, mark uint64, whole bool) (all bool, err error) {
	if l.syncer == nil {
		return false, f.Sync()
	}
	return l.syncer.sync(l.dev, l.dir, f, whole, mark)
}

// VerifyPrefix checks, once, the lines an Open with Options.Resume skipped
// (see Verify) and returns the result: nil, or a *CorruptError that every
// later append returns too, so that nothing is appended on top of a
// damaged prefix. For a log opened without Resume it returns nil at once.
// The first append calls it; a scrub may call it earlier.
func (l *Log) VerifyPrefix() error {
	if l.verified.Load() {
		return nil
	}
	l.verifyMu.Lock()
	defer l.verifyMu.Unlock()
	if l.resumed != nil {
		err := Verify(l.fsys, l.path, *l.resumed)
		if err != nil && !errorsIsCorrupt(err) {
			return err // a read error: try again next time
		}
		l.verifyErr, l.resumed = err, nil
	}
	if l.verifyErr != nil {
		return l.verifyErr
	}
	l.verified.Store(true)
	return nil
}

// closeLocked marks the log closed, waits (l.mu held) until no append
// leads, and stops its timers: the first step of Close and Abandon.
func (l *Log) closeLocked() {
	l.closed = true
	for l.leading {
		l.idle.Wait()
	}
	if l.retire != nil {
		l.retire.Stop()
	}
	if l.healTimer != nil {
		l.healTimer.Stop()
	}
}

// Close waits for in-progress appends and closes the log, removing the
// pending file unless the handle is poisoned (then a complete group in it
// may still be replayed by the next Open). Appends after Close return
// ErrClosed. Closing twice is a no-op.
func (l *Log) Close() error {
	l.mu.Lock()
	if l.closed {
		l.mu.Unlock()
		return nil
	}
	l.closeLocked()
	f, pf, poisoned := l.f, l.pf, l.poison != nil
	l.f, l.pf = nil, nil
	l.mu.Unlock()
	l.forgetFiles()
	var err error
	if pf != nil {
		err = l.dropPending(pf, !poisoned)
	}
	if f != nil {
		if cerr := f.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("eventlog: close %s: %w", l.path, cerr)
		}
	}
	return err
}
