package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/leanovate/gopter/commands"

	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/inproc"
)

// mSUT is the system under test of one sequence: a harness whose agents all
// run mSUT.program.
type mSUT struct {
	h     *harness
	stats *mStats
	held  map[string]bool // messages seen waiting in an inbox

	mu      sync.Mutex
	flaky   bool          // the next FLAKY turn fails its first attempt
	calls   []string      // what each tool call of the last scripted turn returned
	started chan struct{} // a BLOCK turn signals here that it runs
	release chan struct{} // and waits for this to close
}

func newModelSUT(t *testing.T, stats *mStats) *mSUT {
	s := &mSUT{stats: stats, held: map[string]bool{}}
	s.h = newHarness(t, func(h *harness) {
		// Checkpoints often, and at every restart and crash a check that
		// recovering from them equals folding every log from its start.
		h.ckptEvery, h.checkCkpt, h.ckptStats = 3, true, stats.ckpt
	})
	s.h.prov.Register(mModelProgram, s.program)
	return s
}

// close stops the core and drops the sequence's files: the harness stays
// referenced by its t.Cleanup until the test ends, so a long profile would
// otherwise keep every sequence's filesystem in memory.
func (s *mSUT) close() {
	if s.h.c == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = s.h.c.Close(ctx)
	s.h.c, s.h.fs, s.h.prov = nil, nil, nil
}

// program is what every agent runs. "SPAWN <name> [<name>]" spawns a child
// per name, in order; "SEND <name> <text>" sends a message from inside the
// turn; "COMPLETE <result>" calls complete; "TURN" calls no tool; each may be prefixed by "FAIL" (the turn then
// fails with a permanent error after its calls) or "FLAKY" (its first
// attempt fails with a transient error after its calls, and the retry
// succeeds). "BLOCK" signals s.started and waits for s.release. Every other
// prompt (wake, bootstrap) is answered without tool calls.
func (s *mSUT) program(ctx context.Context, tr *inproc.Turn) (string, error) {
	f := strings.Fields(tr.Prompt)
	fail, flaky := false, false
	for len(f) > 0 && (f[0] == "FAIL" || f[0] == "FLAKY") {
		fail, flaky = fail || f[0] == "FAIL", flaky || f[0] == "FLAKY"
		f = f[1:]
	}
	if len(f) == 0 {
		return "ok", nil
	}
	var got []string
	record := func(r map[string]any, err error) {
		switch {
		case err != nil:
			got = append(got, "failed outside the tool: "+err.Error())
		case r["error"] != nil:
			got = append(got, fmt.Sprint("error: ", r["error"]))
		default:
			got = append(got, fmt.Sprint(r["status"]))
		}
	}
	switch {
	case f[0] == "SPAWN":
		for _, name := range f[1:] {
			record(tr.Call("spawn_agent", map[string]any{"name": name, "instructions": "a model child"}))
			if got[len(got)-1] == "accepted" {
				// The spawn is deferred: no child exists until the turn ends.
				if _, err := s.h.c.tree.ChildByName(tr.AgentID, name); err == nil {
					got[len(got)-1] = "created during the parent's turn"
				}
			}
		}
	case f[0] == "SEND" && len(f) == 3:
		record(tr.Call("send_message", map[string]any{"recipient": f[1], "text": f[2]}))
	case f[0] == "COMPLETE" && len(f) == 2:
		record(tr.Call("complete", map[string]any{"result": f[1]}))
	case f[0] == "TURN" && len(f) == 1:
	case f[0] == "BLOCK" && len(f) == 1:
		s.mu.Lock()
		started, release := s.started, s.release
		s.mu.Unlock()
		if started == nil {
			return "ok", nil
		}
		select {
		case started <- struct{}{}:
		default:
		}
		select {
		case <-release:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		return "released", nil
	default:
		return "ok", nil
	}
	s.mu.Lock()
	s.calls = got
	retry := flaky && s.flaky
	s.flaky = false
	s.mu.Unlock()
	switch {
	case retry:
		return "", provider.Transient(errors.New("model test: scripted transient failure"), 0)
	case fail:
		return "", provider.Permanent(errors.New("model test: scripted failure"))
	}
	return "scripted", nil
}

// mResult is what running a command produced.
type mResult struct {
	out mOutcome
	obs mObservation
}

// Run executes the command, waits until every agent is idle and observes
// the system.
func (c *mCmd) Run(sut commands.SystemUnderTest) commands.Result {
	s := sut.(*mSUT)
	out := s.run(c)
	s.h.quiet()
	obs := s.observe()
	s.stats.record(c.op, out, s.newlyHeld(obs))
	return mResult{out: out, obs: obs}
}

func (s *mSUT) run(c *mCmd) mOutcome {
	ctx := context.Background()
	core := s.h.c
	var id string
	if c.path != "" {
		var err error
		if id, err = core.Resolve("/" + c.path); err != nil {
			return mOutcome{err: "resolving the acting agent: " + err.Error()}
		}
	}
	switch c.op {
	case opMCreateRoot:
		_, err := core.CreateAgent(ctx, CreateSpec{Name: c.name, Provider: "inproc", Model: mModelProgram})
		return mErrOutcome(err)
	case opMSpawnTurn:
		return s.scriptedTurn(id, c.mode, strings.TrimSpace("SPAWN "+c.name+" "+c.name2))
	case opMSpawnTool:
		return mToolOutcome(core.CallTool(ctx, id, "spawn_agent", map[string]any{"name": c.name, "instructions": "a model child"}))
	case opMTurn:
		return s.scriptedTurn(id, c.mode, "TURN")
	case opMComplete:
		return s.scriptedTurn(id, c.mode, "COMPLETE "+c.text)
	case opMSend:
		return mToolOutcome(core.CallTool(ctx, id, "send_message", map[string]any{"recipient": c.name, "text": c.text}))
	case opMSendInTurn:
		return s.scriptedTurn(id, c.mode, "SEND "+c.name+" "+c.text)
	case opMSendDuringTurn:
		return s.sendDuringTurn(c, id)
	case opMBroadcast:
		return mToolOutcome(core.CallTool(ctx, id, "broadcast", map[string]any{"text": c.text}))
	case opMCheckInbox:
		return mToolOutcome(core.CallTool(ctx, id, "check_inbox", map[string]any{}))
	case opMTerminate:
		return mErrOutcome(core.Terminate(context.Background(), id))
	case opMGate:
		return mToolOutcome(core.CallTool(ctx, id, "gate", map[string]any{"agent_name": c.name}))
	case opMUngate:
		return mToolOutcome(core.CallTool(ctx, id, "ungate", map[string]any{"agent_name": c.name}))
	case opMPoke:
		return mToolOutcome(core.CallTool(ctx, id, "poke", map[string]any{"agent_name": c.name}))
	case opMPermit:
		return mToolOutcome(core.CallTool(ctx, id, "permit_turn", map[string]any{"agent_name": c.name}))
	case opMRestart:
		s.h.restart()
	case opMCrash:
		mode := faultfs.ProcessCrash
		if c.name == "power" {
			mode = faultfs.PowerLoss
		}
		s.h.crash(mode)
	}
	return mOutcome{}
}

// scriptedTurn runs a turn whose prompt tells the program which tools to
// call (and, per mode, how the turn fails) and returns how the turn ended
// and what the calls returned.
func (s *mSUT) scriptedTurn(id, mode, prompt string) mOutcome {
	s.mu.Lock()
	s.calls = nil
	s.flaky = mode == "flaky"
	s.mu.Unlock()
	if mode != "" {
		prompt = strings.ToUpper(mode) + " " + prompt
	}
	res, err := s.h.c.Send(context.Background(), id, prompt, "", "", nil)
	if err == nil {
		err = res.Err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := mOutcome{calls: s.calls}
	if err != nil {
		out.err = "the scripted turn failed: " + err.Error()
	}
	return out
}

// sendDuringTurn starts a BLOCK turn of the recipient (c.busy), sends it a
// message while that turn runs, then lets the turn end.
func (s *mSUT) sendDuringTurn(c *mCmd, senderID string) mOutcome {
	ctx := context.Background()
	busyID, err := s.h.c.Resolve("/" + c.busy)
	if err != nil {
		return mOutcome{err: "resolving the busy agent: " + err.Error()}
	}
	started, release := make(chan struct{}, 1), make(chan struct{})
	s.mu.Lock()
	s.started, s.release = started, release
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.started, s.release = nil, nil
		s.mu.Unlock()
	}()
	done := make(chan error, 1)
	go func() {
		res, err := s.h.c.Send(ctx, busyID, "BLOCK", "", "", nil)
		if err == nil {
			err = res.Err
		}
		done <- err
	}()
	// A generous guard against a wedge, not a timing assertion.
	wedge := time.NewTimer(15 * time.Second)
	defer wedge.Stop()
	select {
	case <-started:
	case err := <-done:
		return mOutcome{err: fmt.Sprintf("the BLOCK turn ended before it blocked: %v", err)}
	case <-wedge.C:
		close(release)
		return mOutcome{err: "the BLOCK turn never started"}
	}
	out := mToolOutcome(s.h.c.CallTool(ctx, senderID, "send_message", map[string]any{"recipient": c.name, "text": c.text}))
	close(release)
	if err := <-done; err != nil {
		return mOutcome{err: "the BLOCK turn failed: " + err.Error()}
	}
	return out
}

func mErrOutcome(err error) mOutcome {
	if err != nil {
		return mOutcome{err: err.Error()}
	}
	return mOutcome{}
}

// mToolOutcome reads a tool result: its error, the texts of the messages
// check_inbox returned, the recipient count of a broadcast.
func mToolOutcome(r map[string]any, err error) mOutcome {
	if err != nil {
		return mOutcome{err: "tool call failed outside the tool: " + err.Error()}
	}
	if e, ok := r["error"]; ok {
		return mOutcome{err: fmt.Sprint(e)}
	}
	var o mOutcome
	if msgs, ok := r["messages"].([]any); ok {
		for _, m := range msgs {
			mm, _ := m.(map[string]any)
			o.texts = append(o.texts, mNormalize(fmt.Sprint(mm["text"])))
		}
	}
	if n, ok := r["recipient_count"].(int); ok {
		o.count = n
	}
	return o
}

// newlyHeld counts the messages seen waiting in an inbox for the first time.
func (s *mSUT) newlyHeld(o mObservation) int {
	n := 0
	for _, a := range o.agents {
		for _, p := range a.pending {
			if !s.held[a.path+" "+p] {
				s.held[a.path+" "+p] = true
				n++
			}
		}
	}
	return n
}
