package jetstream

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/nats-io/nats-server/v2/server"
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

// signalWriter closes seen when a log line containing want is written.
type signalWriter struct {
	want string
	seen chan struct{}
	once sync.Once
}

func (w *signalWriter) Write(p []byte) (int, error) {
	if strings.Contains(string(p), w.want) {
		w.once.Do(func() { close(w.seen) })
	}
	return len(p), nil
}

// TestNewWaitsForJetStream: New's creates of the stream and buckets are
// sent again when the servers do not answer (here JetStream is not
// enabled yet, so there are no responders; in CI a busy disk once made
// the bucket create outlast its timeout), instead of failing the start.
func TestNewWaitsForJetStream(t *testing.T) {
	srv, err := server.NewServer(&server.Options{ServerName: "late", Host: "127.0.0.1", Port: -1, NoSigs: true, NoLog: true})
	if err != nil {
		t.Fatal(err)
	}
	go srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("the server did not start")
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	nc := connect(t, srv.ClientURL())
	w := &signalWriter{want: "trying again", seen: make(chan struct{})}
	logger := hclog.New(&hclog.LoggerOptions{Output: w, Level: hclog.Warn})
	done := make(chan error, 1)
	go func() {
		// Replicas and OwnerTTL given: no lookups of existing settings.
		// UnsafeLazyFsync: the server's sync setting cannot be asked
		// without a system account.
		s, err := New(context.Background(), Options{Conn: nc, Node: "n1", BootID: "b1", Replicas: 1,
			OwnerTTL: 3 * time.Second, Timeout: 2 * time.Second, UnsafeLazyFsync: true, Logger: logger})
		if err == nil {
			err = s.Close()
		}
		done <- err
	}()
	select {
	case <-w.seen:
	case err := <-done:
		t.Fatalf("New returned before JetStream was there: %v", err)
	}
	if err := srv.EnableJetStream(&server.JetStreamConfig{StoreDir: t.TempDir(), SyncAlways: true}); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("New after JetStream came up: %v", err)
	}
}
