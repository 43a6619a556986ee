package jetstream

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/warren-dev/warren/store"
)

// isUnavailable reports whether err says the servers did not answer (a
// leader election in progress, a server shutting down, a connection being
// moved), as opposed to a refusal about the data: such a request may be
// tried again unchanged.
func isUnavailable(err error) bool {
	if err == nil {
		return false
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) && apiErr.Code == 503 {
		return true // "JetStream system temporarily unavailable", no leader
	}
	for _, e := range []error{
		context.DeadlineExceeded, nats.ErrTimeout, nats.ErrNoResponders, nats.ErrConnectionClosed,
		jetstream.ErrNoHeartbeat, jetstream.ErrNoStreamResponse, jetstream.ErrConsumerLeadershipChanged,
		jetstream.ErrServerShutdown, jetstream.ErrConnectionClosed,
	} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// unavailable wraps err with store.ErrUnavailable when the servers did not
// answer, so that callers can tell "try later" from damage.
func unavailable(err error) error {
	if isUnavailable(err) && !errors.Is(err, store.ErrUnavailable) {
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return err
}

// Retries of requests the servers did not answer: a backoff from
// retryFirst doubling to retryMax, retryAttempts in all (about 17 s of
// waiting, enough for a JetStream meta or stream leader election).
const (
	retryFirst    = 100 * time.Millisecond
	retryMax      = 2 * time.Second
	retryAttempts = 12
)

// retryDelay is the wait before retry n (1-based).
func retryDelay(n int) time.Duration {
	d := retryFirst
	for i := 1; i < n && d < retryMax; i++ {
		d *= 2
	}
	return min(d, retryMax)
}

// sleepCtx waits d or until ctx is done (then its error).
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// attemptTimeout bounds one attempt of a retried request: while a stream
// elects a leader a request may go unanswered until its deadline, and
// polling every few seconds finds the new leader sooner than waiting out
// the store's whole Timeout once.
const attemptTimeout = 3 * time.Second

// retried is retrying for an op with a result: what the last attempt
// returned, with its error.
func retried[T any](s *Store, ctx context.Context, what string, op func(ctx context.Context) (T, error)) (T, error) {
	var v T
	err := s.retrying(ctx, what, func(ctx context.Context) error {
		var err error
		v, err = op(ctx)
		return err
	})
	return v, err
}

// retrying runs op until it succeeds, fails for another reason than the
// servers not answering, ctx is done, or retryAttempts are used up; each
// attempt gets a context bounded by min(Timeout, attemptTimeout). The last
// error is wrapped by unavailable.
func (s *Store) retrying(ctx context.Context, what string, op func(ctx context.Context) error) error {
	limit := attemptTimeout
	if s.o.Timeout > 0 {
		limit = min(s.o.Timeout, attemptTimeout)
	}
	for n := 1; ; n++ {
		actx, cancel := context.WithTimeout(ctx, limit)
		err := op(actx)
		cancel()
		if err == nil || !isUnavailable(err) || n >= retryAttempts || ctx.Err() != nil {
			return unavailable(err)
		}
		s.o.Logger.Warn("the cluster did not answer; trying again", "op", what, "attempt", n, "err", err)
		if sleepCtx(ctx, retryDelay(n)) != nil {
			return unavailable(err)
		}
	}
}
