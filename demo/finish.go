package demo

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"
)

// waitDone waits for the lead's summary in the USER inbox, then checks that
// every message pending at the kill was consumed exactly once.
func (r *runner) waitDone(ctx context.Context, before map[string]*diskAgent) error {
	deadline := time.NewTimer(r.opts.Timeout)
	defer deadline.Stop()
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	var summary string
	for summary == "" {
		res, err := call(ctx, r.home, "inbox.list", nil)
		if err != nil {
			r.fail("inbox.list: %v", err)
			return err
		}
		raw, _ := res["messages"].([]any)
		for _, x := range raw {
			m, _ := x.(map[string]any)
			text := fmt.Sprint(m["text"])
			if strings.HasPrefix(text, summaryMarker) {
				summary = fmt.Sprintf("from=%v  %s", m["from"], text)
			}
		}
		if summary != "" {
			break
		}
		select {
		case <-deadline.C:
			r.fail("no summary in the USER inbox after %s; agents: %s", r.opts.Timeout, r.statuses(ctx))
			return nil
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
	}
	var missing []string
	for _, w := range WorkerNames() {
		if !strings.Contains(summary, ExpectedResult(w)) {
			missing = append(missing, "missing "+ExpectedResult(w))
		}
	}
	r.check("the USER inbox got the lead's summary with all 3 results", missing)
	r.detail("%s", summary)

	after, err := readDisk(r.home)
	if err != nil {
		r.fail("read the logs at the end: %v", err)
		return err
	}
	var problems []string
	pending := 0
	for id, b := range before {
		a := after[id]
		for _, m := range b.pending() {
			pending++
			if a == nil || a.consumed[m] != 1 {
				got := 0
				if a != nil {
					got = a.consumed[m]
				}
				problems = append(problems, fmt.Sprintf("%s: message %s consumed %d times, want 1", b.path, short(m), got))
			}
		}
	}
	for _, a := range after {
		for m, c := range a.consumed {
			if c > 1 {
				problems = append(problems, fmt.Sprintf("%s: message %s consumed by %d turns", a.path, short(m), c))
			}
		}
	}
	sort.Strings(problems)
	what := fmt.Sprintf("the %d messages pending at the kill were each consumed exactly once after the restart", pending)
	if pending == 1 {
		what = "the 1 message pending at the kill was consumed exactly once after the restart"
	}
	r.check(what, problems)
	return nil
}

// statuses describes the agents for a failure message.
func (r *runner) statuses(ctx context.Context) string {
	res, err := call(ctx, r.home, "agent.list", nil)
	if err != nil {
		return fmt.Sprintf("(agent.list: %v)", err)
	}
	var parts []string
	for _, a := range agents(res) {
		parts = append(parts, fmt.Sprintf("%v=%v(pending %v)", a["path"], a["status"], a["pending"]))
	}
	sort.Strings(parts)
	return strings.Join(parts, ", ")
}
