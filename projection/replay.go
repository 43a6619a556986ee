package projection

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/inbox"
)

// The projection's recovery mode: while recovery replays a log, messages
// are kept raw and only those still pending at the end are decoded.

// lazyInbox holds, during a recovery replay, the messages still pending,
// in order: a small message.enqueued entry raw, decoded only if the message
// is still pending at the end (most messages of a long log were delivered
// long ago); a larger one decoded at once and kept without its payload, so
// that recovery never holds every payload in memory.
type lazyInbox struct {
	order []msgKey
	msgs  map[msgKey]lazyMsg
	// arena holds the bytes the replay keeps (raw messages, the results
	// of the open run's calls) in large chunks rather than one allocation
	// each; it goes with the replay (endReplay copies what stays). Its
	// chunks come from scratch, when the replay has one, and go back to
	// it when the replay ends (taken: the ones it took).
	arena   []byte
	scratch *Scratch
	taken   [][]byte
	// sent is the array State.Sent's window moves along while replaying.
	sent []SentRef
	// calls is an ended run's array of calls, for the next run's.
	calls []Call
	// start holds the raw prompt and message_ids of startOf's turn.start
	// (nil startOf: the run's own fields hold them), copied into buffers
	// each turn.start reuses; settleStart decodes them.
	start             startRaw
	startOf           *Run
	promptBuf, idsBuf []byte
	// names are the tool names the replay shares when it has no Scratch.
	names map[string]string
	// ids is the memory the enqueued ids' merges use (IDSet.replay).
	ids *idWork
	// to holds the recipients' ids the replay shares (recipient).
	to map[string]string
	// refs holds the sent-message refs of the latest run's calls
	// (sentRefs); a new run starts it again, as the calls of the run
	// before are let go, and EndReplayMany copies the open run's out.
	refs []SentRef
}

// holdStart keeps the raw values of run r's turn.start (borrowed from
// the entry) until the replay ends or the next turn.start.
func (lz *lazyInbox) holdStart(r *Run, raw startRaw) {
	lz.startOf = r
	lz.start.prompt = keepIn(&lz.promptBuf, raw.prompt)
	lz.start.msgIDs = keepIn(&lz.idsBuf, raw.msgIDs)
}

// keepIn copies v into *buf (reused); nil stays nil.
func keepIn(buf *[]byte, v []byte) []byte {
	if v == nil {
		return nil
	}
	*buf = append((*buf)[:0], v...)
	return *buf
}

// settleStart decodes into the latest run the turn.start values the
// replay kept raw. The fold goes on replaying after it; everything that
// reads a run while replaying (EndReplayMany, CheckRun, Fingerprint)
// calls it first.
func (p *State) settleStart() error {
	lz := p.lazy
	if lz == nil || lz.startOf == nil {
		return nil
	}
	r := lz.startOf
	lz.startOf = nil
	var err error
	r.Prompt, r.MessageIDs, err = lz.start.values()
	return err
}

// spare keeps an ended run's calls' array for the next run (nil lz: not
// replaying, it goes).
func (lz *lazyInbox) spare(calls []Call) {
	if lz != nil && cap(calls) > cap(lz.calls) {
		clear(calls)
		lz.calls = calls[:0]
	}
}

// spareCalls hands the array spare kept to a run's first call (nil:
// none).
func (lz *lazyInbox) spareCalls() []Call {
	c := lz.calls
	lz.calls = nil
	return c
}

// arenaChunk is the size of the arena's chunks.
const arenaChunk = 64 << 10

// Scratch is memory that replays borrow and give back when they end:
// the arena chunks of one replay serve the next. A recovery folding many
// logs gives each of its goroutines one, so that the chunks (most of
// what a replay allocates) are made a few times rather than once per
// log. It is not safe for concurrent use: one replay at a time.
type Scratch struct {
	chunks [][]byte
	names  map[string]string
	// The pending messages' map and order, and the enqueued ids' merge
	// memory, of the last replay that ended.
	msgs  map[msgKey]lazyMsg
	order []msgKey
	ids   *idWork
}

// recipient returns b as a string, the same string for the same
// recipient while the replay lasts (an agent sends to a few others, over
// and over).
func (lz *lazyInbox) recipient(b []byte) string { return intern(&lz.to, b) }

// name returns b as a string, the same string for the same tool name
// while the replay (or its Scratch) lasts: every run of a long log calls
// the same few tools, and only the latest run's calls are kept.
func (lz *lazyInbox) name(b []byte) string {
	if lz.scratch != nil {
		return intern(&lz.scratch.names, b)
	}
	return intern(&lz.names, b)
}

// maxNames bounds the strings an intern table keeps: a few dozen tools
// exist, an agent sends to a few others; past the bound none is shared.
const maxNames = 256

// intern returns b as a string, the one *m holds when it has it.
func intern(m *map[string]string, b []byte) string {
	if s, ok := (*m)[string(b)]; ok {
		return s
	}
	s := string(b)
	if len(*m) < maxNames {
		if *m == nil {
			*m = map[string]string{}
		}
		(*m)[s] = s
	}
	return s
}

// chunk is an empty arena chunk of at least n bytes.
func (lz *lazyInbox) chunk(n int) []byte {
	if s := lz.scratch; s != nil && n <= arenaChunk {
		var c []byte
		if k := len(s.chunks); k > 0 {
			c, s.chunks = s.chunks[k-1][:0], s.chunks[:k-1]
		} else {
			c = make([]byte, 0, arenaChunk)
		}
		lz.taken = append(lz.taken, c)
		return c
	}
	return make([]byte, 0, max(arenaChunk, n))
}

// giveBack hands the chunks the replay took back to its scratch. Only
// EndReplayMany calls it, once nothing the projection keeps is in them.
func (lz *lazyInbox) giveBack() {
	if s := lz.scratch; s != nil {
		s.chunks = append(s.chunks, lz.taken...)
		lz.taken, lz.arena = nil, nil
		clear(lz.msgs)
		clear(lz.order)
		s.msgs, s.order, s.ids = lz.msgs, lz.order[:0], lz.ids
		lz.msgs, lz.order, lz.ids = nil, nil, nil
	}
}

// keep copies b into the arena.
func (lz *lazyInbox) keep(b []byte) json.RawMessage {
	if len(b) == 0 {
		return cloneRaw(b)
	}
	if cap(lz.arena)-len(lz.arena) < len(b) {
		lz.arena = lz.chunk(len(b))
	}
	n := len(lz.arena)
	lz.arena = append(lz.arena, b...)
	return lz.arena[n:len(lz.arena):len(lz.arena)]
}

// msgKey is a pending message's id as a replay keys it: an id of 32
// lowercase hex digits (every id the daemon makes) by its 16 bytes, so
// that a line's id is found without making a string of it; any other id
// as it is.
type msgKey struct {
	hex   [16]byte
	isHex bool
	other string
}

// keyOf is the key of id.
func keyOf[T string | []byte](id T) msgKey {
	if k, ok := parseID16(id); ok {
		return msgKey{hex: k, isHex: true}
	}
	return msgKey{other: string(id)}
}

// String is the id.
func (k msgKey) String() string {
	if k.isHex {
		return hex.EncodeToString(k.hex[:])
	}
	return k.other
}

// lazyMsg is one pending message during a replay: raw data and where it
// is, or the decoded message (payload spilled when large).
type lazyMsg struct {
	key msgKey // the key it is under
	raw json.RawMessage
	ref inbox.Ref
	msg *inbox.Message
}

// where is the message's line.
func (lm lazyMsg) where() inbox.Ref {
	if lm.msg != nil {
		return lm.msg.Ref
	}
	return lm.ref
}

// lazyRawMax is the largest message.enqueued data a replay keeps raw.
const lazyRawMax = 2 * ResidentPayload

// add appends a pending message; the order list drops delivered ids once
// they are most of it, so it stays proportional to what is pending.
func (lz *lazyInbox) add(id msgKey, lm lazyMsg) {
	if n := len(lz.order); n >= 64 && n > 2*len(lz.msgs) {
		kept := lz.order[:0]
		for _, o := range lz.order {
			if _, ok := lz.msgs[o]; ok {
				kept = append(kept, o)
			}
		}
		clear(lz.order[len(kept):])
		lz.order = kept
	}
	lz.order = append(lz.order, id)
	lm.key = id
	lz.msgs[id] = lm
}

// BeginReplay switches the fold to its recovery mode, with the replay's
// arena borrowed from s (nil: its own), given back by EndReplayMany.
func (p *State) BeginReplay(s *Scratch) {
	lz := &lazyInbox{scratch: s}
	if s != nil {
		// What the last replay gave back (none after one that failed).
		lz.msgs, lz.order, lz.ids = s.msgs, s.order, s.ids
		s.msgs, s.order, s.ids = nil, nil, nil
	}
	if lz.msgs == nil {
		lz.msgs = map[msgKey]lazyMsg{}
	}
	if lz.ids == nil {
		lz.ids = &idWork{}
	}
	p.lazy = lz
	p.Enqueued.replay(lz.ids)
}

// Loader reads back the message.enqueued lines at refs: fn gets each
// line's data with its index in refs, once per index, in any order.
type Loader func(refs []inbox.Ref, fn func(i int, data json.RawMessage) error) error

// EndReplay is EndReplayMany with load called once per line.
func (p *State) EndReplay(load func(inbox.Ref) (json.RawMessage, error)) error {
	var many Loader
	if load != nil {
		many = func(refs []inbox.Ref, fn func(int, json.RawMessage) error) error {
			for i, r := range refs {
				data, err := load(r)
				if err != nil {
					return err
				}
				if err := fn(i, data); err != nil {
					return err
				}
			}
			return nil
		}
	}
	return p.EndReplayMany(many)
}

// replayChunk is how many pending messages EndReplayMany reads back at a
// time.
const replayChunk = 4096

// EndReplayMany decodes the messages still pending into the inbox queue,
// in order; load reads the data of those a checkpoint kept by reference
// (neither raw nor decoded), a chunk of them at a time, and each must be
// that message, to this agent.
func (p *State) EndReplayMany(load Loader) error {
	if err := p.settleStart(); err != nil {
		return err
	}
	lz := p.lazy
	p.lazy = nil
	if lz == nil {
		return nil
	}
	// What stays is copied out of the arena below (the calls' results
	// here, the messages by their decoding), whether or not it all works.
	defer lz.giveBack()
	p.Enqueued.settle()
	if r := p.Run; r != nil {
		// The open run's call results and sent refs outlive the replay:
		// off the arena and the refs' array.
		for i := range r.Calls {
			r.Calls[i].Result = cloneRaw(r.Calls[i].Result)
			r.Calls[i].Messages = slices.Clone(r.Calls[i].Messages)
		}
	}
	var chunk []lazyMsg
	for _, id := range lz.order {
		lm, ok := lz.msgs[id]
		if !ok {
			continue
		}
		chunk = append(chunk, lm)
		if len(chunk) == replayChunk {
			if err := p.pushReplayed(chunk, load); err != nil {
				return err
			}
			chunk = chunk[:0]
		}
	}
	return p.pushReplayed(chunk, load)
}

// pushReplayed pushes a chunk of replayed pending messages, in order,
// reading back those kept by reference.
func (p *State) pushReplayed(chunk []lazyMsg, load Loader) error {
	var refs []inbox.Ref
	var at []int // chunk index of each ref
	for i, lm := range chunk {
		if lm.msg == nil && lm.raw == nil {
			refs = append(refs, lm.ref)
			at = append(at, i)
		}
	}
	read := make([]json.RawMessage, len(chunk))
	if len(refs) > 0 {
		// Pending since the checkpoint recovery started from: the data is
		// read back from the lines.
		if load == nil {
			return fmt.Errorf("pending message %s: no data and no log to read it from", chunk[at[0]].key)
		}
		err := load(refs, func(i int, data json.RawMessage) error {
			if i < 0 || i >= len(at) {
				return fmt.Errorf("line %d read back for no message", i)
			}
			read[at[i]] = data
			return nil
		})
		if err != nil {
			return fmt.Errorf("pending messages: %w", err)
		}
	}
	for i, lm := range chunk {
		if lm.msg != nil {
			p.Pending.Push(*lm.msg)
			continue
		}
		raw, byRef := lm.raw, lm.raw == nil
		if byRef {
			if raw = read[i]; raw == nil {
				return fmt.Errorf("pending message %s: its line was not read back", lm.key)
			}
		}
		m, err := messageFromData(raw)
		if err != nil {
			return fmt.Errorf("pending message %s: %w", lm.key, err)
		}
		if byRef && (keyOf(m.ID) != lm.key || m.Recipient != p.ID) {
			return mismatch("pending message %s: the line at seq %d is message %s to %s", lm.key, lm.ref.Seq, m.ID, m.Recipient)
		}
		p.Pending.Push(Queued(m, eventlog.Entry{Seq: lm.ref.Seq, Off: lm.ref.Off}))
	}
	return nil
}

// take removes delivered message ids from the inbox.
func (p *State) take(ids []string) {
	if p.lazy != nil {
		for _, id := range ids {
			p.takeKey(keyOf(id))
		}
		return
	}
	p.Taken += len(p.Pending.Take(ids))
}

// takeOne removes one delivered message id (given as bytes: no copy
// unless the live inbox needs one).
func (p *State) takeOne(id []byte) {
	if p.lazy != nil {
		p.takeKey(keyOf(id))
		return
	}
	p.Taken += len(p.Pending.Take([]string{string(id)}))
}

// takeKey removes a delivered message from the replay's pending ones.
func (p *State) takeKey(k msgKey) {
	if _, ok := p.lazy.msgs[k]; ok {
		delete(p.lazy.msgs, k)
		p.Taken++
	}
}

// pendingLen counts pending messages in either mode.
func (p *State) PendingLen() int {
	if p.lazy != nil {
		return len(p.lazy.msgs)
	}
	return p.Pending.Len()
}

// messageIDOf finds message_id in message.enqueued data without a full
// decode: the data is a JSON object with sorted keys whose "kind" value
// comes first, so the first "message_id" key is the real one when it is
// the only one (a second goes to the full decode).
func messageIDOf(data []byte) ([16]byte, bool) {
	const key = `"message_id":"`
	i := bytes.Index(data, []byte(key))
	if i < 0 || len(data) < i+len(key)+33 {
		return [16]byte{}, false
	}
	if data[i+len(key)+32] != '"' {
		return [16]byte{}, false
	}
	if bytes.Contains(data[i+len(key)+33:], []byte(key)) {
		// A second one (a repeated key, whose last encoding/json takes,
		// or a metadata key): the full decode's case.
		return [16]byte{}, false
	}
	return parseID16(data[i+len(key) : i+len(key)+32])
}

// keepRaw copies b for the projection to keep: into the replay's arena
// while replaying.
func (p *State) keepRaw(b []byte) json.RawMessage {
	if p.lazy != nil {
		return p.lazy.keep(b)
	}
	return cloneRaw(b)
}

func cloneRaw(b []byte) json.RawMessage {
	if b == nil {
		return nil
	}
	return append(json.RawMessage(nil), b...)
}

// refOf is where entry e's line is (its offset -1 when not known, as
// entryOff).
func refOf(e eventlog.Entry) inbox.Ref { return inbox.Ref{Seq: e.Seq, Off: entryOff(e)} }

// entryOff is the offset of an entry's line, or -1 when it is not known:
// entries replayed from the pending file carry offset 0 (only seq 1 can
// really be there).
func entryOff(e eventlog.Entry) int64 {
	if e.Off == 0 && e.Seq != 1 {
		return -1
	}
	return e.Off
}
