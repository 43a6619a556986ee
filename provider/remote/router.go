package remote

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/nats-io/nats.go"

	"github.com/warren-dev/warren/provider"
)

// router hands the traffic of live attempts to their TurnIO, and drops
// (and logs) the rest: what a worker sends for an attempt the daemon
// gave up on, or for one it never made.
//
// The subscription's handler never waits on an attempt: each attempt's
// chunks and usage go, in order, through its own delivery goroutine (a
// usage report is a log append, a chunk may be a client's stream), and
// each tool call or gate runs on a goroutine of its own.
type router struct {
	nc  *nats.Conn
	log hclog.Logger
	sub *nats.Subscription

	mu       sync.Mutex
	attempts map[string]*attempt
	// logged holds attempts whose dropped traffic was logged (once each;
	// cleared past maxLogged).
	logged  map[string]bool
	dropped atomic.Int64
}

// maxLogged bounds router.logged.
const maxLogged = 4096

// attempt is one live Send.
type attempt struct {
	worker string
	ctx    context.Context
	io     provider.TurnIO

	mu sync.Mutex
	// answered: the worker's answer arrived; no call begins after it.
	// ended: the attempt is over; nothing is delivered after it.
	answered, ended bool
	calls           sync.WaitGroup
	queue           []func() // deliveries waiting for the delivery goroutine
	kick            chan struct{}
	delivered       chan struct{} // closed when the delivery goroutine ends
	chunks          int           // the next chunk's sequence number
	usages          int           // usage reports delivered
	// more is signalled after each delivery.
	more chan struct{}
}

func newRouter(nc *nats.Conn, daemon string, log hclog.Logger) (*router, error) {
	r := &router{nc: nc, log: log, attempts: map[string]*attempt{}, logged: map[string]bool{}}
	sub, err := nc.Subscribe(attemptWildcard(daemon), r.handle)
	if err != nil {
		return nil, fmt.Errorf("workers: subscribing to %s: %w", attemptWildcard(daemon), err)
	}
	r.sub = sub
	return r, nil
}

func (r *router) close() { _ = r.sub.Unsubscribe() }

// tailWait bounds how long an attempt's end waits for the chunks and
// usage its answer counts (they are in the connection's buffers by then).
const tailWait = 2 * time.Second

// add routes attempt id's traffic from worker to io until end is
// called. end stops new calls at once, waits (up to tailWait) until the
// chunks and usages the answer counts are delivered, then for the
// attempt's calls in progress; every later message of the attempt is
// dropped.
func (r *router) add(ctx context.Context, id, worker string, io provider.TurnIO) (end func(chunks, usages int)) {
	a := &attempt{worker: worker, ctx: ctx, io: io, kick: make(chan struct{}, 1), more: make(chan struct{}, 1), delivered: make(chan struct{})}
	go a.deliver()
	r.mu.Lock()
	r.attempts[id] = a
	r.mu.Unlock()
	return func(chunks, usages int) {
		a.mu.Lock()
		a.answered = true
		a.mu.Unlock()
		if !a.waitTail(chunks, usages) {
			r.log.Warn("an attempt's answer came without all its chunks or usage within the wait; the rest is dropped",
				"attempt", id, "worker", worker, "chunks", chunks, "usages", usages)
		}
		r.mu.Lock()
		delete(r.attempts, id)
		r.mu.Unlock()
		a.mu.Lock()
		a.ended = true
		a.mu.Unlock()
		a.signalKick()
		<-a.delivered
		a.calls.Wait()
	}
}

// handle is the subscription's handler.
func (r *router) handle(m *nats.Msg) {
	parts := strings.Split(m.Subject, ".")
	if len(parts) != 6 {
		return
	}
	from, id, kind := parts[3], parts[4], parts[5]
	if m.Reply != "" && !strings.HasPrefix(m.Reply, InboxPrefix(from)+".") {
		// The daemon publishes with every permission: an answer to any
		// other subject than the sender's own inbox would be a publish
		// the worker may not make itself (a stream's delete, another
		// worker's inbox). Dropped unanswered.
		m.Reply = ""
		r.drop(m, id, kind, from, "its reply subject is not the worker's inbox")
		return
	}
	r.mu.Lock()
	a := r.attempts[id]
	r.mu.Unlock()
	if a == nil || a.worker != from {
		r.drop(m, id, kind, from, "no live attempt of this worker")
		return
	}
	switch kind {
	case KindChunk:
		var c Chunk
		if err := json.Unmarshal(m.Data, &c); err != nil {
			r.drop(m, id, kind, from, "not a chunk")
			return
		}
		if !a.enqueue(func() { a.chunk(c, r.log, id) }) {
			r.drop(m, id, kind, from, "the attempt ended")
		}
	case KindUsage:
		var u provider.Usage
		if err := json.Unmarshal(m.Data, &u); err != nil {
			r.drop(m, id, kind, from, "not a usage report")
			return
		}
		if !a.enqueue(func() { a.usage(u) }) {
			r.drop(m, id, kind, from, "the attempt ended")
		}
	case KindTool, KindGate:
		if !a.begin() {
			r.drop(m, id, kind, from, "the attempt was answered")
			return
		}
		go func() {
			defer a.calls.Done()
			r.respond(m, a.call(kind, m.Data))
		}()
	default:
		r.drop(m, id, kind, from, "unknown kind")
	}
}

// enqueue hands f to the delivery goroutine, unless the attempt ended.
func (a *attempt) enqueue(f func()) bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ended {
		return false
	}
	a.queue = append(a.queue, f)
	a.signalKick()
	return true
}

func (a *attempt) signalKick() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// deliver runs the queued deliveries in order until the attempt ends.
func (a *attempt) deliver() {
	defer close(a.delivered)
	for range a.kick {
		for {
			a.mu.Lock()
			if len(a.queue) == 0 {
				ended := a.ended
				a.mu.Unlock()
				if ended {
					return
				}
				break
			}
			f := a.queue[0]
			a.queue = a.queue[1:]
			a.mu.Unlock()
			f()
			select {
			case a.more <- struct{}{}:
			default:
			}
		}
	}
}

// chunk delivers a chunk. A gap (a chunk lost on the way, e.g. to a
// slow subscription) is logged and skipped; a repeat is dropped.
func (a *attempt) chunk(c Chunk, log hclog.Logger, id string) {
	a.mu.Lock()
	next := a.chunks
	if c.Seq < next {
		a.mu.Unlock()
		return
	}
	a.chunks = c.Seq + 1
	a.mu.Unlock()
	if c.Seq > next {
		log.Warn("chunks of an attempt were lost on the way", "attempt", id, "from", next, "to", c.Seq-1)
	}
	if a.io.OnChunk != nil {
		a.io.OnChunk(c.Text)
	}
}

// usage delivers a usage report.
func (a *attempt) usage(u provider.Usage) {
	if a.io.OnUsage != nil {
		a.io.OnUsage(u)
	}
	a.mu.Lock()
	a.usages++
	a.mu.Unlock()
}

// waitTail waits until chunks and usages are delivered, or tailWait:
// false when it gave up.
func (a *attempt) waitTail(chunks, usages int) bool {
	timeout := time.NewTimer(tailWait)
	defer timeout.Stop()
	for {
		a.mu.Lock()
		done := a.chunks >= chunks && a.usages >= usages
		a.mu.Unlock()
		if done {
			return true
		}
		select {
		case <-a.more:
		case <-timeout.C:
			return false
		}
	}
}

// begin counts a call in, unless the attempt was answered.
func (a *attempt) begin() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.answered || a.ended {
		return false
	}
	a.calls.Add(1)
	return true
}

// call runs a tool call or a gate at the daemon.
func (a *attempt) call(kind string, data []byte) ToolReply {
	if kind == KindGate {
		if a.io.BeforeRequest == nil {
			return ToolReply{}
		}
		return ToolReply{Error: Wire(a.io.BeforeRequest())}
	}
	var req ToolRequest
	if err := json.Unmarshal(data, &req); err != nil || req.Tool == "" {
		return ToolReply{Error: &WireError{Kind: KindPermanent, Message: fmt.Sprintf("bad tool request: %v", err)}}
	}
	if a.io.Tools == nil {
		return ToolReply{Error: &WireError{Kind: KindPermanent, Message: "this turn has no tools"}}
	}
	res, err := a.io.Tools.CallTool(a.ctx, req.Tool, req.Args)
	return ToolReply{Result: res, Error: Wire(err)}
}

// drop counts a message nobody takes, logs it (once per attempt), and
// answers a request with "abandoned".
func (r *router) drop(m *nats.Msg, id, kind, from, why string) {
	r.dropped.Add(1)
	r.mu.Lock()
	first := !r.logged[id]
	if first {
		if len(r.logged) >= maxLogged {
			clear(r.logged)
		}
		r.logged[id] = true
	}
	r.mu.Unlock()
	if first {
		r.log.Warn("dropping late worker traffic", "attempt", id, "kind", kind, "worker", from, "why", why)
	} else {
		r.log.Debug("dropping late worker traffic", "attempt", id, "kind", kind, "worker", from, "why", why)
	}
	if m.Reply != "" {
		r.respond(m, ToolReply{Error: &WireError{Kind: KindAbandoned, Message: "attempt " + id + ": " + why}})
	}
}

func (r *router) respond(m *nats.Msg, v any) {
	body, err := json.Marshal(v)
	if err != nil {
		body, _ = json.Marshal(ToolReply{Error: &WireError{Kind: KindPermanent, Message: "the result is not JSON: " + err.Error()}})
	}
	if err := m.Respond(body); err != nil {
		r.log.Warn("could not answer a worker", "subject", m.Subject, "err", err)
	}
}
