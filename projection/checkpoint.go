package projection

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/warren-dev/warren/inbox"
)

// The state's own encoding, which the daemon's checkpoint file (version 2,
// checkpoint/doc.go) stores after its header line: a line of
// JSON (the State's exported fields, the pending messages by reference)
// and a line of hex ids (the enqueued set). Changing a field of State or
// of the records it holds changes that format: bump the checkpoint version.

// pendingRef locates a pending message's message.enqueued line.
type pendingRef struct {
	ID  string `json:"id"`
	Seq uint64 `json:"seq"`
	Off int64  `json:"off"`
	// Msg is a message whose payload is not resident (inbox.Message.Spill):
	// its envelope without the payload, so that recovery need not read the
	// payload back to leave it on disk again.
	Msg *inbox.Message `json:"msg,omitempty"`
}

// checkpointState is the projection as a checkpoint stores it (the
// enqueued ids travel on their own line: a JSON decoder would scan them
// character by character).
type checkpointState struct {
	P       *State       `json:"p"`
	Pending []pendingRef `json:"pending"`
	Other   []string     `json:"other_ids,omitempty"`
}

// EncodeState encodes the projection for a checkpoint: the state line and
// the hex ids line. It fails in replay mode and when a pending message's
// line is not known. Like every method of State, it must not run
// concurrently with a fold into p (the daemon holds the agent's lock).
func (p *State) EncodeState() ([]byte, error) {
	if p.lazy != nil {
		return nil, errors.New("the projection is being replayed")
	}
	msgs := p.Pending.Peek()
	refs := make([]pendingRef, 0, len(msgs))
	for _, m := range msgs {
		if m.Ref.Seq == 0 || m.Ref.Off < 0 || (m.Ref.Off == 0 && m.Ref.Seq != 1) {
			return nil, fmt.Errorf("pending message %s: its line is not known", m.ID)
		}
		ref := pendingRef{ID: m.ID, Seq: m.Ref.Seq, Off: m.Ref.Off}
		if m.Spilled() {
			ref.Msg = &m
		}
		refs = append(refs, ref)
	}
	hexIDs, others := p.Enqueued.encode()
	state, err := json.Marshal(checkpointState{P: p, Pending: refs, Other: others})
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(state)+len(hexIDs)+2)
	out = append(append(out, state...), '\n')
	return append(append(out, hexIDs...), '\n'), nil
}

// DecodeState is EncodeState's inverse: the projection, in replay mode
// with its pending messages still by reference, or an error.
func DecodeState(body []byte) (*State, error) {
	state, ids, ok := bytes.Cut(body, []byte{'\n'})
	if !ok || len(ids) == 0 || ids[len(ids)-1] != '\n' {
		return nil, errors.New("not a state line and an ids line")
	}
	p := New()
	st := checkpointState{P: p}
	if err := json.Unmarshal(state, &st); err != nil {
		return nil, err
	}
	if st.P != p {
		return nil, errors.New("no projection")
	}
	set, err := decodeIDSet(string(ids[:len(ids)-1]), st.Other)
	if err != nil {
		return nil, err
	}
	p.Enqueued = set
	if p.Metadata == nil {
		p.Metadata = map[string]string{}
	}
	if p.Subs == nil {
		p.Subs = map[string]Subscription{}
	}
	if p.Reminders == nil {
		p.Reminders = map[string]*Reminder{}
	}
	p.BeginReplay(nil)
	for _, r := range st.Pending {
		if _, dup := p.lazy.msgs[keyOf(r.ID)]; dup || !p.Enqueued.Has(r.ID) {
			return nil, fmt.Errorf("pending message %s listed twice or never enqueued", r.ID)
		}
		ref := inbox.Ref{Seq: r.Seq, Off: r.Off}
		if m := r.Msg; m != nil {
			if m.ID != r.ID || m.Ref != ref || !m.Spilled() || m.Payload != "" {
				return nil, fmt.Errorf("pending message %s: its envelope does not match its reference", r.ID)
			}
			p.lazy.add(keyOf(r.ID), lazyMsg{msg: m})
			continue
		}
		p.lazy.add(keyOf(r.ID), lazyMsg{ref: ref})
	}
	return p, nil
}
