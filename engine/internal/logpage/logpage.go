// Package logpage reads an agent's log a page at a time (agent.log): the
// entries from a seq on, at most a number of them and, beyond the first,
// about a number of bytes of data, so that a page always fits in a reply.
// Cursors remember where the next page of a log starts, so that paging
// reads each line once.
//
// # Locks
//
// Cursors has a mutex of its own, a leaf held only for its map. Read
// takes no lock.
package logpage

import (
	"errors"
	"io"
	"sync"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/store"
)

// maxCursors bounds the cursors one log keeps (a few, for concurrent
// readers).
const maxCursors = 8

// Cursors maps the first seq of the next page of one log to the offset of
// its line. The zero value is empty and ready.
type Cursors struct {
	mu sync.Mutex
	m  map[uint64]int64
}

// Off is the offset of line seq, if a page ended before it (0: unknown,
// the reader then scans).
func (c *Cursors) Off(seq uint64) int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[seq]
}

// remember records that the next page starts at seq, at byte off.
func (c *Cursors) remember(seq uint64, off int64) {
	if off <= 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.m == nil {
		c.m = map[uint64]int64{}
	}
	if len(c.m) >= maxCursors {
		for k := range c.m {
			delete(c.m, k)
			break
		}
	}
	c.m[seq] = off
}

// Read reads one page from r (a reader of the log from the page's first
// seq): at most limit entries and, beyond the first, about maxBytes of
// data. more says entries follow; where they start is remembered in cur.
func Read(r store.Reader, limit, maxBytes int, cur *Cursors) (entries []eventlog.Entry, more bool, err error) {
	var size int
	for {
		e, err := r.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return entries, false, nil
			}
			return entries, false, err
		}
		size += len(e.Data)
		if len(entries) == limit || (len(entries) > 0 && size > maxBytes) {
			cur.remember(e.Seq, e.Off)
			return entries, true, nil
		}
		entries = append(entries, e)
	}
}
