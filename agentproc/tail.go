package agentproc

import (
	"strings"
	"sync"
)

// Tail keeps the last bytes written to it: an agent process's stderr, for
// error texts. It is safe for concurrent use.
type Tail struct {
	mu        sync.Mutex
	max       int
	buf       []byte
	truncated bool
}

// NewTail returns a Tail that keeps the last max bytes.
func NewTail(max int) *Tail { return &Tail{max: max} }

// Write implements io.Writer; it never fails.
func (r *Tail) Write(b []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.buf = append(r.buf, b...)
	if over := len(r.buf) - r.max; over > 0 {
		r.buf = append(r.buf[:0], r.buf[over:]...)
		r.truncated = true
	}
	return len(b), nil
}

// String returns the kept text, starting at a line boundary and marked
// "..." when earlier output was dropped.
func (r *Tail) String() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	s := string(r.buf)
	if r.truncated {
		if i := strings.IndexByte(s, '\n'); i >= 0 && i < len(s)-1 {
			s = s[i+1:]
		}
		s = "..." + s
	}
	return s
}
