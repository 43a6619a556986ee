package engine

import (
	"context"
	"errors"
	"io"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/store"
)

// maxCursors bounds the cursors one log keeps (a few, for concurrent
// readers).
const maxCursors = 8

// An agent's log a page at a time (agent.log): the entries from a seq on,
// at most a number of them and, beyond the first, about a number of bytes
// of data, so that a page always fits in a reply. The record's cursors
// (logCursors, under its lock) remember where the next page of its log
// starts, so that paging reads each line once.

// logCursors maps the first seq of the next page of one log to the offset of
// its line. The zero value is empty and ready; its owner guards it (the
// record's lock: agent.CursorOff, agent.RememberCursor).
type logCursors struct {
	m map[uint64]int64
}

// Off is the offset of line seq, if a page ended before it (0: unknown,
// the reader then scans).
func (c *logCursors) Off(seq uint64) int64 { return c.m[seq] }

// remember records that the next page starts at seq, at byte off.
func (c *logCursors) remember(seq uint64, off int64) {
	if off <= 0 {
		return
	}
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

// readPage reads one page from r (a reader of the log from the page's first
// seq): at most limit entries and, beyond the first, about maxBytes of
// data. more says entries follow; next is the first of them (its Seq and
// Off say where the next page starts).
func readPage(r store.Reader, limit, maxBytes int) (entries []eventlog.Entry, next eventlog.Entry, more bool, err error) {
	var size int
	for {
		e, err := r.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return entries, next, false, nil
			}
			return entries, next, false, err
		}
		size += len(e.Data)
		if len(entries) == limit || (len(entries) > 0 && size > maxBytes) {
			return entries, e, true, nil
		}
		entries = append(entries, e)
	}
}

// logOpener opens a reader of log id from seq fromSeq, its line at about
// offset hint (0: unknown); store.Store.Read is one.
type logOpener func(ctx context.Context, id string, fromSeq uint64, hint int64) (store.Reader, error)

// readLogPage reads one page of a's log from fromSeq (readPage), starting
// where an earlier page said it would, and remembers where the next
// starts.
func readLogPage(ctx context.Context, open logOpener, a *agent, fromSeq uint64, limit, maxBytes int) (entries []eventlog.Entry, more bool, err error) {
	r, err := open(ctx, a.ID(), fromSeq, a.CursorOff(fromSeq))
	if err != nil {
		return nil, false, err
	}
	defer r.Close()
	entries, next, more, err := readPage(r, limit, maxBytes)
	if more {
		a.RememberCursor(next.Seq, next.Off)
	}
	return entries, more, err
}

// allPages reads a log from fromSeq to its end, page after page.
func allPages(fromSeq uint64, page func(fromSeq uint64) ([]eventlog.Entry, bool, error)) ([]eventlog.Entry, error) {
	var out []eventlog.Entry
	for {
		p, more, err := page(fromSeq)
		out = append(out, p...)
		if err != nil || !more {
			return out, err
		}
		fromSeq = p[len(p)-1].Seq + 1
	}
}
