package engine

import (
	fold "github.com/warren-dev/warren/projection"
)

// The agent's durable state is folded by package projection (no locks, no
// I/O); the daemon holds one per agent under the agent's lock. Short names
// for its types inside the daemon:
type (
	projection      = fold.State
	recordedCall    = fold.Call
	sentRef         = fold.SentRef
	subscriptionRec = fold.Subscription
)

// residentPayload is the largest payload a pending message keeps in memory.
const residentPayload = fold.ResidentPayload

func newProjection() *projection { return fold.New() }
