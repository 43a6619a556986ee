package engine

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/warren-dev/warren/provider/inproc"
)

func TestTransientErrorsAreRetriedWithBackoffAndLogged(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.cfg.RetryBaseDelay = 100 * time.Millisecond })
	h.prov.Register("flaky", inproc.FailTransient(2, 0, inproc.Echo))
	id := h.create("lead", "", "flaky")
	res := h.send(id, "x")
	if res.Err != nil || res.Response != "echo: x" {
		t.Fatalf("result = %+v", res)
	}
	var attempts []float64
	var delays []float64
	for _, e := range h.entries(id) {
		if e.Event == "turn.retry" {
			d := dataOf(t, e)
			attempts = append(attempts, d["attempt"].(float64))
			delays = append(delays, d["delay_ms"].(float64))
		}
	}
	// Jitter is fixed at 0.5 in the harness: delay = base * 2^(attempt-1).
	if fmt.Sprint(attempts) != "[1 2]" || fmt.Sprint(delays) != "[100 200]" {
		t.Fatalf("retries attempts=%v delays=%v, want [1 2] and [100 200]", attempts, delays)
	}
	if fmt.Sprint(h.delays) != "[100ms 200ms]" {
		t.Fatalf("slept %v", h.delays)
	}
}

func TestRetryAfterIsHonoured(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.cfg.RetryBaseDelay = time.Millisecond })
	h.prov.Register("limited", inproc.FailTransient(1, 3*time.Second, inproc.Echo))
	id := h.create("lead", "", "limited")
	h.send(id, "x")
	if fmt.Sprint(h.delays) != "[3s]" {
		t.Fatalf("slept %v, want the provider's Retry-After of 3s", h.delays)
	}
}

func TestRetriesExhaustedFailTheTurnAndKeepTheError(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.cfg.MaxRetries = 2 })
	h.prov.Register("down", inproc.FailTransient(100, 0, inproc.Echo))
	id := h.create("lead", "", "down")
	res := h.send(id, "x")
	if res.Err == nil {
		t.Fatalf("want a failed turn, got %+v", res)
	}
	if h.count(id, "turn.retry") != 2 || h.count(id, "turn.failed") != 1 || h.count(id, "turn.complete") != 0 {
		t.Fatalf("retries=%d failed=%d complete=%d", h.count(id, "turn.retry"), h.count(id, "turn.failed"), h.count(id, "turn.complete"))
	}
	view, _ := h.c.Inspect(context.Background(), id)
	if !strings.Contains(view.LastError, "transient") {
		t.Fatalf("last_error = %v", view.LastError)
	}
	// Errors are data: the session is idle and usable on another model.
	if s := h.statusOf(id); s != "idle" {
		t.Fatalf("status = %s", s)
	}
	res, err := h.c.Send(context.Background(), id, "again", "", "echo", nil)
	if err != nil || res.Response != "echo: again" {
		t.Fatalf("next turn on another model = %+v, %v", res, err)
	}
}

func TestPermanentErrorIsNotRetried(t *testing.T) {
	h := newHarness(t)
	h.prov.Register("broken", inproc.FailPermanent(inproc.Echo))
	id := h.create("lead", "", "broken")
	if res := h.send(id, "x"); res.Err == nil {
		t.Fatalf("want failure")
	}
	if n := h.count(id, "turn.retry"); n != 0 {
		t.Fatalf("permanent error retried %d times", n)
	}
}

func TestStreamedOutputStopsRetries(t *testing.T) {
	h := newHarness(t)
	calls := 0
	h.prov.Register("chunky", func(ctx context.Context, tr *inproc.Turn) (string, error) {
		calls++
		tr.Chunk("partial")
		return "", errTransient
	})
	id := h.create("lead", "", "chunky")
	var got []string
	res, err := h.c.Send(context.Background(), id, "x", "", "", func(s string) { got = append(got, s) })
	if err != nil || res.Err == nil {
		t.Fatalf("want a failed turn: %+v %v", res, err)
	}
	if calls != 1 || h.count(id, "turn.retry") != 0 {
		t.Fatalf("output reached the client, yet the turn was retried (%d calls)", calls)
	}
}

var errTransient = transientErr()

func transientErr() error {
	return providerTransient(errors.New("connection reset"))
}

func TestOneSlotEvictsAndRestoresEveryTurn(t *testing.T) {
	h := newHarness(t, func(h *harness) { h.cfg.Pools = map[string]int{"default": 1, "scripted": 1} })
	h.prov.Register("counter", func(ctx context.Context, tr *inproc.Turn) (string, error) {
		return fmt.Sprintf("%s turn %d", tr.Prompt, len(tr.History)+1), nil
	})
	const agents = 100
	ids := make([]string, agents)
	for i := range ids {
		ids[i] = h.create(fmt.Sprintf("a%d", i), "", "counter")
	}
	for round := 1; round <= 2; round++ {
		for i, id := range ids {
			msg := fmt.Sprintf("agent %d", i)
			res := h.send(id, msg)
			if want := fmt.Sprintf("%s turn %d", msg, round); res.Response != want {
				t.Fatalf("round %d agent %d: response %q, want %q (history lost across eviction)", round, i, res.Response, want)
			}
		}
	}
	for _, id := range ids[:3] {
		if h.count(id, "suspend.result") < 2 || h.count(id, "session.restored") < 2 {
			t.Fatalf("agent %s: suspend.result=%d session.restored=%d", id, h.count(id, "suspend.result"), h.count(id, "session.restored"))
		}
	}
}

func TestCancelRunningTurn(t *testing.T) {
	h := newHarness(t)
	started := make(chan *inproc.Turn, 1)
	h.prov.Register("slow", inproc.Signal(started, inproc.Block(make(chan struct{}), inproc.Echo)))
	id := h.create("lead", "", "slow")
	done := make(chan TurnResult, 1)
	go func() { res, _ := h.c.Send(context.Background(), id, "x", "", "", nil); done <- res }()
	<-started
	if err := h.c.Cancel(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	<-done
	if h.count(id, "turn.cancelled") != 1 {
		t.Fatalf("turn.cancelled not logged")
	}
	if s := h.statusOf(id); s != "idle" {
		t.Fatalf("status = %s", s)
	}
	h.prov.Register("slow", inproc.Echo)
	if res := h.send(id, "y"); res.Response != "echo: y" {
		t.Fatalf("after cancel: %+v", res)
	}
}

func TestProviderSwitchInjectsHistoryOnce(t *testing.T) {
	h := newHarness(t)
	var prompts []string
	h.prov.Register("other", func(ctx context.Context, tr *inproc.Turn) (string, error) {
		prompts = append(prompts, tr.Prompt)
		return "ok", nil
	})
	id := h.create("lead", "", "echo")
	h.send(id, "first question")
	for _, m := range []string{"second", "third"} {
		if _, err := h.c.Send(context.Background(), id, m, "", "other", nil); err != nil {
			t.Fatal(err)
		}
	}
	if len(prompts) != 2 || !strings.Contains(prompts[0], "first question") || !strings.Contains(prompts[0], "second") {
		t.Fatalf("first prompt on the new model must carry the history block: %q", prompts)
	}
	if strings.Contains(prompts[1], "first question") || prompts[1] != "third" {
		t.Fatalf("the history block is injected once; second prompt = %q", prompts[1])
	}
	var strategies []string
	for _, e := range h.entries(id) {
		if e.Event == "session.restored" {
			strategies = append(strategies, dataOf(t, e)["strategy"].(string))
		}
	}
	if fmt.Sprint(strategies) != "[history]" {
		t.Fatalf("session.restored strategies = %v", strategies)
	}
}
