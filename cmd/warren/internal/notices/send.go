package notices

import (
	"context"

	"github.com/warren-dev/warren/cmd/warren/internal/reply"
	"github.com/warren-dev/warren/protocol"
	"github.com/warren-dev/warren/schema"
)

// WatchSend starts the notices of `agent send REF` (its retries, and the
// waits that begin below it; its own wait is in the result). The returned
// function stops them once the send has returned: it first prints, from
// the agent's log, the retries the live stream had not delivered yet (it
// runs beside the send, on its own connection, and may lag behind it).
func WatchSend(ctx context.Context, cfg Config, ref string) (finish func()) {
	if cfg.Quiet {
		return func() {}
	}
	insp, err := cfg.Daemon.Call(ctx, "agent.inspect", map[string]any{"agent_id": ref})
	if err != nil {
		return func() {} // agent.send reports the problem
	}
	n, stop := Watch(ctx, cfg, reply.Str(insp, "agent_id"), false, true)
	_, known := insp["last_seq"]
	since := reply.Num(insp, "last_seq")
	return func() {
		stop()
		if known {
			n.sweepRetries(ctx, since)
		}
	}
}

// sweepRetries prints the target's turn.retry entries logged after seq
// that were not printed yet.
func (n *Watcher) sweepRetries(ctx context.Context, since int64) {
	for page := 0; page < 100; page++ {
		res, err := n.cfg.Daemon.Call(ctx, "agent.log", map[string]any{"agent_id": n.target, "since_seq": since})
		if err != nil {
			return
		}
		for _, e := range reply.List(res, "events") {
			if reply.Str(e, "event") == schema.TurnRetry {
				d := reply.Obj(e, "data")
				_, path := n.under(ctx, n.target)
				n.retryOnce(path, reply.Str(d, "run_id"), reply.Num(d, "attempt"), 0, reply.Num(d, "delay_ms"), reply.Str(d, "error"))
			}
		}
		next := reply.Num(res, "next_seq")
		if more, _ := res["more"].(bool); !more || next <= since {
			return
		}
		since = next
	}
}

// StreamFrame prints the notices an agent.stream event frame carries: a
// retry of the turn, or the wait the turn ended in.
func (n *Watcher) StreamFrame(fr protocol.Frame) {
	if fr.Event == nil || n.cfg.Quiet {
		return
	}
	switch reply.Str(fr.Event, "event") {
	case schema.TurnRetry:
		n.retry(n.targetPath(), reply.Num(fr.Event, "attempt"), reply.Num(fr.Event, "max_retries"), reply.Num(fr.Event, "delay_ms"), reply.Str(fr.Event, "error"))
	case schema.RunWaiting:
		w := reply.Obj(fr.Event, "wait")
		n.wait(n.targetPath(), reply.Str(w, "kind"), reply.Str(w, "prompt"), reply.Str(w, "token_id"))
	}
}
