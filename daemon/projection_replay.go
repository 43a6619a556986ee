package daemon

import (
	"bytes"
	"encoding/json"
	"fmt"

	"github.com/warren-dev/warren/inbox"
)

// The projection's recovery mode: while recovery replays a log, messages
// are kept raw and only those still pending at the end are decoded.

// lazyInbox holds, during a recovery replay, the raw message.enqueued data
// of messages still pending, in order; only those left at the end are
// decoded (most messages of a long log were delivered long ago).
type lazyInbox struct {
	order []string
	raw   map[string]json.RawMessage
}

// beginReplay switches the fold to its recovery mode.
func (p *projection) beginReplay() {
	p.lazy = &lazyInbox{raw: map[string]json.RawMessage{}}
}

// endReplay decodes the messages still pending into the inbox queue.
func (p *projection) endReplay() error {
	lz := p.lazy
	p.lazy = nil
	if lz == nil {
		return nil
	}
	for _, id := range lz.order {
		raw, ok := lz.raw[id]
		if !ok {
			continue
		}
		m, err := inbox.FromEventData(raw)
		if err != nil {
			return fmt.Errorf("pending message %s: %w", id, err)
		}
		p.Pending.Push(m)
	}
	return nil
}

// take removes delivered message ids from the inbox.
func (p *projection) take(ids []string) {
	if p.lazy != nil {
		for _, id := range ids {
			delete(p.lazy.raw, id)
		}
		return
	}
	p.Pending.Take(ids)
}

// pendingLen counts pending messages in either mode.
func (p *projection) pendingLen() int {
	if p.lazy != nil {
		return len(p.lazy.raw)
	}
	return p.Pending.Len()
}

// messageIDOf finds message_id in message.enqueued data without a full
// decode: the data is a JSON object with sorted keys whose "kind" value
// comes first, so the first "message_id" key is the real one.
func messageIDOf(data []byte) (string, bool) {
	const key = `"message_id":"`
	i := bytes.Index(data, []byte(key))
	if i < 0 || len(data) < i+len(key)+33 {
		return "", false
	}
	id := data[i+len(key) : i+len(key)+32]
	if data[i+len(key)+32] != '"' {
		return "", false
	}
	for _, c := range id {
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return "", false
		}
	}
	return string(id), true
}

func cloneRaw(b []byte) json.RawMessage {
	if b == nil {
		return nil
	}
	return append(json.RawMessage(nil), b...)
}
