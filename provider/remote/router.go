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
type router struct {
	nc  *nats.Conn
	log hclog.Logger
	sub *nats.Subscription

	mu       sync.Mutex
	attempts map[string]*attempt
	dropped  atomic.Int64
}

// attempt is one live Send.
type attempt struct {
	worker string
	ctx    context.Context
	io     provider.TurnIO

	mu     sync.Mutex
	ended  bool
	calls  sync.WaitGroup
	chunks int // the next chunk's sequence number
	usages int
	// more is signalled on each chunk or usage delivered.
	more chan struct{}
}

func newRouter(nc *nats.Conn, daemon string, log hclog.Logger) (*router, error) {
	r := &router{nc: nc, log: log, attempts: map[string]*attempt{}}
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
// called. end first waits (up to tailWait) until the chunks and usages
// the answer counts are delivered, then for the attempt's calls in
// progress, and drops every later message of the attempt.
func (r *router) add(ctx context.Context, id, worker string, io provider.TurnIO) (end func(chunks, usages int)) {
	a := &attempt{worker: worker, ctx: ctx, io: io, more: make(chan struct{}, 1)}
	r.mu.Lock()
	r.attempts[id] = a
	r.mu.Unlock()
	return func(chunks, usages int) {
		a.waitTail(chunks, usages)
		r.mu.Lock()
		delete(r.attempts, id)
		r.mu.Unlock()
		a.mu.Lock()
		a.ended = true
		a.mu.Unlock()
		a.calls.Wait()
	}
}

// handle is the subscription's handler (one message at a time: chunks
// keep their order; calls run on their own goroutines).
func (r *router) handle(m *nats.Msg) {
	parts := strings.Split(m.Subject, ".")
	if len(parts) != 5 {
		return
	}
	id, kind := parts[3], parts[4]
	from := m.Header.Get(HeaderWorker)
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
			r.log.Warn("dropping a bad chunk", "attempt", id, "worker", from, "err", err)
			return
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.ended || c.Seq != a.chunks {
			r.log.Debug("dropping a chunk out of order", "attempt", id, "worker", from, "seq", c.Seq, "want", a.chunks)
			return
		}
		a.chunks++
		if a.io.OnChunk != nil {
			a.io.OnChunk(c.Text)
		}
		a.signal()
	case KindUsage:
		var u provider.Usage
		if err := json.Unmarshal(m.Data, &u); err != nil {
			r.log.Warn("dropping bad usage", "attempt", id, "worker", from, "err", err)
			return
		}
		a.mu.Lock()
		defer a.mu.Unlock()
		if a.ended {
			return
		}
		a.usages++
		if a.io.OnUsage != nil {
			a.io.OnUsage(u)
		}
		a.signal()
	case KindTool, KindGate:
		if !a.begin() {
			r.drop(m, id, kind, from, "the attempt ended")
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

// signal wakes waitTail (a.mu held).
func (a *attempt) signal() {
	select {
	case a.more <- struct{}{}:
	default:
	}
}

// waitTail waits until chunks and usages are delivered, or tailWait.
func (a *attempt) waitTail(chunks, usages int) {
	timeout := time.NewTimer(tailWait)
	defer timeout.Stop()
	for {
		a.mu.Lock()
		done := a.chunks >= chunks && a.usages >= usages
		a.mu.Unlock()
		if done {
			return
		}
		select {
		case <-a.more:
		case <-timeout.C:
			return
		}
	}
}

// begin counts a call in, unless the attempt ended.
func (a *attempt) begin() bool {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.ended {
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

// drop logs a message nobody takes, and answers a request with
// "abandoned".
func (r *router) drop(m *nats.Msg, id, kind, from, why string) {
	r.dropped.Add(1)
	r.log.Warn("dropping late worker traffic", "attempt", id, "kind", kind, "worker", from, "why", why)
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
