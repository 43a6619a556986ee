package llm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/warren-dev/warren/internal/sse"
	"github.com/warren-dev/warren/provider"
)

// entry is one transcript message with its cached encoding.
type entry struct {
	m   Message
	enc []byte // nil until first encoded (without the cache mark)
}

// session is one agent's conversation with an entry. The transcript holds
// the completed turns; a turn in progress lives in Send until it succeeds.
type session struct {
	p    *Provider
	spec provider.Spec

	mu      sync.Mutex // guards stopped (Stop may run beside Send)
	stopped bool

	// Owned by Send (never concurrent).
	msgs   []entry
	turns  []int // index in msgs of each completed turn's first message
	cut    int   // completed turns left out of requests (context budget)
	note   entry // stands in for the cut turns
	head   []byte
	hkey   headKey
	empty  bool // the head leaves the messages array empty
	key    string
	red    *redactor   // the redactor of key (post makes it when the key changes)
	nparts int         // the last request's number of body pieces (to size the next list)
	sse    *sse.Reader // reused for every response (its buffer with it)

	// Encoded counts the bytes the last request had to encode (the rest
	// came from the cache), for benchmarks and tests.
	Encoded int
	// Sent counts the bytes of the last request body.
	Sent int
}

// headKey is what the cached head depends on.
type headKey struct {
	model     string
	maxTokens int
}

var comma = []byte{','}

func (p *Provider) newSession(spec provider.Spec) *session {
	s := &session{p: p, spec: spec}
	for i, t := range spec.History {
		s.turns = append(s.turns, len(s.msgs))
		for _, m := range TurnMessages(t, i) {
			s.msgs = append(s.msgs, entry{m: m})
		}
	}
	return s
}

// Handle implements provider.Session: there is no native handle.
func (s *session) Handle() string { return "" }

// Suspend implements provider.Session: nothing to keep (the log is the
// transcript).
func (s *session) Suspend(ctx context.Context) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return nil, nil
}

// Stop implements provider.Session. Idle connections belong to the entry.
func (s *session) Stop() error {
	s.mu.Lock()
	s.stopped = true
	s.mu.Unlock()
	return nil
}

func (s *session) isStopped() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stopped
}

func (s *session) system() string {
	if s.spec.System != "" {
		return s.spec.System
	}
	return s.spec.Instructions
}

// ensureHead (re-)encodes the head when its inputs changed.
func (s *session) ensureHead(st Settings) error {
	k := headKey{model: s.spec.Model, maxTokens: st.MaxTokens}
	if s.head != nil && k == s.hkey {
		return nil
	}
	head, empty, err := s.p.wire.AppendHead(nil, Head{Model: s.spec.Model, System: s.system(), MaxTokens: st.MaxTokens, Tools: s.p.tools})
	if err != nil {
		return provider.Permanent(fmt.Errorf("encoding the request head: %w", err))
	}
	s.head, s.hkey, s.empty = head, k, empty
	s.Encoded += len(head)
	return nil
}

// encode fills e's cached encoding.
func (s *session) encode(e *entry) {
	if e.enc == nil {
		e.enc = s.p.wire.AppendMessage(nil, &e.m, false)
		s.Encoded += len(e.enc)
	}
}

// applyBudget leaves the oldest completed turns out of the request when its
// estimate exceeds the budget: it cuts until the estimate is at most half
// the budget (or no completed turn is left), so the prefix then stays the
// same for many requests.
func (s *session) applyBudget(st Settings, pending []entry) {
	size := len(s.head)
	for i := range pending {
		s.encode(&pending[i])
		size += len(pending[i].enc) + 1
	}
	from := len(s.msgs)
	if s.cut < len(s.turns) {
		from = s.turns[s.cut]
	}
	for i := from; i < len(s.msgs); i++ {
		s.encode(&s.msgs[i])
		size += len(s.msgs[i].enc) + 1
	}
	budget := st.ContextBudget * BytesPerToken
	if size <= budget || s.cut >= len(s.turns) {
		return
	}
	for size > budget/2 && s.cut < len(s.turns) {
		end := len(s.msgs)
		if s.cut+1 < len(s.turns) {
			end = s.turns[s.cut+1]
		}
		for i := s.turns[s.cut]; i < end; i++ {
			size -= len(s.msgs[i].enc) + 1
			s.msgs[i] = entry{} // never sent again by this session: free it
		}
		s.cut++
	}
	s.note = entry{m: Message{Role: RoleUser, Text: fmt.Sprintf(
		"[Note from warren: the %d oldest turns of this conversation are left out here to fit the context budget "+
			"(providers.%s.context_budget = %d estimated tokens). The agent's log keeps them.]",
		s.cut, s.p.opts.Name, st.ContextBudget)}}
	s.p.log.Info("context budget reached: oldest turns left out of the requests", "agent", s.spec.AgentID,
		"turns_left_out", s.cut, "budget", st.ContextBudget)
}

// body assembles a request from the cached encodings: head, the note and
// the kept completed turns, the turn in progress, tail. Only the last
// message is encoded again when the wire marks it.
func (s *session) body(pending []entry) (*parts, int) {
	// A fresh list each request: the transport may still read the last
	// request's body after its response came (net/http's RoundTrip closes
	// a body "even after RoundTrip returns"), so that one is not reused.
	bufs := make([][]byte, 0, s.nparts+2*len(pending)+4)
	bufs = append(bufs, s.head)
	first := s.empty
	add := func(b []byte) {
		if !first {
			bufs = append(bufs, comma)
		}
		first = false
		bufs = append(bufs, b)
	}
	if s.cut > 0 {
		s.encode(&s.note)
		add(s.note.enc)
	}
	from := len(s.msgs)
	if s.cut < len(s.turns) {
		from = s.turns[s.cut]
	}
	for i := from; i < len(s.msgs); i++ {
		s.encode(&s.msgs[i])
		add(s.msgs[i].enc)
	}
	for i := range pending {
		if i == len(pending)-1 && s.p.wire.MarksLast() {
			marked := s.p.wire.AppendMessage(nil, &pending[i].m, true)
			s.Encoded += len(marked)
			add(marked)
			continue
		}
		s.encode(&pending[i])
		add(pending[i].enc)
	}
	bufs = append(bufs, s.p.wire.Tail())
	size := 0
	for _, b := range bufs {
		size += len(b)
	}
	s.nparts = len(bufs)
	return &parts{list: bufs}, size
}

// parts reads a request body from its pieces without copying them into one
// buffer and without changing them (unlike net.Buffers): the pieces are
// the session's cached encodings, shared by every request.
type parts struct {
	list [][]byte
	i    int
	off  int
}

func (p *parts) Read(b []byte) (int, error) {
	n := 0
	for n < len(b) && p.i < len(p.list) {
		c := copy(b[n:], p.list[p.i][p.off:])
		n += c
		p.off += c
		if p.off == len(p.list[p.i]) {
			p.i, p.off = p.i+1, 0
		}
	}
	if n == 0 && p.i >= len(p.list) {
		return 0, io.EOF
	}
	return n, nil
}

// releaseReader lets the response reader go of its last body and of a
// buffer a long line grew, so an idle session holds neither (the steps of
// one turn reuse them).
func (s *session) releaseReader() {
	if s.sse != nil {
		s.sse.Release()
	}
}

// commit appends a completed turn to the transcript.
func (s *session) commit(pending []entry) {
	s.turns = append(s.turns, len(s.msgs))
	s.msgs = append(s.msgs, pending...)
}

var errStopped = errors.New("session is stopped; the daemon opens a new one")

// Stats reports the bytes the last request had to encode and the bytes of
// its body (tests and benchmarks reach it through an interface assertion).
func (s *session) Stats() (encoded, sent int) { return s.Encoded, s.Sent }
