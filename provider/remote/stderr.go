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
// moved, or never its own) is dropped.
type stderrSink struct {
	sub *nats.Subscription

	mu sync.Mutex
	m  map[string]io.Writer // session id: its agent's stderr log
}

func newStderrSink(nc *nats.Conn, daemon string) (*stderrSink, error) {
	s := &stderrSink{m: map[string]io.Writer{}}
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
	session := m.Subject[strings.LastIndexByte(m.Subject, '.')+1:]
	s.mu.Lock()
	defer s.mu.Unlock()
	if w := s.m[session]; w != nil && len(m.Data) <= StderrChunkMax {
		_, _ = w.Write(m.Data) // a stderr log's writes never fail, nor block on anything but its file
	}
}

// add routes session's stderr to w until remove.
func (s *stderrSink) add(session string, w io.Writer) {
	s.mu.Lock()
	s.m[session] = w
	s.mu.Unlock()
}

func (s *stderrSink) remove(session string) {
	s.mu.Lock()
	delete(s.m, session)
	s.mu.Unlock()
}

func (s *stderrSink) close() { _ = s.sub.Unsubscribe() }
