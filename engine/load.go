package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"runtime"
	"sync"
	"syscall"
	"time"

	"github.com/warren-dev/warren/checkpoint"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	fold "github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/quarantine"
	"github.com/warren-dev/warren/session"
	"github.com/warren-dev/warren/store"
	"github.com/warren-dev/warren/tree"
)

// Reading agents back at recovery: each agent's log is opened (WAL
// replay, torn-tail repair) and folded into a projection in the same
// pass, starting from the agent's checkpoint when it has a valid one, and
// what was found is said: a state to adopt, a log damaged in the middle
// (with the projection of its good prefix, so a corrupt agent still shows
// its name and parent), no log at all, or a log that could not be opened
// for lack of a resource (retried with a backoff, then marked
// errUnopened). Recovery (recovery.go) decides what each result means for
// the tree.
//
// A checkpoint is an optimisation, never the authority (doc.go,
// "Checkpoints"): one that does not match its log, that disagrees with
// the lines its facts come from (ckptcheck.go), or that names a pending
// message that cannot be read back, makes the load fold the whole log
// instead.
//
// loadAll runs the loads on goroutines of its own (loadWorkers) and
// returns when they are done; each load folds into a projection only it
// holds.

// errUnopened marks an agent whose log recovery could not open for lack
// of a resource.
var errUnopened = errors.New("its log could not be opened for lack of a resource (nothing is damaged or lost; restart the daemon once the cause is gone)")

// errRefusedDir marks an agent directory that is not a directory of the
// home (a symbolic link): recovery never follows it, and lists the agent
// with it; its children are kept (SPEC 9).
var errRefusedDir = errors.New("is a symbolic link, which warren does not follow in its home (an agent's directory must be the directory itself); move the directory back into agents/ and restart the daemon")

// openRetryLimit bounds how long recovery waits for resources to come
// back.
const openRetryLimit = 60 * time.Second

// loaded is one agent read back. When Err is nil and Missing is false,
// Log is open and State is its fold; otherwise Log is nil (closed) and
// State holds what could be folded.
type loaded struct {
	ID    string
	Log   store.Log
	State *fold.State
	// Agent is the record made of it, once recovery lists it.
	Agent *agent
	// Err says why the log cannot be used: damaged in the middle, or
	// errUnopened.
	Err error
	// Missing: there is no log (the directory holds nothing durable).
	Missing bool
	// Resumed is the checkpoint the fold started from (nil: from the
	// start); Checked is its state's fingerprint, which the scrub compares
	// with a fold of the lines it let recovery skip (ckptcheck.go).
	Resumed *eventlog.Resume
	Checked [32]byte
	// bind is where the log's commits find the agent's record
	// (openLogReplay); adopt sets it.
	bind **agent
}

// loadAll loads the agents ids in parallel, in their order, and, with
// retry, retries those a resource fault kept from opening.
func (c *Core) loadAll(ctx context.Context, ids []string, retry bool) []*loaded {
	return c.loadAllRefusing(ctx, ids, nil, retry)
}

// loadAllRefusing is loadAll where the ids in refused (symbolic links in
// agents/) are not opened: each is loaded as damaged, with the refusal.
func (c *Core) loadAllRefusing(ctx context.Context, ids []string, refused map[string]bool, retry bool) []*loaded {
	if h, ok := c.st.(endHinter); ok && len(ids) > 1 {
		defer h.HintEnds(ctx, ids)()
	}
	out := make([]*loaded, len(ids))
	work := make(chan int)
	var wg sync.WaitGroup
	for w := 0; w < c.loadWorkers(); w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			scratch := newLoadScratch()
			for i := range work {
				if refused[ids[i]] {
					out[i] = &loaded{ID: ids[i], State: fold.New(), bind: new(*agent),
						Err: fmt.Errorf("%s %w", c.agentDir(ids[i]), errRefusedDir)}
					continue
				}
				out[i] = c.load(ctx, ids[i], scratch)
			}
		}()
	}
	for i := range ids {
		work <- i
	}
	close(work)
	wg.Wait()
	if retry {
		c.retryOpenFaults(ctx, out)
	}
	for _, l := range out {
		c.adopt(l)
	}
	return out
}

// endHinter is a store that reads the ends of many logs ahead, in a few
// requests, for the opens that follow (store/jetstream, ends.go): each
// open of a cluster store's log otherwise asks the stream leader for its
// end, one round trip per agent.
type endHinter interface {
	HintEnds(ctx context.Context, ids []string) (done func())
}

// loadWorkers is how many loads run at once: 2 x GOMAXPROCS on the local
// store, whose loads read files and fold (CPU and the page cache); at
// least 32 on a cluster store, whose loads mostly wait for the servers'
// answers (a checkpoint, its witnesses, the log's end, the tail, the
// claim: each a round trip). Measured on 1,000 x 1,000 from R1 after a
// clean stop on 2 cores: 1.32 s with 4, 0.91 s with 32 (docs/CLUSTER.md).
func (c *Core) loadWorkers() int {
	n := runtime.GOMAXPROCS(0) * 2
	if c.clustered() {
		return max(n, 32)
	}
	return n
}

// adopt makes the record of an agent whose log opened, with the
// checkpoint it was recovered from, and binds the log's commits to it.
func (c *Core) adopt(l *loaded) {
	if l.Log == nil {
		return
	}
	l.Agent = newAgent(l.ID, l.Log, l.State)
	if l.Resumed != nil && l.Resumed.Len > 0 {
		l.Agent.Ckpt.Seq.Store(l.Resumed.Seq)
	}
	*l.bind = l.Agent
}

// loadScratch is the memory one goroutine's loads lend each log's
// replay in turn (most of what a fold from the start allocates): the
// buffer its lines are read into and the arena its pending messages are
// kept in. Under the daemon's memory limit, a recovery that made them
// anew for every log spent most of its time collecting them (issue 38).
type loadScratch struct {
	read []byte
	fold fold.Scratch
}

// loadReadBuffer is the size of a loadScratch's read buffer.
const loadReadBuffer = 64 << 10

func newLoadScratch() *loadScratch {
	return &loadScratch{read: make([]byte, loadReadBuffer)}
}

// load opens one agent's log and folds it into a projection in the same
// pass, starting from the agent's checkpoint when it has a valid one; s
// lends the replay its memory (nil: its own).
func (c *Core) load(ctx context.Context, id string, s *loadScratch) *loaded {
	if c.opts.CheckpointEvery > 0 {
		data, err := c.ckstore.Load(ctx, id)
		var p *fold.State
		var r eventlog.Resume
		if err == nil {
			p, r, err = checkpoint.Decode(data)
		}
		if err == nil {
			sum, err := c.checkCheckpoint(ctx, id, p, r)
			if err != nil {
				c.log.Warn("checkpoint disagrees with the log or cannot be checked against it; folding the whole log", "agent", id, "err", err)
			} else if l := c.loadFrom(ctx, id, p, &r, s); l != nil {
				l.Checked = sum
				return l
			}
		} else if !errors.Is(err, fs.ErrNotExist) {
			c.log.Warn("checkpoint unusable; folding the whole log", "agent", id, "err", err)
		}
	}
	return c.loadFrom(ctx, id, nil, nil, s)
}

// loadFrom folds the log into p from the resume point r, or into a new
// projection from the start when r is nil. It returns nil when r does not
// match the log or a pending message it names cannot be read back (the
// caller then folds the whole log).
func (c *Core) loadFrom(ctx context.Context, id string, p *fold.State, r *eventlog.Resume, s *loadScratch) *loaded {
	l := &loaded{ID: id, State: p, Resumed: r, bind: new(*agent)}
	var buf []byte
	if p == nil {
		l.State = fold.New()
		if s != nil {
			l.State.BeginReplay(&s.fold)
			buf = s.read
		} else {
			l.State.BeginReplay(nil)
		}
	}
	var foldErr error
	lg, err := c.openLogReplay(ctx, id, l.bind, r, buf, func(e eventlog.Entry) error {
		if foldErr == nil {
			foldErr = l.State.Apply(e)
		}
		return nil
	})
	if r != nil && errors.Is(err, eventlog.ErrResumeMismatch) {
		c.log.Warn("checkpoint does not match the log; folding the whole log", "agent", id, "err", err)
		return nil
	}
	if foldErr == nil {
		// Counted from the start, so that the pending payloads held in
		// memory stay within the daemon's bound (c.pending.SetHeldMax)
		// while they are read back; an agent that is not served is
		// detached again (classify).
		l.State.Pending.Attach(&c.pending)
		foldErr = l.State.EndReplayMany(c.pendingLoader(ctx, id))
		if foldErr != nil && r != nil && err == nil {
			l.State.Pending.Attach(nil)
			c.log.Warn("checkpoint names a pending message that cannot be read; folding the whole log", "agent", id, "err", foldErr)
			_ = lg.Close()
			return nil
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		l.Missing = true // recovery decides: orphan or quarantine
		return l
	}
	if err != nil {
		l.Err = err
		return l
	}
	if foldErr != nil {
		l.Err = fmt.Errorf("%s: %w", c.logPath(id), foldErr)
		_ = lg.Close()
		return l
	}
	l.Log = lg
	return l
}

// resourceFault reports whether err is a lack of a resource that may
// come back (disk space, descriptors, memory, a read-only remount, a
// cluster that does not answer), rather than damage.
func resourceFault(err error) bool {
	if errors.Is(err, store.ErrUnavailable) {
		return true
	}
	for _, e := range []error{syscall.ENOSPC, syscall.EMFILE, syscall.ENFILE, syscall.ENOMEM, syscall.EDQUOT, syscall.EROFS} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// retryOpenFaults loads again, with a backoff (100 ms doubling to 5 s,
// openRetryLimit in all), the agents a resource fault kept from opening;
// those still failing are marked errUnopened.
func (c *Core) retryOpenFaults(ctx context.Context, all []*loaded) {
	var failing []int
	for i, l := range all {
		if l.Err != nil && resourceFault(l.Err) {
			failing = append(failing, i)
		}
	}
	wait, waited := 100*time.Millisecond, time.Duration(0)
	for len(failing) > 0 && waited < openRetryLimit {
		first := all[failing[0]]
		c.log.Warn("cannot open agent logs for lack of a resource; recovery waits and retries", "agents", len(failing),
			"agent", first.ID, "err", first.Err, "retry_in", wait)
		if err := c.opts.Sleep(ctx, wait); err != nil {
			break
		}
		waited += wait
		wait = min(wait*2, 5*time.Second)
		next := failing[:0]
		for _, i := range failing {
			all[i] = c.load(ctx, all[i].ID, nil)
			if all[i].Err != nil && resourceFault(all[i].Err) {
				next = append(next, i)
			}
		}
		failing = next
	}
	for _, i := range failing {
		all[i].Err = fmt.Errorf("%w: %w", errUnopened, all[i].Err)
	}
}

// agentIDs lists the agents to recover: the directories of the home's
// agents/ named by an agent id and, on a cluster store, the store's
// agents. refused are the entries named by an agent id that are symbolic
// links: listed, never followed.
func (c *Core) agentIDs(ctx context.Context) (ids []string, refused map[string]bool, err error) {
	entries, err := c.fs.ReadDir(c.agentsDir)
	if err != nil {
		return nil, nil, fmt.Errorf("listing %s: %w", c.agentsDir, err)
	}
	seen := map[string]bool{}
	for _, e := range entries {
		id, ok := tree.NormalizeID(e.Name())
		if !ok || id != e.Name() {
			continue
		}
		switch {
		case e.Type()&fs.ModeSymlink != 0:
			if refused == nil {
				refused = map[string]bool{}
			}
			refused[id] = true
		case !e.IsDir():
			continue
		}
		ids = append(ids, id)
		seen[id] = true
	}
	if !c.clustered() {
		return ids, refused, nil
	}
	stored, err := c.st.Agents(ctx)
	if err != nil {
		return nil, nil, fmt.Errorf("listing the agents of the store: %w", err)
	}
	for _, id := range stored {
		if !seen[id] {
			ids = append(ids, id)
		}
	}
	return ids, refused, nil
}

// removeOrphanDir removes the directory of an agent whose creation failed
// before agent.created was durable: its files, the directory, and the
// directory's entry made durable.
func (c *Core) removeOrphanDir(id string) { removeOrphanDir(c.fs, c.agentsDir, id) }

func removeOrphanDir(fsys faultfs.FS, dir, id string) {
	d := dir + "/" + id
	entries, err := fsys.ReadDir(d)
	if err != nil {
		return
	}
	for _, e := range entries {
		_ = fsys.Remove(d + "/" + e.Name())
	}
	_ = fsys.Remove(d)
	_ = fsys.SyncDir(dir)
}

// sessionFacts are what recovery takes from the fold to make session.json
// agree with the log: the provider session the log records and whether
// it was suspended (its blob is then kept).
type sessionFacts struct {
	Provider, Model, Handle string
	Suspended               bool
}

// factsOf takes the session facts from a fold.
func factsOf(p *fold.State) sessionFacts {
	return sessionFacts{Provider: p.SessProvider, Model: p.SessModel, Handle: p.Handle, Suspended: p.Suspended}
}

// restoredSnapshot reads agent id's session.json back, made to agree with
// the log: an unreadable one is kept aside (quarantine.MoveAside) and
// rebuilt from the facts, a missing one rebuilt, and a provider blob the
// log does not back (the session was not suspended) dropped.
func (c *Core) restoredSnapshot(id string, p sessionFacts) *session.Session {
	snaps, log := c.store, c.log
	sess, err := snaps.Load(id)
	if err != nil {
		save := true
		if !errors.Is(err, session.ErrNotExist) {
			aside, merr := quarantine.MoveAside(c.fs, c.snapshotPath(id), c.now())
			save = merr == nil
			log.Warn("session.json unreadable; kept aside and rebuilt from the log", "agent", id, "err", err,
				"kept_as", aside, "move_err", merr)
		}
		t := c.now().UTC()
		sess = &session.Session{ID: id, State: session.StateIdle, Provider: p.Provider, Model: p.Model,
			Handle: p.Handle, CreatedAt: t, UpdatedAt: t}
		if save {
			if err := snaps.Save(sess); err != nil {
				log.Error("saving a rebuilt session.json", "agent", id, "err", err)
			}
		}
	}
	if len(sess.ProviderState) > 0 && !p.Suspended {
		log.Info("discarding a stale provider blob", "agent", id, "bytes", len(sess.ProviderState))
		sess = sess.Clone()
		sess.ProviderState = nil
		if err := snaps.Save(sess); err != nil {
			log.Error("saving session.json without its stale blob", "agent", id, "err", err)
		}
	}
	return sess
}
