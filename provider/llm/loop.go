package llm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/warren-dev/warren/internal/textcut"
	"github.com/warren-dev/warren/provider"
)

// Send implements provider.Session: the tool loop (see the package
// documentation). The turn joins the transcript only when it succeeds.
func (s *session) Send(ctx context.Context, prompt string, tio provider.TurnIO) (string, error) {
	if err := ctx.Err(); err != nil {
		return "", fmt.Errorf("turn not started: %w", err)
	}
	if s.isStopped() {
		return "", provider.Permanent(errStopped)
	}
	onText := func(string) {}
	if tio.OnChunk != nil {
		onText = tio.OnChunk
	}
	defer s.releaseReader()
	pending := []entry{{m: Message{Role: RoleUser, Text: prompt}}}
	for step := 1; ; step++ {
		if step > s.p.opts.MaxSteps {
			return "", provider.Permanent(fmt.Errorf("%w: %d steps each made tool calls; the model seems stuck in a loop", ErrTooManySteps, s.p.opts.MaxSteps))
		}
		st := s.p.Settings()
		s.Encoded = 0
		if err := s.ensureHead(st); err != nil {
			return "", err
		}
		s.applyBudget(st, pending)
		if n := turnSize(pending); n > st.TurnBytes {
			return "", provider.Permanent(fmt.Errorf("%w: after %d steps the turn's own messages (the model's text, tool calls and tool results, sent again with every step) are %d bytes, over the per-turn budget of %d bytes (limits.turn_transcript_bytes); the turn fails before sending them: raise limits.turn_transcript_bytes in config.json, or have the agent work in smaller steps (read parts of files, keep large results in files)",
				ErrTurnTooLarge, step-1, n, st.TurnBytes))
		}
		if tio.BeforeRequest != nil {
			if err := tio.BeforeRequest(); err != nil {
				return "", err
			}
		}
		bufs, size := s.body(pending)
		res, err := s.post(ctx, st, bufs, size, onText)
		if err != nil {
			return "", err
		}
		if tio.OnUsage != nil && !res.Usage.IsZero() {
			tio.OnUsage(res.Usage)
		}
		if len(res.Calls) == 0 {
			if res.Text != "" {
				pending = append(pending, entry{m: Message{Role: RoleAssistant, Text: res.Text}})
			}
			s.commit(pending)
			return res.Text, nil
		}
		for i := range res.Calls {
			c := &res.Calls[i]
			if c.ID == "" || len(c.ID) > maxCallID {
				c.ID = fmt.Sprintf("call_t%d_s%d_%d", len(s.turns), step, i)
			}
			if len(c.Name) > maxToolName {
				c.Name = textcut.Cut(c.Name, maxToolName, "...")
			}
		}
		results, err := s.runCalls(ctx, tio, res.Calls, st)
		if err != nil {
			return "", err
		}
		pending = append(pending,
			entry{m: Message{Role: RoleAssistant, Text: res.Text, Calls: res.Calls}},
			entry{m: Message{Role: RoleTool, Results: results}})
	}
}

// Bounds on what a tool call the model made keeps in the transcript.
const (
	// maxCallID: a longer call id is replaced by one of warren's.
	maxCallID = 256
	// maxToolName: a longer tool name (no tool has one) is cut.
	maxToolName = 256
	// maxUnknownArgs: the arguments of a call of an unknown tool are
	// kept (for the model to see what it sent) up to this size, else
	// replaced by {}.
	maxUnknownArgs = 4 << 10
)

// turnSize is the bytes of the turn's messages as sent (encoded).
func turnSize(pending []entry) int {
	n := 0
	for i := range pending {
		n += len(pending[i].enc) + 1
	}
	return n
}

// runCalls runs the tool calls of one step: those naming a known tool with
// a JSON object as arguments go to the daemon together (BatchToolCaller),
// in step order; the others are answered with a tool error and never run.
// A call whose arguments were over the message limit (dropped as they
// arrived), or a call of an unknown tool with large arguments, keeps {} as
// its arguments in the transcript; no error result echoes arguments.
func (s *session) runCalls(ctx context.Context, tio provider.TurnIO, calls []Call, st Settings) ([]Result, error) {
	results := make([]Result, len(calls))
	var reqs []provider.ToolRequest
	var at []int
	for i := range calls {
		c := &calls[i]
		if c.ArgsBytes > 0 {
			results[i] = ErrorResult(c.ID, c.Name, fmt.Sprintf("the arguments of this %s call were %d bytes, over the limit of %d bytes (limits.message_bytes): the call was not run and its arguments are left out; call it again with smaller arguments (split large content over several calls, or keep it in files)",
				c.Name, c.ArgsBytes, st.MessageBytes))
			c.Args = "{}"
			continue
		}
		if !s.p.known[c.Name] {
			left := ""
			if len(c.Args) > maxUnknownArgs {
				left = fmt.Sprintf(" (its %d bytes of arguments are left out)", len(c.Args))
				c.Args = "{}"
			}
			results[i] = ErrorResult(c.ID, c.Name, fmt.Sprintf("unknown tool %q: the call was not run%s; the tools are %s",
				c.Name, left, strings.Join(toolNames(s.p), ", ")))
			continue
		}
		args, err := parseArgs(c.Args)
		if err != nil {
			results[i] = ErrorResult(c.ID, c.Name, fmt.Sprintf("the arguments of %s are not a JSON object (%v): the call was not run; call it again with valid JSON arguments", c.Name, err))
			continue
		}
		reqs = append(reqs, provider.ToolRequest{Tool: c.Name, Args: args})
		at = append(at, i)
	}
	if len(reqs) == 0 {
		return results, nil
	}
	if tio.Tools == nil {
		return nil, provider.Permanent(errors.New("the model called tools but the turn has no tool caller"))
	}
	var resps []provider.ToolResponse
	if b, ok := tio.Tools.(provider.BatchToolCaller); ok {
		resps = b.CallTools(ctx, reqs)
	} else {
		for _, r := range reqs {
			res, err := tio.Tools.CallTool(ctx, r.Tool, r.Args)
			resps = append(resps, provider.ToolResponse{Result: res, Err: err})
			if err != nil {
				break
			}
		}
	}
	var first error
	for j, r := range resps {
		if r.Err != nil {
			if errors.Is(r.Err, provider.ErrRunSuspended) {
				return nil, r.Err
			}
			if first == nil {
				first = fmt.Errorf("tool %s: %w", reqs[j].Tool, r.Err)
			}
			continue
		}
		c := calls[at[j]]
		results[at[j]] = ValueResult(c.ID, c.Name, r.Result)
	}
	if first != nil {
		return nil, first
	}
	if len(resps) != len(reqs) {
		return nil, fmt.Errorf("the tool caller answered %d of %d calls", len(resps), len(reqs))
	}
	return results, nil
}

// parseArgs decodes a call's arguments: a JSON object ("" and null are {}).
func parseArgs(raw string) (map[string]any, error) {
	raw = strings.TrimSpace(raw)
	if raw == "" || raw == "null" {
		return map[string]any{}, nil
	}
	var m map[string]any
	dec := json.NewDecoder(strings.NewReader(raw))
	if err := dec.Decode(&m); err != nil {
		return nil, err
	}
	if dec.More() {
		return nil, errors.New("data after the object")
	}
	if m == nil {
		return nil, errors.New("not an object")
	}
	return m, nil
}

func toolNames(p *Provider) []string {
	out := make([]string, len(p.tools))
	for i, t := range p.tools {
		out[i] = t.Name
	}
	return out
}
