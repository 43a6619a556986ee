package remote

import (
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/nats-io/nats.go"
)

// stderrSink keeps what workers send of their sessions' stderr
// (StderrSubject) in each agent's stderr.log, as the daemon keeps a local
// process's. Output for a session the daemon does not hold (stopped,
// moved, or never its own), or sent by a worker other than the session's,
// is dropped.
type stderrSink struct {
	sub *nats.Subscription

	mu sync.Mutex
	m  map[string]stderrRoute // by session id
}

// stderrRoute is where a session's stderr goes: its agent's stderr log,
// from the worker that holds the session.
type stderrRoute struct {
	worker string
	w      io.Writer
}

func newStderrSink(nc *nats.Conn, daemon string) (*stderrSink, error) {
	s := &stderrSink{m: map[string]stderrRoute{}}
	sub, err := nc.Subscribe(stderrWildcard(daemon), s.handle)
	if err != nil {
		return nil, fmt.Errorf("workers: subscribing to the sessions' stderr: %w", err)
	}
	s.sub = sub
	return s, nil
}

// handle writes one message to its session's log. The subscription's
// messages come one at a time, in the order the worker sent them.
// The write is made under s.mu, so that once remove returns nothing more
// is written to the session's log (its owner may release it then).
func (s *stderrSink) handle(m *nats.Msg) {
	parts := strings.Split(m.Subject, ".") // warren.stderr.<daemon>.<worker>.<session>
	if len(parts) != 5 {
		return
	}
	worker, session := parts[3], parts[4]
	s.mu.Lock()
	defer s.mu.Unlock()
	if r, ok := s.m[session]; ok && r.worker == worker && len(m.Data) <= StderrChunkMax {
		_, _ = r.w.Write(m.Data) // a stderr log's writes never fail, nor block on anything but its file
	}
}

// add routes session's stderr, sent by worker, to w until remove.
func (s *stderrSink) add(session, worker string, w io.Writer) {
	s.mu.Lock()
	s.m[session] = stderrRoute{worker: worker, w: w}
	s.mu.Unlock()
}

func (s *stderrSink) remove(session string) {
	s.mu.Lock()
	delete(s.m, session)
	s.mu.Unlock()
}

func (s *stderrSink) close() { _ = s.sub.Unsubscribe() }
