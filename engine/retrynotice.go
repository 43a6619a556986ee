package engine

import (
	"time"
)

// RetryNotice describes one scheduled retry of a turn (TurnRequest.OnRetry).
type RetryNotice struct {
	RunID      string
	Turn       int
	Attempt    int // the attempt that failed (1-based)
	MaxRetries int
	Error      string
	Delay      time.Duration
}
