package tests

// The fuzzer's operations on waits: suspend, resume (right, wrong or
// foreign token), deadlines, re-runs of interrupted runs, cancel.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/warren-dev/warren/engine"
	"github.com/warren-dev/warren/protocol"
)

func (w *cfWorld) opSuspend(a int, plan cfCrash) error {
	ag, ok := pick(w.alive(), a)
	if !ok {
		return nil
	}
	return w.step("suspend "+ag.Name, plan, func() error {
		res, err := w.core.Send(context.Background(), ag.ID, "ask", "", "", nil)
		if err != nil {
			return err
		}
		if res.Err != nil {
			return res.Err
		}
		if res.Status != "suspended" || res.Token == "" {
			return fmt.Errorf("ask turn ended %q with %q and no token", res.Status, res.Response)
		}
		tokID := ""
		if res.Wait != nil {
			tokID = res.Wait.TokenID
		}
		w.cov["suspend acknowledged"]++
		w.waits = append(w.waits, cfWait{Agent: ag.ID, RunID: res.RunID, TokenID: tokID, Token: res.Token})
		w.logf("  token %s run %s", tokID, res.RunID)
		return nil
	})
}

// Resume variants.
const (
	resumeRight = iota
	resumeWrongSecret
	resumeOtherAgent
	resumeCount
)

func (w *cfWorld) opResume(a, variant int, plan cfCrash) error {
	served := map[string]daemonAgent{}
	for _, x := range w.alive() {
		served[x.ID] = x
	}
	var cands []cfWait
	for _, wt := range w.waits {
		if _, ok := served[wt.Agent]; ok {
			cands = append(cands, wt)
		}
	}
	wt, ok := pick(cands, a)
	if !ok {
		return nil
	}
	variant = (variant%resumeCount + resumeCount) % resumeCount
	target, tok := wt.Agent, wt.Token
	desc := fmt.Sprintf("resume %s token %s", served[target].Name, wt.TokenID)
	switch variant {
	case resumeWrongSecret:
		tok = tok[:strings.IndexByte(tok, '.')+1] + "AAAAAAAAAAAAAAAAAAAAAA"
		desc += " (wrong secret)"
	case resumeOtherAgent:
		var others []daemonAgent
		for _, x := range w.alive() {
			if x.ID != target {
				others = append(others, x)
			}
		}
		o, okx := pick(others, a)
		if !okx {
			return nil
		}
		target = o.ID
		desc += " presented to " + o.Name
	}
	view, _ := w.core.Inspect(context.Background(), wt.Agent)
	live := false
	if wv := view.Wait; wv != nil {
		live = wv.TokenID == wt.TokenID && wv.State == "live" && w.clock.Now().Before(wv.Deadline)
	}
	return w.step(desc, plan, func() error {
		res, err := w.core.Resume(context.Background(), target, tok, "yes")
		if err == nil && res.Err != nil {
			err = res.Err
		}
		switch {
		case variant != resumeRight && err == nil:
			return fmt.Errorf("a mismatched token was accepted: %+v", res)
		case variant != resumeRight:
			if !errors.Is(err, engine.ErrTokenRejected) && !w.mem.Crashed() {
				return fmt.Errorf("a mismatched token got %v, want engine.ErrTokenRejected (wire code %d)", err, protocol.CodeTokenRejected)
			}
		case live && err != nil:
			return fmt.Errorf("a live token was refused: %w", err)
		case err == nil && res.Response != "answer: yes":
			return fmt.Errorf("resume responded %q", res.Response)
		case err != nil && !errors.Is(err, engine.ErrTokenRejected) && !w.mem.Crashed():
			return fmt.Errorf("a used token got %v, want engine.ErrTokenRejected (wire code %d)", err, protocol.CodeTokenRejected)
		}
		w.logf("  resume: live=%v err=%v", live, err)
		switch {
		case variant != resumeRight:
			w.cov["mismatched token refused"]++
		case err == nil:
			w.cov["resume accepted"]++
		default:
			w.cov["used or expired token refused"]++
		}
		return nil
	})
}

// opDeadline moves the clock past every wait's deadline and (when sweep)
// runs the deadline sweep; without it, the overdue waits stay until the
// next sweep or boot, and resumes must be refused meanwhile.
func (w *cfWorld) opDeadline(sweep bool, plan cfCrash) error {
	if !sweep {
		return w.step("clock +2h (no sweep)", plan, func() error {
			w.clock.Advance(2 * time.Hour)
			for _, x := range w.alive() {
				if x.Status == "suspended" {
					return fmt.Errorf("agent %s is still suspended after its deadline passed", x.Name)
				}
			}
			return nil
		})
	}
	return w.step("deadline (+2h, sweep)", plan, func() error {
		w.clock.Advance(2 * time.Hour)
		w.core.SweepWaits()
		if w.mem.Crashed() {
			return nil
		}
		for _, x := range w.alive() {
			if x.Status == "suspended" {
				return fmt.Errorf("agent %s is still suspended after its deadline and a sweep", x.Name)
			}
		}
		return nil
	})
}

func (w *cfWorld) opResumeInterrupted(a int, plan cfCrash) error {
	var cands []daemonAgent
	for _, x := range w.alive() {
		if x.Status == "interrupted_startup" {
			cands = append(cands, x)
		}
	}
	ag, ok := pick(cands, a)
	if !ok {
		return nil
	}
	// A run whose wait was answered before the crash must get the
	// recorded answer on re-run, not ask again.
	answered := false
	if es, err := w.core.Log(context.Background(), ag.ID, 0); err == nil {
		run := ""
		for _, e := range es {
			ce := cfEntry{Event: e.Event, Data: string(e.Data)}
			switch {
			case e.Event == "turn.start":
				if r := field(ce, "run_id"); r != run {
					run, answered = r, false
				}
			case e.Event == "run.resumed" && field(ce, "run_id") == run && field(ce, "token_id") != "":
				answered = true
			}
		}
	}
	return w.step("resume interrupted run of "+ag.Name, plan, func() error {
		res, err := w.core.Resume(context.Background(), ag.ID, "", "")
		if err != nil {
			return err
		}
		if res.Err != nil && !answered && strings.Contains(res.Err.Error(), "refused") {
			// A tool call the log does not record runs again in today's
			// tree, which may refuse it (the recipient is gone, the
			// agent has children now): the re-run fails, as it should.
			w.logf("  re-run failed: %v", res.Err)
			w.cov["re-run refused by today's tree"]++
			return nil
		}
		if res.Err != nil {
			return res.Err
		}
		w.cov["re-run of an interrupted run"]++
		if answered {
			w.cov["re-run answered from the recorded resume"]++
		}
		if answered && res.Response != "answer: yes" && !w.mem.Crashed() {
			return fmt.Errorf("the re-run of a run whose wait was answered responded %q (status %s), want the recorded answer", res.Response, res.Status)
		}
		w.logf("  re-run responded %q", res.Response)
		if id, ok := strings.CutPrefix(res.Response, "spawned "); ok {
			w.oracle.spawned[id] = cfNode{Name: "?", Parent: ag.ID}
		}
		return nil
	})
}

// opCancel cancels an agent's wait or interrupted run.
func (w *cfWorld) opCancel(a int, plan cfCrash) error {
	var cands []daemonAgent
	for _, x := range w.alive() {
		switch x.Status {
		case "suspended", "interrupted_startup", "interrupted_waiting":
			cands = append(cands, x)
		}
	}
	ag, ok := pick(cands, a)
	if !ok {
		return nil
	}
	return w.step(fmt.Sprintf("cancel %s (%s)", ag.Name, ag.Status), plan, func() error {
		if err := w.core.Cancel(context.Background(), ag.ID); err != nil {
			return err
		}
		// (with wake turns, a cancelled agent with pending messages is
		// woken at once, so only the NoWake world checks the status)
		if !w.mem.Crashed() && !w.wake {
			for _, x := range w.alive() {
				if x.ID == ag.ID && x.Status != "idle" {
					return fmt.Errorf("%s is %s after an acknowledged cancel, want idle", ag.Name, x.Status)
				}
			}
		}
		return nil
	})
}
