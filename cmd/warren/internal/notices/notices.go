// Package notices is what `warren agent send` and `agent attach` show on
// stderr while a turn runs (docs/DECISIONS.md, "Retries and waits shown
// as they happen"): each retry of the agent's turn as it is scheduled, and
// each wait that begins in the agent or anywhere below it, with the
// command that answers it by token id. It watches the daemon's event
// stream on a connection of its own. Nothing of it goes to stdout, and
// nothing with --json (which prints only the RPC result, or the stream's
// frames).
package notices

import (
	"context"
	"fmt"
	"github.com/warren-dev/warren/cmd/warren/internal/client"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/warren-dev/warren/cmd/warren/internal/render"
	"github.com/warren-dev/warren/cmd/warren/internal/reply"
	"github.com/warren-dev/warren/protocol"
	"github.com/warren-dev/warren/schema"
)

// readyTimeout bounds the wait for events.subscribe's ready frame; a
// daemon that does not send one is watched without the guarantee.
const readyTimeout = 5 * time.Second

// Daemon is the connection to the daemon the notices need.
type Daemon interface {
	Call(ctx context.Context, method string, params map[string]any) (map[string]any, error)
	Dial(ctx context.Context) (*protocol.Client, error)
}

// Config says where the notices come from and go.
type Config struct {
	Daemon  Daemon
	Stderr  io.Writer
	HomeArg string // " --home H" for the printed commands, or ""
	Quiet   bool   // --json: watch nothing, print nothing
}

// Watcher prints retries and waits for one agent's subtree.
type Watcher struct {
	cfg    Config
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

// Watch subscribes to every agent's events on its own connection and
// prints the notices of the agent targetID until ctx ends or stop is
// called. It returns once the subscription is in place, so a turn started
// after it is seen whole. A failure to watch is not an error of the
// command: it prints nothing.
func Watch(ctx context.Context, cfg Config, targetID string, ownWaits, ownRetries bool) (n *Watcher, stop func()) {
	n = &Watcher{cfg: cfg, target: targetID, ownWaits: ownWaits, ownRetries: ownRetries, shown: map[string]bool{},
		retries: map[string]bool{}, parents: map[string]string{}, paths: map[string]string{}, tried: map[string]bool{}}
	if cfg.Quiet {
		return n, func() {}
	}
	n.refresh(ctx)
	wctx, cancel := context.WithCancel(ctx)
	cl, err := cfg.Daemon.Dial(wctx)
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
			if reply.Str(fr.Event, "event") == "subscribed" {
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
func (n *Watcher) refresh(ctx context.Context) {
	res, err := client.ListAgents(ctx, n.cfg.Daemon, nil)
	if err != nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, a := range reply.List(res, "agents") {
		id := reply.Str(a, "agent_id")
		n.parents[id] = reply.Str(a, "parent_id")
		n.paths[id] = reply.Str(a, "path")
	}
}

// under reports whether id is the target or below it, and its path.
func (n *Watcher) under(ctx context.Context, id string) (bool, string) {
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
func (n *Watcher) entry(ctx context.Context, ev map[string]any) {
	id := reply.Str(ev, "agent_id")
	data := reply.Obj(ev, "data")
	switch reply.Str(ev, "event") {
	case schema.TurnRetry:
		if !n.ownRetries || id != n.target {
			return
		}
		_, path := n.under(ctx, id)
		n.retryOnce(path, reply.Str(data, "run_id"), reply.Num(data, "attempt"), 0, reply.Num(data, "delay_ms"), reply.Str(data, "error"))
	case schema.RunWaiting:
		if id == n.target && !n.ownWaits {
			return
		}
		ok, path := n.under(ctx, id)
		if !ok {
			return
		}
		n.wait(path, reply.Str(data, "wait_kind"), reply.Str(data, "prompt"), reply.Str(data, "token_id"))
	}
}

// retry prints one scheduled retry: `lead: retrying in 2s (attempt 1 of 4
// failed): 429 from openai`.
func (n *Watcher) retry(path string, attempt, maxRetries, delayMS int64, errText string) {
	of := ""
	if maxRetries > 0 {
		of = fmt.Sprintf(" of %d", maxRetries+1)
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	fmt.Fprintf(n.cfg.Stderr, "%s: retrying in %s (attempt %d%s failed): %s\n", path, fmtDelay(delayMS), attempt, of, oneLine(errText))
}

// retryOnce prints a retry of a logged turn.retry entry once (the live
// stream and the final sweep may both see it).
func (n *Watcher) retryOnce(path, runID string, attempt, maxRetries, delayMS int64, errText string) {
	key := fmt.Sprintf("%s/%d", runID, attempt)
	n.mu.Lock()
	seen := n.retries[key]
	n.retries[key] = true
	n.mu.Unlock()
	if !seen {
		n.retry(path, attempt, maxRetries, delayMS, errText)
	}
}

// targetPath is the target's path (its id until the tree is known).
func (n *Watcher) targetPath() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	if p := n.paths[n.target]; p != "" {
		return p
	}
	return n.target
}

// wait prints a wait that began, once per token id.
func (n *Watcher) wait(path, kind, prompt, tokenID string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if tokenID == "" || n.shown[tokenID] {
		return
	}
	n.shown[tokenID] = true
	fmt.Fprint(n.cfg.Stderr, waitText(n.cfg.HomeArg, path, kind, prompt, tokenID))
}

// waitText describes a wait and the command that answers it by token id.
func waitText(homeArg, ref, kind, prompt, tokenID string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s is waiting for input", ref)
	if kind != "" {
		fmt.Fprintf(&b, " (%s)", kind)
	}
	fmt.Fprintf(&b, ": %s\n", prompt)
	fmt.Fprintf(&b, "token id: %s\n", tokenID)
	fmt.Fprintf(&b, "answer with: warren agent resume %s%s --token-id %s RESPONSE\n", render.ShellQuote(ref), homeArg, render.ShellQuote(tokenID))
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
	return render.Cut(s, 300)
}
