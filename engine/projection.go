package engine

import (
	"encoding/json"
	"fmt"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/inbox"
	fold "github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/schema"
)

// The agent's durable state is folded by package projection (no locks, no
// I/O); the daemon holds one per agent under the agent's lock. Short names
// for its types inside the daemon:
type (
	projection      = fold.State
	runFacts        = fold.Run
	waitRec         = fold.Wait
	recordedCall    = fold.Call
	sentRef         = fold.SentRef
	subscriptionRec = fold.Subscription
	spawnRec        = fold.Spawn
)

// Token states as the projection tracks them.
const (
	tokLive     = string(schema.TokLive)
	tokConsumed = string(schema.TokConsumed)
	tokRevoked  = string(schema.TokRevoked)
	tokExpired  = string(schema.TokExpired)
)

// residentPayload is the largest payload a pending message keeps in memory.
const residentPayload = fold.ResidentPayload

func newProjection() *projection { return fold.New() }

// queued makes m, just logged at e, the form an inbox keeps (as the fold
// does: fold.Queued).
func queued(m inbox.Message, e eventlog.Entry) inbox.Message { return fold.Queued(m, e) }

// decode decodes an entry's data into v.
func decode(e eventlog.Entry, v any) error {
	if err := json.Unmarshal(e.Data, v); err != nil {
		return fmt.Errorf("event %s at seq %d: bad data: %w", e.Event, e.Seq, err)
	}
	return nil
}
