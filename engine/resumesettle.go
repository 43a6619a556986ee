package engine

import "context"

// settleSuspending waits, bounded by ctx, while the turn that logged the
// wait being answered is still unwinding: run.waiting is logged (and
// shown: the run.waiting event, the USER notice, waits.list, agent attach)
// before the turn has stopped its provider and released the agent. An
// answer sent the moment the wait is shown then lands on the wait instead
// of finding the agent mid-turn (code 2).
func (c *Core) settleSuspending(ctx context.Context, a *agent, runID string) {
	for {
		changed := c.changed.Wait()
		a.mu.Lock()
		unwinding := a.busy && a.cur != nil && a.cur.runID == runID &&
			a.p.Run != nil && a.p.Run.RunID == runID && a.p.Run.Wait != nil && !a.p.Run.Ended
		a.mu.Unlock()
		if !unwinding {
			return
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}
