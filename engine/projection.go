package engine

import (
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
