// Package agentload reads one agent back from its store at recovery: it
// opens the agent's log (WAL replay, torn-tail repair) and folds it into a
// projection in the same pass, starting from the agent's checkpoint when it
// has a valid one, and says what it found: a state to adopt, a log damaged
// in the middle (with the projection of its good prefix, so a corrupt agent
// still shows its name and parent), no log at all, or a log that could not
// be opened for lack of a resource (retried with a backoff by
// RetryOpenFaults, then marked ErrUnopened). IDs lists the agents to read
// back (the home's directories and a cluster store's agents);
// RemoveOrphanDir removes the directory of an agent never created. The engine
// decides what each result means for the tree (package recoverrun);
// nothing here knows the Core.
//
// A checkpoint is an optimisation, never the authority (engine/doc.go,
// "Checkpoints"): one that does not match its log, or that names a pending
// message that cannot be read back, makes Load fold the whole log instead.
//
// # Goroutines and locks
//
// LoadAll runs Load on 2 x GOMAXPROCS goroutines of its own and returns
// when they are done; Load and RetryOpenFaults run on the caller's
// goroutine. The package has no lock: each load folds into a projection
// only it holds, and what it calls (Open, the store) brings its own.
package agentload

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"runtime"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/checkpoint"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/store"
)

// ErrUnopened marks an agent whose log recovery could not open for lack of
// a resource.
var ErrUnopened = errors.New("its log could not be opened for lack of a resource (nothing is damaged or lost; restart the daemon once the cause is gone)")

// RetryLimit bounds how long RetryOpenFaults waits for resources to come
// back.
const RetryLimit = 60 * time.Second

// Opener opens id's log for recovery, resuming after r when r is not nil,
// handing each recovered entry to replay (with borrowed data: replay
// copies what it keeps) and not creating a missing log (the error then
// wraps fs.ErrNotExist). B is what the caller needs, beside the log, to
// wire the log's later appends to whatever it makes of the result; Load
// hands it back in Agent.Binding.
type Opener[B any] func(id string, r *eventlog.Resume, replay func(eventlog.Entry) error) (store.Log, B, error)

// Loader loads agents. Every field is required but Logger.
type Loader[B any] struct {
	FS faultfs.FS
	// Dir is the local directory of agent id (its checkpoint.json).
	Dir func(id string) string
	// LogPath names id's log in the error of a fold that failed.
	LogPath func(id string) string
	// Checkpoints: start from an agent's checkpoint when it has a valid one.
	Checkpoints bool
	Open        Opener[B]
	// ReadSeq reads back the line of a pending message a checkpoint
	// refers to (store.Store.ReadSeq).
	ReadSeq func(ctx context.Context, id string, seq uint64, hint int64) (eventlog.Entry, error)
	// Sleep waits between the retries of RetryOpenFaults.
	Sleep  func(ctx context.Context, d time.Duration) error
	Logger hclog.Logger
}

// Agent is one agent read back. When Err is nil and Missing is false, Log
// is open and State is its fold; otherwise Log is nil (closed) and State
// holds what could be folded.
type Agent[B any] struct {
	ID    string
	Log   store.Log
	State *projection.State
	// Err: the log is damaged or could not be read (a resource fault,
	// RetryOpenFaults, wraps it in ErrUnopened when it lasts).
	Err error
	// Missing: there is no log (no events.jsonl).
	Missing bool
	// Resumed is the checkpoint's line when the fold started from it (the
	// lines before it are still to be verified).
	Resumed *eventlog.Resume
	// Binding is what Open returned beside the log.
	Binding B
}

// LoadAll loads the agents ids in parallel, in their order.
func (ld *Loader[B]) LoadAll(ids []string) []*Agent[B] {
	out := make([]*Agent[B], len(ids))
	work := make(chan int)
	var wg sync.WaitGroup
	workers := runtime.GOMAXPROCS(0) * 2
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				out[i] = ld.Load(ids[i])
			}
		}()
	}
	for i := range ids {
		work <- i
	}
	close(work)
	wg.Wait()
	return out
}

// Load opens one agent's log and folds it into a projection in the same
// pass, starting from the agent's checkpoint when it has a valid one.
func (ld *Loader[B]) Load(id string) *Agent[B] {
	if ld.Checkpoints {
		p, r, err := checkpoint.Read(ld.FS, ld.Dir(id))
		if err == nil {
			if l := ld.loadFrom(id, p, &r); l != nil {
				return l
			}
		} else if !errors.Is(err, fs.ErrNotExist) {
			ld.log().Warn("checkpoint unusable; folding the whole log", "agent", id, "err", err)
		}
	}
	return ld.loadFrom(id, nil, nil)
}

func (ld *Loader[B]) log() hclog.Logger {
	if ld.Logger == nil {
		return hclog.NewNullLogger()
	}
	return ld.Logger
}

// loadFrom folds the log into p from the resume point r, or into a new
// projection from the start when r is nil. It returns nil when r does not
// match the log or a pending message it names cannot be read back (the
// caller then folds the whole log).
func (ld *Loader[B]) loadFrom(id string, p *projection.State, r *eventlog.Resume) *Agent[B] {
	l := &Agent[B]{ID: id, State: p, Resumed: r}
	if p == nil {
		l.State = projection.New()
		l.State.BeginReplay()
	}
	var foldErr error
	lg, binding, err := ld.Open(id, r, func(e eventlog.Entry) error {
		if foldErr == nil {
			foldErr = l.State.Apply(e)
		}
		return nil
	})
	if r != nil && errors.Is(err, eventlog.ErrResumeMismatch) {
		ld.log().Warn("checkpoint does not match the log; folding the whole log", "agent", id, "err", err)
		return nil
	}
	if foldErr == nil {
		foldErr = l.State.EndReplay(func(ref inbox.Ref) (json.RawMessage, error) {
			e, err := ld.ReadSeq(context.Background(), id, ref.Seq, ref.Off)
			return e.Data, err
		})
		if foldErr != nil && r != nil && err == nil {
			ld.log().Warn("checkpoint names a pending message that cannot be read; folding the whole log", "agent", id, "err", foldErr)
			_ = lg.Close()
			return nil
		}
	}
	if errors.Is(err, fs.ErrNotExist) {
		l.Missing = true // the caller decides: orphan or quarantine
		return l
	}
	if err != nil {
		l.Err = err
		return l
	}
	if foldErr != nil {
		l.Err = fmt.Errorf("%s: %w", ld.LogPath(id), foldErr)
		_ = lg.Close()
		return l
	}
	l.Log, l.Binding = lg, binding
	return l
}
