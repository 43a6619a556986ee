package jetstream

import (
	"fmt"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/eventlog/record"
)

// importChunk is how many lines Import publishes in one atomic batch.
const importChunk = 100

// Import appends existing SPEC 3 lines unchanged (their seq and ts, byte
// for byte), as `warren migrate` copies a local log into the stream. Each
// line must decode (CRC, content) and carry the next seq of the log.
// Chunks are atomic and fenced like appends; OnAppend is not called.
func (l *Log) Import(lines [][]byte) error {
	l.wmu.Lock()
	defer l.wmu.Unlock()
	if err := l.usable(); err != nil {
		return err
	}
	limit := int(l.s.nc.MaxPayload()) - 1024
	for i, line := range lines {
		e, err := record.DecodeLine(line)
		if err != nil {
			return fmt.Errorf("store/jetstream: import line %d into %s: %w", i+1, l.subj, err)
		}
		if err := record.CheckNext(l.lastSeq+uint64(i), e.Seq); err != nil {
			return fmt.Errorf("store/jetstream: import line %d into %s: %w", i+1, l.subj, err)
		}
		if len(line) > limit {
			return fmt.Errorf("store/jetstream: import line %d into %s: %w: %d bytes, over one NATS message", i+1, l.subj, eventlog.ErrInvalidRecord, len(line))
		}
	}
	for len(lines) > 0 {
		n := min(importChunk, len(lines))
		ack, err := l.send(l.messages(lines[:n], l.lastSeq+1, l.lastSSeq))
		if err != nil {
			l.setPoison(err)
			return err
		}
		l.advance(uint64(n), ack)
		lines = lines[n:]
	}
	return nil
}
