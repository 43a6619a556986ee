package daemon

import (
	"time"

	"github.com/warren-dev/warren/schema"
)

// Progress a client sees while a turn runs (docs/DECISIONS.md, "Retries
// and waits shown as they happen"):
//
//   - agent.stream sends, for each retry of its turn, an event frame
//     {"event":"turn.retry","agent_id","run_id","turn","attempt",
//     "max_retries","error","delay_ms"} once the retry's turn.retry entry
//     is logged and before the backoff; a retry happens only before any
//     chunk of the attempt reached the client.
//   - events.subscribe with "ready": true first sends the frame
//     {"event":"subscribed"} (no agent_id, no seq) once the subscription is
//     in place: a client that starts a turn after it sees every entry the
//     turn logs (turn.retry, run.waiting, ...). agent send uses it.

// subscribedEvent is the event name of events.subscribe's ready frame.
const subscribedEvent = "subscribed"

// RetryNotice describes one scheduled retry of a turn (TurnRequest.OnRetry).
type RetryNotice struct {
	RunID      string
	Turn       int
	Attempt    int // the attempt that failed (1-based)
	MaxRetries int
	Error      string
	Delay      time.Duration
}

// frame is the notice as an agent.stream event frame.
func (n RetryNotice) frame(agentID string) map[string]any {
	return map[string]any{"event": schema.TurnRetry, "agent_id": agentID, "run_id": n.RunID, "turn": n.Turn,
		"attempt": n.Attempt, "max_retries": n.MaxRetries, "error": n.Error, "delay_ms": n.Delay.Milliseconds()}
}
