package main

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/warren-dev/warren/protocol"
)

// What `agent send` and `agent attach` show on stderr while a turn runs
// (docs/DECISIONS.md, "Retries and waits shown as they happen"): each retry
// of the agent's turn as it is scheduled, and each wait that begins in the
// agent or anywhere below it, with the command that answers it by token id.
// Nothing of it goes to stdout, and nothing with --json (which prints only
// the RPC result, or the stream's frames).

// readyTimeout bounds the wait for events.subscribe's ready frame; a
// daemon that does not send one is watched without the guarantee.
const readyTimeout = 5 * time.Second

// notices prints retries and waits for one agent's subtree.
type notices struct {
	c      *cli
	target string // the agent's id
	// ownWaits: also print the target's own waits (attach; send prints
	// its own run's wait from the result).
	ownWaits bool
	// ownRetries: print the target's turn.retry entries (send; attach gets
	// them as agent.stream frames).
	ownRetries bool

	mu      sync.Mutex
	shown   map[string]bool // token ids already printed
	retries map[string]bool // run_id/attempt of turn.retry entries printed
	parents map[string]string
	paths   map[string]string
	tried   map[string]bool // ids refreshed for
}

// watch subscribes to every agent's events on its own connection and
// prints the notices until ctx ends or stop is called. It returns once the
// subscription is in place, so a turn started after it is seen whole. A
// failure to watch is not an error of the command: it prints nothing.
func (c *cli) watch(ctx context.Context, targetID string, ownWaits, ownRetries bool) (n *notices, stop func()) {
	n = &notices{c: c, target: targetID, ownWaits: ownWaits, ownRetries: ownRetries, shown: map[string]bool{},
		retries: map[string]bool{}, parents: map[string]string{}, paths: map[string]string{}, tried: map[string]bool{}}
	if c.json {
		return n, func() {}
	}
	n.refresh(ctx)
	wctx, cancel := context.WithCancel(ctx)
	cl, err := c.dial(wctx)
	if err != nil {
		cancel()
		return n, func() {}
	}
	ready := make(chan struct{})
	var once sync.Once
	done := make(chan struct{})
	go func() {
		defer close(done)
		defer once.Do(func() { close(ready) })
		_ = cl.Stream(wctx, "events.subscribe", map[string]any{"ready": true}, func(fr protocol.Frame) error {
			if fr.Event == nil {
				return nil
			}
			if str(fr.Event, "event") == "subscribed" {
				once.Do(func() { close(ready) })
				return nil
			}
			n.entry(wctx, fr.Event)
			return nil
		})
	}()
	t := time.NewTimer(readyTimeout)
	defer t.Stop()
	select {
	case <-ready:
	case <-t.C:
	case <-ctx.Done():
	}
	return n, func() {
		cancel()
		_ = cl.Close()
		<-done
	}
}

// refresh reloads the tree (parents and paths) from the daemon.
func (n *notices) refresh(ctx context.Context) {
	res, err := n.c.call(ctx, "agent.list", nil)
	if err != nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, a := range list(res, "agents") {
		id := str(a, "agent_id")
		n.parents[id] = str(a, "parent_id")
		n.paths[id] = str(a, "path")
	}
}

// under reports whether id is the target or below it, and its path.
func (n *notices) under(ctx context.Context, id string) (bool, string) {
	n.mu.Lock()
	_, known := n.paths[id]
	retry := !known && !n.tried[id]
	if retry {
		n.tried[id] = true
	}
	n.mu.Unlock()
	if retry {
		n.refresh(ctx) // an agent created since (a spawned child)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	path := n.paths[id]
	if path == "" {
		path = id
	}
	for cur, hops := id, 0; cur != "" && hops < 1024; cur, hops = n.parents[cur], hops+1 {
		if cur == n.target {
			return true, path
		}
	}
	return false, path
}

// entry handles one logged entry of the event stream.
func (n *notices) entry(ctx context.Context, ev map[string]any) {
	id := str(ev, "agent_id")
	data := obj(ev, "data")
	switch str(ev, "event") {
	case "turn.retry":
		if !n.ownRetries || id != n.target {
			return
		}
		_, path := n.under(ctx, id)
		n.retryOnce(path, str(data, "run_id"), num(data, "attempt"), 0, num(data, "delay_ms"), str(data, "error"))
	case "run.waiting":
		if id == n.target && !n.ownWaits {
			return
		}
		ok, path := n.under(ctx, id)
		if !ok {
			return
		}
		n.wait(path, str(data, "wait_kind"), str(data, "prompt"), str(data, "token_id"))
	}
}

// retry prints one scheduled retry: `lead: retrying in 2s (attempt 1 of 4
// failed): 429 from openai`.
func (n *notices) retry(path string, attempt, maxRetries, delayMS int64, errText string) {
	of := ""
	if maxRetries > 0 {
		of = fmt.Sprintf(" of %d", maxRetries+1)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	fmt.Fprintf(n.c.stderr, "%s: retrying in %s (attempt %d%s failed): %s\n", path, fmtDelay(delayMS), attempt, of, oneLine(errText))
}

// retryOnce prints a retry of a logged turn.retry entry once (the live
// stream and the final sweep may both see it).
func (n *notices) retryOnce(path, runID string, attempt, maxRetries, delayMS int64, errText string) {
	key := fmt.Sprintf("%s/%d", runID, attempt)
	n.mu.Lock()
	seen := n.retries[key]
	n.retries[key] = true
	n.mu.Unlock()
	if !seen {
		n.retry(path, attempt, maxRetries, delayMS, errText)
	}
}

// retryFrame prints an agent.stream turn.retry frame.
func (n *notices) retryFrame(ev map[string]any) {
	path := n.target
	n.mu.Lock()
	if p := n.paths[n.target]; p != "" {
		path = p
	}
	n.mu.Unlock()
	n.retry(path, num(ev, "attempt"), num(ev, "max_retries"), num(ev, "delay_ms"), str(ev, "error"))
}

// wait prints a wait that began, once per token id.
func (n *notices) wait(path, kind, prompt, tokenID string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if tokenID == "" || n.shown[tokenID] {
		return
	}
	n.shown[tokenID] = true
	fmt.Fprint(n.c.stderr, waitText(n.c, path, kind, prompt, tokenID))
}

// waitText describes a wait and the command that answers it by token id.
func waitText(c *cli, ref, kind, prompt, tokenID string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s is waiting for input", ref)
	if kind != "" {
		fmt.Fprintf(&b, " (%s)", kind)
	}
	fmt.Fprintf(&b, ": %s\n", prompt)
	fmt.Fprintf(&b, "token id: %s\n", tokenID)
	fmt.Fprintf(&b, "answer with: warren agent resume %s%s --token-id %s RESPONSE\n", shellQuote(ref), c.homeArg(), shellQuote(tokenID))
	return b.String()
}

func fmtDelay(ms int64) string {
	d := time.Duration(ms) * time.Millisecond
	if d >= time.Second {
		d = d.Round(100 * time.Millisecond)
	}
	return d.String()
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return cut(s, 300)
}

// watchSend starts the notices of `agent send REF` (its retries, and the
// waits that begin below it; its own wait is in the result). The returned
// function stops them once the send has returned: it first prints, from
// the agent's log, the retries the live stream had not delivered yet (it
// runs beside the send, on its own connection, and may lag behind it).
func (c *cli) watchSend(ctx context.Context, ref string) (finish func()) {
	if c.json {
		return func() {}
	}
	insp, err := c.call(ctx, "agent.inspect", map[string]any{"agent_id": ref})
	if err != nil {
		return func() {} // agent.send reports the problem
	}
	n, stop := c.watch(ctx, str(insp, "agent_id"), false, true)
	_, known := insp["last_seq"]
	since := num(insp, "last_seq")
	return func() {
		stop()
		if known {
			n.sweepRetries(ctx, since)
		}
	}
}

// sweepRetries prints the target's turn.retry entries logged after seq
// that were not printed yet.
func (n *notices) sweepRetries(ctx context.Context, since int64) {
	for page := 0; page < 100; page++ {
		res, err := n.c.call(ctx, "agent.log", map[string]any{"agent_id": n.target, "since_seq": since})
		if err != nil {
			return
		}
		for _, e := range list(res, "events") {
			if str(e, "event") == "turn.retry" {
				d := obj(e, "data")
				_, path := n.under(ctx, n.target)
				n.retryOnce(path, str(d, "run_id"), num(d, "attempt"), 0, num(d, "delay_ms"), str(d, "error"))
			}
		}
		next := num(res, "next_seq")
		if more, _ := res["more"].(bool); !more || next <= since {
			return
		}
		since = next
	}
}

// streamFrame prints the notices an agent.stream event frame carries: a
// retry of the turn, or the wait the turn ended in.
func (n *notices) streamFrame(fr protocol.Frame) {
	if fr.Event == nil || n.c.json {
		return
	}
	switch str(fr.Event, "event") {
	case "turn.retry":
		n.retryFrame(fr.Event)
	case "run.waiting":
		w := obj(fr.Event, "wait")
		path := n.target
		n.mu.Lock()
		if p := n.paths[n.target]; p != "" {
			path = p
		}
		n.mu.Unlock()
		n.wait(path, str(w, "kind"), str(w, "prompt"), str(w, "token_id"))
	}
}
