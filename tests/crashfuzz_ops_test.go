package tests

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/warren-dev/warren/engine"
)

// The operations the fuzzer drives. Each picks its agents by index among
// the eligible ones (modulo their count), so that every command stays valid
// whatever the commands before it did (shrinking removes commands freely).
// An operation returns an error only for an unexpected outcome; step treats
// errors after a crash as expected.

func pick[T any](xs []T, i int) (T, bool) {
	var zero T
	if len(xs) == 0 {
		return zero, false
	}
	if i < 0 {
		i = -i
	}
	return xs[i%len(xs)], true
}

func (w *cfWorld) opCreateRoot(plan cfCrash) error {
	name := w.nextName()
	return w.step("create root "+name, plan, func() error {
		id, err := w.core.CreateAgent(context.Background(), engine.CreateSpec{Name: name, Provider: "inproc", Model: cfModel})
		if err != nil {
			return err
		}
		w.oracle.created[id] = cfNode{Name: name}
		w.logf("  created %s", id)
		return nil
	})
}

func (w *cfWorld) opSpawn(a int, plan cfCrash) error {
	p, ok := pick(w.alive(), a)
	if !ok {
		return nil
	}
	name := w.nextName()
	return w.step(fmt.Sprintf("spawn %s under %s", name, p.Name), plan, func() error {
		res, err := w.core.Send(context.Background(), p.ID, "spawn "+name, "", "", nil)
		if err != nil {
			return err
		}
		if res.Err != nil {
			return res.Err
		}
		id, ok := strings.CutPrefix(res.Response, "spawned ")
		if !ok {
			return fmt.Errorf("spawn turn responded %q", res.Response)
		}
		w.oracle.spawned[id] = cfNode{Name: name, Parent: p.ID}
		w.logf("  spawned %s (acked turn %s)", id, res.RunID)
		w.cov["spawn acknowledged"]++
		if !w.mem.Crashed() {
			if _, err := w.core.Inspect(context.Background(), id); err != nil {
				return fmt.Errorf("spawned child %s is not served after the turn: %w", id, err)
			}
		}
		return nil
	})
}

func (w *cfWorld) opTurn(a int, plan cfCrash) error {
	ag, ok := pick(w.alive(), a)
	if !ok {
		return nil
	}
	return w.step("turn of "+ag.Name, plan, func() error {
		res, err := w.core.Send(context.Background(), ag.ID, "hello", "", "", nil)
		if err != nil {
			return err
		}
		if res.Err != nil {
			return res.Err
		}
		if res.Response != "echo: hello" {
			return fmt.Errorf("turn responded %q", res.Response)
		}
		return nil
	})
}

// Message routes.
const (
	routeParentChild = iota
	routeChildParent
	routeSibling
	routeUser
	routeCount
)

func (w *cfWorld) routes(kind int) [][2]daemonAgent {
	all := w.alive()
	var out [][2]daemonAgent
	for _, x := range all {
		for _, y := range all {
			switch {
			case kind == routeParentChild && y.Parent == x.ID,
				kind == routeChildParent && x.Parent == y.ID,
				kind == routeSibling && x.ID != y.ID && x.Parent != "" && x.Parent == y.Parent:
				out = append(out, [2]daemonAgent{x, y})
			}
		}
		if kind == routeUser && x.Parent == "" {
			out = append(out, [2]daemonAgent{x, {ID: "USER", Name: "USER"}})
		}
	}
	return out
}

func (w *cfWorld) opSend(a, kind int, plan cfCrash) error {
	kind = (kind%routeCount + routeCount) % routeCount
	r, ok := pick(w.routes(kind), a)
	if !ok {
		return nil
	}
	from, to := r[0], r[1]
	w.names++
	text := fmt.Sprintf("m%03d", w.names)
	return w.step(fmt.Sprintf("send %s %s->%s", text, from.Name, to.Name), plan, func() error {
		res, err := w.core.CallTool(context.Background(), from.ID, "send_message", map[string]any{"recipient": to.Name, "text": text})
		if err != nil {
			return err
		}
		if e, bad := res["error"]; bad {
			return fmt.Errorf("send_message refused: %v", e)
		}
		w.logf("  acked message %v", res["message_id"])
		w.cov["message acknowledged"]++
		return nil
	})
}

func (w *cfWorld) opBroadcast(a int, plan cfCrash) error {
	var senders []daemonAgent
	for _, r := range w.routes(routeSibling) {
		if len(senders) == 0 || senders[len(senders)-1].ID != r[0].ID {
			senders = append(senders, r[0])
		}
	}
	from, ok := pick(senders, a)
	if !ok {
		return nil
	}
	w.names++
	text := fmt.Sprintf("b%03d", w.names)
	return w.step(fmt.Sprintf("broadcast %s from %s", text, from.Name), plan, func() error {
		res, err := w.core.CallTool(context.Background(), from.ID, "broadcast", map[string]any{"text": text})
		if err != nil {
			return err
		}
		if e, bad := res["error"]; bad {
			return fmt.Errorf("broadcast refused: %v", e)
		}
		return nil
	})
}

func (w *cfWorld) opCheckInbox(a int, plan cfCrash) error {
	ag, ok := pick(w.alive(), a)
	if !ok {
		return nil
	}
	return w.step("check_inbox of "+ag.Name, plan, func() error {
		res, err := w.core.CallTool(context.Background(), ag.ID, "check_inbox", nil)
		if err != nil {
			return err
		}
		if e, bad := res["error"]; bad {
			return fmt.Errorf("check_inbox refused: %v", e)
		}
		list, _ := res["messages"].([]any)
		for _, it := range list {
			if m, okm := it.(map[string]any); okm {
				w.oracle.delivered[fmt.Sprint(m["message_id"])] = ag.ID
			}
		}
		w.logf("  delivered %d", len(list))
		return nil
	})
}

func (w *cfWorld) opTerminate(a int, plan cfCrash) error {
	all := w.alive()
	hasChild := map[string]bool{}
	for _, x := range all {
		hasChild[x.Parent] = true
	}
	var leaves []daemonAgent
	for _, x := range all {
		if !hasChild[x.ID] {
			leaves = append(leaves, x)
		}
	}
	ag, ok := pick(leaves, a)
	if !ok {
		return nil
	}
	return w.step("terminate "+ag.Name, plan, func() error {
		w.oracle.terminating[ag.ID] = true
		if err := w.core.Terminate(context.Background(), ag.ID); err != nil {
			return err
		}
		w.oracle.terminated[ag.ID] = true
		return nil
	})
}

func (w *cfWorld) opEvict(a int, plan cfCrash) error {
	ag, ok := pick(w.alive(), a)
	if !ok {
		return nil
	}
	return w.step("evict "+ag.Name, plan, func() error {
		err := w.core.Evict(context.Background(), ag.ID)
		if err != nil {
			w.logf("  evict: %v", err) // not live: an expected refusal
		} else {
			w.cov["session evicted"]++
		}
		return nil
	})
}

// opRestart crashes right away (kill -9 or power loss between requests).
func (w *cfWorld) opRestart(plan cfCrash) error {
	if plan.K == 0 {
		plan.K = 1
	}
	return w.step("restart", plan, func() error {
		w.mem.Crash()
		return nil
	})
}

// opComplete: a child calls complete outside a turn: its result goes to the
// parent and the child terminates.
func (w *cfWorld) opComplete(a int, plan cfCrash) error {
	all := w.alive()
	hasChild := map[string]bool{}
	for _, x := range all {
		hasChild[x.Parent] = true
	}
	var leaves []daemonAgent
	for _, x := range all {
		if x.Parent != "" && !hasChild[x.ID] {
			leaves = append(leaves, x)
		}
	}
	ag, ok := pick(leaves, a)
	if !ok {
		return nil
	}
	return w.step("complete "+ag.Name, plan, func() error {
		w.oracle.terminating[ag.ID] = true
		w.names++
		res, err := w.core.CallTool(context.Background(), ag.ID, "complete", map[string]any{"result": fmt.Sprintf("done%03d", w.names)})
		if err != nil && !w.strict && !w.mem.Crashed() && strings.Contains(err.Error(), "handle is closed") {
			w.logf("  known bug (TestCrashfuzzBugCompleteOutsideTurnFails): %v", err)
			res, err = map[string]any{"status": "completing"}, nil
		}
		if err != nil {
			return err
		}
		if e, bad := res["error"]; bad {
			return fmt.Errorf("complete refused: %v", e)
		}
		if !w.mem.Crashed() {
			if _, err := w.core.Inspect(context.Background(), ag.ID); err == nil {
				return fmt.Errorf("%s is still served after an acknowledged complete", ag.Name)
			}
			w.oracle.terminated[ag.ID] = true
		}
		return nil
	})
}

// opParentTool: a parent calls set_agent_metadata, gate or ungate on a
// child (b selects the tool).
func (w *cfWorld) opParentTool(a, b int, plan cfCrash) error {
	r, ok := pick(w.routes(routeParentChild), a)
	if !ok {
		return nil
	}
	parent, child := r[0], r[1]
	var tool string
	args := map[string]any{"agent_name": child.Name}
	transitions := []string{"busy->idle", "*->terminated", "idle->busy", "*->*", "*->waiting"}
	switch (b%7 + 7) % 7 {
	case 0:
		tool = "set_agent_metadata"
		args["key"], args["value"] = fmt.Sprintf("k%d", b%3), fmt.Sprintf("v%d", b)
	case 1:
		tool = "set_agent_metadata"
		args["key"] = fmt.Sprintf("k%d", b%3) // no value: delete
	case 2:
		tool = "gate"
	case 3:
		tool = "ungate"
	case 4:
		tool = "permit_turn"
	default:
		tool = "subscribe"
		args["transition"] = transitions[(b/7)%len(transitions)]
		args["once"] = b%2 == 0
	}
	return w.step(fmt.Sprintf("%s %s on %s %v", parent.Name, tool, child.Name, args), plan, func() error {
		res, err := w.core.CallTool(context.Background(), parent.ID, tool, args)
		if err != nil {
			return err
		}
		if e, bad := res["error"]; bad {
			if tool == "set_agent_metadata" {
				return fmt.Errorf("%s refused: %v", tool, e)
			}
			// gate/permit/subscribe may be refused for the state the
			// child is in (permit_turn on an ungated child): fine.
			w.logf("  %s refused: %v", tool, e)
		} else {
			w.cov["parent tool "+tool]++
		}
		return nil
	})
}

// opDrainUser drains the USER inbox.
func (w *cfWorld) opDrainUser(plan cfCrash) error {
	return w.step("drain USER inbox", plan, func() error {
		msgs, err := w.core.DrainUserInbox(context.Background())
		if err != nil {
			return err
		}
		for _, m := range msgs {
			w.oracle.delivered[m.MessageID] = "USER"
		}
		return nil
	})
}

// opTurnSend runs a turn whose program sends a message (kind selects the
// route), broadcasts (kind = routeCount), or sends to every agent it may
// reach in one model step (kind = routeCount+1, the daemon's batch path;
// the first recipient twice, so the step has two messages for one inbox)
// with tool calls inside the turn, so the message ids are derived from the
// run and a re-run after a crash must not enqueue them twice.
func (w *cfWorld) opTurnSend(a, kind int, plan cfCrash) error {
	kinds := routeCount + 2
	kind = (kind%kinds + kinds) % kinds
	w.names++
	text := fmt.Sprintf("t%03d", w.names)
	var from daemonAgent
	var prompt string
	if kind == routeCount+1 {
		targets := map[string][]string{}
		var senders []daemonAgent
		for k := 0; k < routeCount; k++ {
			for _, r := range w.routes(k) {
				if targets[r[0].ID] == nil {
					senders = append(senders, r[0])
				}
				targets[r[0].ID] = append(targets[r[0].ID], r[1].Name)
			}
		}
		s, ok := pick(senders, a)
		if !ok {
			return nil
		}
		to := targets[s.ID]
		from, prompt = s, "sendall "+text+" "+to[0]+" "+strings.Join(to, " ")
		w.cov["one step of several sends"]++
	} else if kind == routeCount {
		var senders []daemonAgent
		for _, r := range w.routes(routeSibling) {
			if len(senders) == 0 || senders[len(senders)-1].ID != r[0].ID {
				senders = append(senders, r[0])
			}
		}
		s, ok := pick(senders, a)
		if !ok {
			return nil
		}
		from, prompt = s, "bcast "+text
	} else {
		r, ok := pick(w.routes(kind), a)
		if !ok {
			return nil
		}
		from, prompt = r[0], "send "+r[1].Name+" "+text
	}
	return w.step(fmt.Sprintf("turn of %s: %s", from.Name, prompt), plan, func() error {
		res, err := w.core.Send(context.Background(), from.ID, prompt, "", "", nil)
		if err != nil {
			return err
		}
		if res.Err != nil {
			return res.Err
		}
		if !strings.HasPrefix(res.Response, "sent ") {
			return fmt.Errorf("turn responded %q", res.Response)
		}
		w.cov["message sent inside a turn"]++
		return nil
	})
}

// opTurnComplete runs a child's turn that calls complete: the child
// terminates after the turn.
func (w *cfWorld) opTurnComplete(a int, plan cfCrash) error {
	all := w.alive()
	hasChild := map[string]bool{}
	for _, x := range all {
		hasChild[x.Parent] = true
	}
	var leaves []daemonAgent
	for _, x := range all {
		if x.Parent != "" && !hasChild[x.ID] {
			leaves = append(leaves, x)
		}
	}
	ag, ok := pick(leaves, a)
	if !ok {
		return nil
	}
	w.names++
	prompt := fmt.Sprintf("complete c%03d", w.names)
	return w.step("turn of "+ag.Name+": "+prompt, plan, func() error {
		w.oracle.terminating[ag.ID] = true
		res, err := w.core.Send(context.Background(), ag.ID, prompt, "", "", nil)
		if err != nil {
			return err
		}
		if res.Err != nil {
			return res.Err
		}
		if !w.mem.Crashed() {
			if _, err := w.core.Inspect(context.Background(), ag.ID); err == nil {
				return fmt.Errorf("%s is still served after its turn completed it", ag.Name)
			}
			w.oracle.terminated[ag.ID] = true
		}
		return nil
	})
}

// opCleanRestart stops the daemon cleanly (Close: cancel turns, save the
// provider state of live sessions, close the logs) and starts it again; a
// crash plan crashes the shutdown itself.
func (w *cfWorld) opCleanRestart(plan cfCrash) error {
	return w.step("clean restart", plan, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := w.core.Close(ctx); err != nil {
			return fmt.Errorf("close: %w", err)
		}
		if w.mem.Crashed() {
			return nil
		}
		c, err := w.newCoreWake(w.mem, w.wake)
		if err != nil {
			return err
		}
		if _, err := c.Recover(context.Background()); err != nil {
			return fmt.Errorf("recovery after a clean stop: %w", err)
		}
		w.core = c
		return nil
	})
}
