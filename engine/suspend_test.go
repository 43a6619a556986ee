package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/session"
)

// A turn that suspends its run (await_input, a spent budget): the wait is
// handed out once, and the run stays suspended whatever ends the attempt
// after it.

// A turn suspended by await_input logs no end (the wait is the log's),
// hands out the wait and the resume secret in its result and not again,
// leaves session.json suspended with the live wait, and does not hold the
// agent; the provider session is discarded (the resumed run reopens it).
func TestSuspendedTurnHandsOutTheWaitOnce(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.saveDelay = -1 })
	h.prov.Register("asker", func(_ context.Context, tr *inproc.Turn) (string, error) {
		r, err := tr.Call("await_input", map[string]any{"kind": "approval", "prompt": "ok?", "timeout": 3600})
		if err != nil {
			return "", err
		}
		return "answer " + r["response"].(string), nil
	})
	id := h.create("a", "", "asker")
	before := len(h.entries(id))
	res := h.send(id, "hi")
	if res.Err != nil || res.Status != session.StatusSuspended || res.Token == "" || res.Wait == nil ||
		res.Wait.TokenID == "" || res.Wait.RunID != res.RunID || res.Wait.Prompt != "ok?" {
		t.Fatalf("result %+v; want suspended with the wait and the secret", res)
	}
	for _, ev := range h.eventsSince(id, before)[1:] {
		if ev == schema.TurnComplete || ev == schema.TurnFailed || ev == schema.TurnCancelled || ev == schema.TurnStart {
			t.Fatalf("the suspended turn logged %v; want turn.start and the wait's entries only", h.eventsSince(id, before))
		}
	}
	if h.count(id, schema.RunWaiting) != 1 {
		t.Fatalf("run.waiting logged %d times", h.count(id, schema.RunWaiting))
	}
	a := mustAgent(t, h.c, id)
	if w, secret := a.Suspended(res.RunID); w == nil || w.TokenID != res.Wait.TokenID || secret != "" {
		t.Errorf("after the turn the wait is %+v and the secret %q; want the wait, and the secret handed out once (by the result)", w, secret)
	}
	if s := h.sessionJSON(id); s.State != session.StateSuspended || s.Run == nil || s.Run.RunID != res.RunID ||
		s.Run.Wait == nil || s.Run.Wait.TokenID != res.Wait.TokenID {
		t.Errorf("session.json %s %+v; want suspended with the live wait", s.State, s.Run)
	}
	if heldOf(a) {
		t.Error("a suspended turn held the agent")
	}
	waited := len(h.entries(id))
	out, err := h.c.Resume(context.Background(), id, res.Token, "yes")
	if err != nil || out.Response != "answer yes" {
		t.Fatalf("resume: %+v, %v", out, err)
	}
	if got := h.eventsSince(id, waited); !slices.Contains(got, schema.SessionRestored) {
		t.Errorf("the resumed run did not reopen the session (%v); want it discarded by the suspension", got)
	}
}

// A call made with the agent's credential that suspends the run ends the
// attempt suspended, even though the provider then answered.
func TestSuspensionByACredentialCallEndsTheAttempt(t *testing.T) {
	started, release := make(chan struct{}, 1), make(chan struct{})
	let := sync.OnceFunc(func() { close(release) })
	p := &funcProv{send: func(context.Context, string, string, provider.TurnIO) (string, error) {
		started <- struct{}{}
		<-release // answers whatever its context says
		return "ok", nil
	}}
	h := newHarness(t, func(h *harness) { h.extra = map[string]provider.Provider{"fn": p} })
	t.Cleanup(let) // before the harness's Close (cleanups run last first)
	id := h.createOn("w", "fn")
	before := len(h.entries(id))
	results := make(chan TurnResult, 1)
	go func() { results <- h.send(id, "go") }()
	<-started
	_, err := h.c.CallToolInTurn(context.Background(), id, "await_input", map[string]any{"kind": "approval", "prompt": "ok?", "timeout": 3600})
	if !errors.Is(err, ErrUnavailable) {
		t.Fatalf("socket await_input: %v, want code 6 saying the turn ends", err)
	}
	let()
	res := <-results
	if res.Status != session.StatusSuspended || res.Err != nil || res.Response != "" || res.Token == "" {
		t.Fatalf("result %+v; want suspended (the provider's answer dropped)", res)
	}
	for _, ev := range h.eventsSince(id, before) {
		if ev == schema.TurnComplete || ev == schema.TurnFailed {
			t.Fatalf("the suspended turn logged %v", h.eventsSince(id, before))
		}
	}
}

// A run suspended by a call or the budget gate of its turn stays
// suspended whatever the provider answers after it: a session on a worker
// whose answer comes as an error (its worker stopped during the
// hand-back: transient), after the attempt's context ended (canceled),
// or as if the turn completed. The wait is logged by then; the turn is
// neither retried, nor cancelled, nor completed.
func TestSuspensionStandsWhateverTheProviderAnswers(t *testing.T) {
	answers := map[string]func(ctx context.Context) (string, error){
		"transient": func(context.Context) (string, error) {
			return "", provider.Transient(errors.New("worker w1 is stopping"), 0)
		},
		"canceled": func(context.Context) (string, error) { return "", context.Canceled },
		"ok":       func(context.Context) (string, error) { return "done", nil },
	}
	for _, by := range []string{"await_input", "budget"} {
		for name, answer := range answers {
			t.Run(by+"/"+name, func(t *testing.T) {
				p := &funcProv{send: func(ctx context.Context, _, _ string, io provider.TurnIO) (string, error) {
					var err error
					if by == "budget" {
						// A first request that spends the budget, then the
						// gate before the second.
						if err = io.BeforeRequest(); err != nil {
							return "", fmt.Errorf("the first request was refused: %w", err)
						}
						io.OnUsage(provider.Usage{InputTokens: 200})
						err = io.BeforeRequest()
					} else {
						_, err = io.Tools.CallTool(ctx, "await_input", map[string]any{"kind": "approval", "prompt": "ok?", "timeout": 3600})
					}
					if !errors.Is(err, provider.ErrRunSuspended) {
						return "", fmt.Errorf("%s answered %v, want the run suspended", by, err)
					}
					return answer(ctx)
				}}
				h := newHarness(t, func(h *harness) { h.extra = map[string]provider.Provider{"fn": p} })
				spec := CreateSpec{Name: "w", Provider: "fn", Model: "m"}
				if by == "budget" {
					tokens := int64(100)
					spec.Budget = &schema.BudgetSetData{Tokens: &tokens}
				}
				id, err := h.c.CreateAgent(context.Background(), spec)
				if err != nil {
					t.Fatal(err)
				}
				before := len(h.entries(id))
				res := h.send(id, "go")
				if res.Status != session.StatusSuspended || res.Err != nil || res.Response != "" || res.Token == "" {
					t.Fatalf("result %+v; want the run suspended, the provider's answer dropped", res)
				}
				waits := 0
				for _, ev := range h.eventsSince(id, before) {
					switch ev {
					case schema.RunWaiting:
						waits++
					case schema.TurnComplete, schema.TurnFailed, schema.TurnCancelled, schema.TurnRetry:
						t.Fatalf("the suspended turn logged %v", h.eventsSince(id, before))
					}
				}
				if waits != 1 {
					t.Fatalf("%d run.waiting in %v, want 1", waits, h.eventsSince(id, before))
				}
			})
		}
	}
}
