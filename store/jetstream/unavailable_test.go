package jetstream

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/store"
)

// TestUnavailableIsOnlyTheServersNotAnswering: the failures of a cluster
// electing leaders or losing a server are store.ErrUnavailable (callers
// wait and retry); damage and refusals about the data are not.
func TestUnavailableIsOnlyTheServersNotAnswering(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{&jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}, true},
		{fmt.Errorf("read: %w", context.DeadlineExceeded), true},
		{nats.ErrTimeout, true},
		{nats.ErrNoResponders, true},
		{jetstream.ErrNoHeartbeat, true},
		{jetstream.ErrConsumerLeadershipChanged, true},
		{&jetstream.APIError{Code: 400, ErrorCode: jetstream.JSErrCodeStreamWrongLastSequence}, false},
		{fmt.Errorf("line 3: %w", eventlog.ErrCorrupt), false},
		{store.ErrFenced, false},
		{context.Canceled, false},
		{nil, false},
	} {
		got := errors.Is(unavailable(c.err), store.ErrUnavailable)
		if got != c.want {
			t.Errorf("unavailable(%v) is ErrUnavailable: %v, want %v", c.err, got, c.want)
		}
	}
}

// TestRetryingWaitsOutUnansweredRequests: an operation the servers do not
// answer is tried again with a growing backoff until it succeeds; one
// refused for another reason is not retried.
func TestRetryingWaitsOutUnansweredRequests(t *testing.T) {
	s := &Store{o: Options{Logger: hclog.NewNullLogger()}}
	calls := 0
	err := s.retrying(context.Background(), "test", func(context.Context) error {
		calls++
		if calls < 3 {
			return nats.ErrTimeout
		}
		return nil
	})
	if err != nil || calls != 3 {
		t.Fatalf("retrying: err %v after %d calls; want nil after 3", err, calls)
	}
	calls = 0
	err = s.retrying(context.Background(), "test", func(context.Context) error { calls++; return store.ErrFenced })
	if !errors.Is(err, store.ErrFenced) || calls != 1 {
		t.Fatalf("a refusal was retried: err %v after %d calls", err, calls)
	}
	if retryDelay(1) != retryFirst || retryDelay(2) != 2*retryFirst || retryDelay(retryAttempts) != retryMax {
		t.Fatalf("backoff %v %v %v", retryDelay(1), retryDelay(2), retryDelay(retryAttempts))
	}
	total := time.Duration(0)
	for n := 1; n < retryAttempts; n++ {
		total += retryDelay(n)
	}
	if total < 10*time.Second {
		t.Fatalf("the retries wait %v in all; an election takes seconds", total)
	}
}
