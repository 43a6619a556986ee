package toolexec

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/tools"
)

// A model step may carry several tool calls (provider.BatchToolCaller). When
// they are all send_message calls and the log records none of them yet, they
// run together: each is checked in position order, then every message is
// logged in its recipient's log (recipients concurrently, each recipient's
// messages in position order) while the calls are logged in the caller's log
// as one all-or-none batch in position order. A step that the log already
// records in part (a re-run after a crash or a resume), or that holds any
// other tool, runs call by call through CallTool, so positions, derived ids
// and replayed answers are those of one-by-one calls either way.

// batchableTools are the tools whose calls in one step run together.
var batchableTools = map[string]bool{tools.ToolSendMessage: true}

// CallTools implements provider.BatchToolCaller.
func (t *Attempt) CallTools(ctx context.Context, calls []provider.ToolRequest) []provider.ToolResponse {
	t.serial.Lock()
	defer t.serial.Unlock()
	together := len(calls) > 1
	for _, c := range calls {
		together = together && batchableTools[c.Tool]
	}
	t.mu.Lock()
	base := t.next
	if base < len(t.recorded) {
		together = false
	}
	if together {
		t.next += len(calls)
	}
	t.mu.Unlock()
	if together {
		// The step's entries follow those written behind earlier calls.
		if err := t.calls.drain(); err != nil {
			out := make([]provider.ToolResponse, len(calls))
			for i := range out {
				out[i].Err = err
			}
			return out
		}
		return callStep(ctx, t.env, t.self, calls, Pos{RunID: t.runID, Turn: t.turn, Index: base})
	}
	out := make([]provider.ToolResponse, len(calls))
	for i, c := range calls {
		out[i].Result, out[i].Err = t.callOne(ctx, c.Tool, c.Args)
		if out[i].Err != nil {
			// The turn cannot go on (suspended, or the log failed): the
			// rest of the step is not run.
			for j := i + 1; j < len(calls); j++ {
				out[j].Err = fmt.Errorf("not run: call %d of this step failed: %w", i, out[i].Err)
			}
			break
		}
	}
	return out
}

// callStep runs the batchable calls of one step from position first.Index.
func callStep(ctx context.Context, env Env, self Caller, calls []provider.ToolRequest, first Pos) []provider.ToolResponse {
	out := make([]provider.ToolResponse, len(calls))
	fail := func(err error) []provider.ToolResponse {
		for i := range out {
			out[i] = provider.ToolResponse{Err: err}
		}
		return out
	}
	outs := make([]Outcome, len(calls))
	// Every message checked in this step holds room in its recipient's
	// inbox until it is enqueued; what is not (a failed step, a call the
	// step refuses) gives it back.
	var checked []inbox.Message
	defer func() { unreserve(env, checked) }()
	for i, c := range calls {
		pos := first
		pos.Index = first.Index + i
		parsed, perr := Parse(env, c.Tool, c.Args)
		if perr != nil {
			outs[i] = failed("%v", perr)
			continue
		}
		o, err := Exec(ctx, env, self.ID, parsed, pos)
		checked = append(checked, o.Deliver...)
		if err != nil {
			return fail(fmt.Errorf("tool %s for agent %s: %w", c.Tool, self.ID, err))
		}
		outs[i] = o
	}
	refuseOverfullStep(env, outs)
	if err := logStepAndDeliver(env, self, calls, outs, first); err != nil {
		return fail(err)
	}
	for i, o := range outs {
		if o.After != nil {
			o.After()
		}
		out[i].Result = o.Reply()
	}
	return out
}

// refuseOverfullStep turns the sends of a step that would take a
// recipient's inbox (or the daemon's pending messages) past a limit into
// inbox-full tool errors. Each send was checked against the inbox as it
// is; this adds the step's own earlier messages to the same recipient.
func refuseOverfullStep(env Env, outs []Outcome) {
	count := map[string]int{}
	size := map[string]int64{}
	for i := range outs {
		for _, m := range outs[i].Deliver {
			if n := count[m.Recipient]; n > 0 {
				if _, err := env.CheckEnqueue(m, n, size[m.Recipient]); errors.Is(err, ErrInboxFull) {
					outs[i] = failed("%v", err)
					break
				}
			}
			count[m.Recipient]++
			size[m.Recipient] += int64(len(m.Payload))
		}
	}
}

// logStepAndDeliver logs the step's calls in the caller's log as one batch
// and their messages in the recipients' logs at the same time, and returns
// once all are durable.
func logStepAndDeliver(env Env, self Caller, calls []provider.ToolRequest, outs []Outcome, first Pos) error {
	byRecipient := map[string][]inbox.Message{}
	var order []string
	for _, o := range outs {
		for _, m := range o.Deliver {
			if _, seen := byRecipient[m.Recipient]; !seen {
				order = append(order, m.Recipient)
			}
			byRecipient[m.Recipient] = append(byRecipient[m.Recipient], m)
		}
	}
	errs := make([]error, len(order))
	var wg sync.WaitGroup
	for i, to := range order {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for _, m := range byRecipient[to] {
				if errs[i] = env.Enqueue(m); errs[i] != nil {
					return
				}
			}
		}()
	}
	recs := make([]eventlog.Record, len(calls))
	for i, c := range calls {
		recs[i] = callRecord(env, c.Tool, c.Args, outs[i], first)
	}
	var lerr error
	if _, err := self.Log.AppendBatch(recs); err != nil {
		lerr = fmt.Errorf("logging %d tool.call entries for agent %s: %w", len(recs), self.ID, err)
	}
	wg.Wait()
	return errors.Join(append(errs, lerr)...)
}
