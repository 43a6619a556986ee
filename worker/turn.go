package worker

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"github.com/nats-io/nats.go"

	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/remote"
)

// turn is one attempt's traffic to the daemon: the provider's TurnIO.
type turn struct {
	w       *Worker
	daemon  string
	attempt string

	// cancel ends the attempt on the worker (a call through the agent's
	// socket that suspended the run).
	cancel context.CancelFunc

	mu        sync.Mutex
	chunks    int
	usages    int
	suspended error // the error of the socket call that suspended the run
}

// suspend ends the attempt because a call through the agent's socket
// suspended the run: its answer is that error, as the daemon's own door
// does for a local process (engine/calldoor.go).
func (t *turn) suspend(err error) {
	t.mu.Lock()
	if t.suspended == nil {
		t.suspended = err
	}
	t.mu.Unlock()
	t.cancel()
}

// suspendedBy is the error of the call that suspended the run, if any.
func (t *turn) suspendedBy() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.suspended
}

// counts is what the turn published.
func (t *turn) counts() (chunks, usages int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.chunks, t.usages
}

func (t *turn) msg(kind string, v any) *nats.Msg {
	body, _ := json.Marshal(v)
	m := nats.NewMsg(remote.AttemptSubject(t.daemon, t.w.o.ID, t.attempt, kind))
	m.Data = body
	return m
}

// chunk publishes a piece of text, numbered.
func (t *turn) chunk(text string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	_ = t.w.o.Conn.PublishMsg(t.msg(remote.KindChunk, remote.Chunk{Seq: t.chunks, Text: text}))
	t.chunks++
}

// usage publishes a model request's usage.
func (t *turn) usage(u provider.Usage) {
	t.mu.Lock()
	defer t.mu.Unlock()
	_ = t.w.o.Conn.PublishMsg(t.msg(remote.KindUsage, u))
	t.usages++
}

// CallTool runs a tool at the daemon (provider.ToolCaller). A call the
// daemon could not be asked (the connection, no responders) is an error:
// the provider ends the turn, as for a local process that lost its daemon.
func (t *turn) CallTool(ctx context.Context, tool string, args map[string]any) (map[string]any, error) {
	rep, err := t.request(ctx, remote.KindTool, remote.ToolRequest{Tool: tool, Args: args})
	if err != nil {
		return nil, err
	}
	if rep.Error != nil {
		return nil, rep.Error.Err()
	}
	return rep.Result, nil
}

// gate asks the daemon whether the next model request may go (budgets).
func (t *turn) gate(ctx context.Context) error {
	rep, err := t.request(ctx, remote.KindGate, struct{}{})
	if err != nil {
		return err
	}
	return rep.Error.Err()
}

func (t *turn) request(ctx context.Context, kind string, v any) (remote.ToolReply, error) {
	m, err := t.w.o.Conn.RequestMsgWithContext(ctx, t.msg(kind, v))
	if err != nil {
		return remote.ToolReply{}, provider.Transient(fmt.Errorf("asking the daemon (%s): %w", kind, err), 0)
	}
	var rep remote.ToolReply
	if err := json.Unmarshal(m.Data, &rep); err != nil {
		return remote.ToolReply{}, fmt.Errorf("the daemon answered %s with bad JSON: %w", kind, err)
	}
	return rep, nil
}
