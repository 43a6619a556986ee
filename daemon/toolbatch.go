package daemon

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

var _ provider.BatchToolCaller = (*runTools)(nil)

// batchableTools are the tools whose calls in one step run together.
var batchableTools = map[string]bool{"send_message": true}

// CallTools implements provider.BatchToolCaller.
func (t *runTools) CallTools(ctx context.Context, calls []provider.ToolRequest) []provider.ToolResponse {
	t.serial.Lock()
	defer t.serial.Unlock()
	together := len(calls) > 1
	for _, c := range calls {
		together = together && batchableTools[c.Tool]
	}
	t.mu.Lock()
	base := t.pos
	if base < len(t.recorded) {
		together = false
	}
	if together {
		t.pos += len(calls)
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
		return t.c.callTools(ctx, t.a, calls, callCtx{runID: t.runID, turn: t.turn, index: base})
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

// callTools runs the batchable calls of one step from position first.index.
func (c *Core) callTools(ctx context.Context, a *agent, calls []provider.ToolRequest, first callCtx) []provider.ToolResponse {
	out := make([]provider.ToolResponse, len(calls))
	fail := func(err error) []provider.ToolResponse {
		for i := range out {
			out[i] = provider.ToolResponse{Err: err}
		}
		return out
	}
	outs := make([]toolOutcome, len(calls))
	for i, call := range calls {
		cc := first
		cc.index = first.index + i
		parsed, perr := tools.ParseOptions{MaxText: c.limits().MessageBytes}.Parse(call.Tool, call.Args)
		if perr != nil {
			outs[i] = toolErr("%v", perr)
			continue
		}
		o, err := c.execTool(ctx, a, parsed, cc)
		if err != nil {
			return fail(fmt.Errorf("tool %s for agent %s: %w", call.Tool, a.id, err))
		}
		outs[i] = o
	}
	c.refuseOverfullBatch(outs)
	if err := c.logBatchAndDeliver(a, calls, outs, first); err != nil {
		return fail(err)
	}
	for i, o := range outs {
		if o.after != nil {
			o.after()
		}
		if o.toolErr != "" {
			out[i].Result = map[string]any{"error": o.toolErr}
		} else {
			out[i].Result = o.result
		}
	}
	return out
}

// refuseOverfullBatch turns the sends of a step that would take a
// recipient's inbox (or the daemon's pending messages) past a limit into
// inbox-full tool errors. Each send was checked against the inbox as it
// is; this adds the step's own earlier messages to the same recipient.
func (c *Core) refuseOverfullBatch(outs []toolOutcome) {
	count := map[string]int{}
	size := map[string]int64{}
	for i := range outs {
		for _, m := range outs[i].deliver {
			if n := count[m.Recipient]; n > 0 {
				if _, err := c.checkEnqueueN(m, n, size[m.Recipient]); errors.Is(err, errInboxFull) {
					outs[i] = toolErr("%v", err)
					break
				}
			}
			count[m.Recipient]++
			size[m.Recipient] += int64(len(m.Payload))
		}
	}
}

// logBatchAndDeliver logs the step's calls in the caller's log as one batch
// and their messages in the recipients' logs at the same time, and returns
// once all are durable.
func (c *Core) logBatchAndDeliver(a *agent, calls []provider.ToolRequest, outs []toolOutcome, first callCtx) error {
	byRecipient := map[string][]inbox.Message{}
	var order []string
	for _, o := range outs {
		for _, m := range o.deliver {
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
				if errs[i] = c.appendEnqueue(m); errs[i] != nil {
					return
				}
			}
		}()
	}
	recs := make([]eventlog.Record, len(calls))
	for i, call := range calls {
		recs[i] = toolCallRecord(call.Tool, call.Args, outs[i].result, outs[i].toolErr, first, outs[i].messages)
	}
	var lerr error
	if _, err := a.log.AppendBatch(recs); err != nil {
		lerr = fmt.Errorf("logging %d tool.call entries for agent %s: %w", len(recs), a.id, err)
	}
	wg.Wait()
	return errors.Join(append(errs, lerr)...)
}
