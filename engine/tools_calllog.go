package engine

import (
	"encoding/json"
	"fmt"
	"sync"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/tools"
)

// Inside a turn, the tool.call entry of a send_message or broadcast is
// written behind the call: the call returns to the model once its messages
// are durable in their recipients' logs, and its tool.call entry follows in
// the caller's log, in call order, batched with the entries of the calls
// made meanwhile. Every other tool, the end of each attempt (before
// turn.complete, turn.retry, turn.failed or turn.cancelled) and a step of
// calls made together wait until the entries written behind are durable,
// so the log still holds each run's calls in call order and before the
// entry that ends the turn.
//
// Why: a root sending to its children one call at a time shares its log
// with the children's replies (message.enqueued entries), so its own
// tool.call waited behind their groups; it was the whole critical path of
// the fan-out benchmark. What a crash can leave is what the concurrent
// writes of the two logs could already leave: messages in their
// recipients' logs whose calls the sender's log lacks (a re-run derives the
// same message ids, so nothing is sent twice). The only thing added is that
// the model may have seen such a call's result, and that model state is
// lost with the unfinished turn anyway.

// deferredLogTools are the tools whose tool.call entries are written
// behind the call.
var deferredLogTools = map[string]bool{tools.ToolSendMessage: true, tools.ToolBroadcast: true}

// callLog writes one attempt's deferred tool.call entries in order.
type callLog struct {
	log *agent

	mu      sync.Mutex
	idle    *sync.Cond // signalled when the writer stops
	queue   []eventlog.Record
	writing bool
	err     error // the first failed write; later entries are not written
}

func newCallLog(l *agent) *callLog {
	w := &callLog{log: l}
	w.idle = sync.NewCond(&w.mu)
	return w
}

// add queues a tool.call entry; a writer goroutine appends it after the
// entries queued before it. The entry is encoded now: its args and result
// are the caller's maps, which the model's side may change once the call
// has returned.
func (w *callLog) add(rec eventlog.Record) error {
	data, err := json.Marshal(rec.Data)
	if err != nil {
		return fmt.Errorf("encoding a %s entry: %w", rec.Event, err)
	}
	rec.Data = json.RawMessage(data)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.queue = append(w.queue, rec)
	if !w.writing {
		w.writing = true
		go w.write()
	}
	return nil
}

// write appends the queued entries, a batch at a time, until none is left.
func (w *callLog) write() {
	for {
		w.mu.Lock()
		recs := w.queue
		w.queue = nil
		if len(recs) == 0 || w.err != nil {
			w.writing = false
			w.idle.Broadcast()
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		if _, err := w.log.AppendBatch(recs); err != nil {
			w.mu.Lock()
			w.err = fmt.Errorf("logging %d tool.call entries: %w", len(recs), err)
			w.mu.Unlock()
		}
	}
}

// drain waits until every queued entry is durable, and returns the first
// write error (the log is poisoned then: the turn cannot complete).
func (w *callLog) drain() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.writing {
		w.idle.Wait()
	}
	return w.err
}
