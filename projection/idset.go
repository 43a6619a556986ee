package projection

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"io"
	"slices"
	"sort"
)

// IDSet is the set of message ids an agent's log has enqueued, kept small:
// an id of 32 lowercase hex characters (every id the daemon makes) costs 16
// bytes in a sorted array, plus a map entry until the next merge; other ids
// (a client's own) are kept as strings. It answers exactly: the
// enqueue-once rule (a message enqueued again after a crash is skipped)
// depends on it.
type IDSet struct {
	old    []byte // sorted 16-byte ids
	recent map[[16]byte]struct{}
	other  map[string]struct{}
	// work, while recovery replays the log (a merge every few dozen
	// messages), lends the map, the merge's key slice and two arrays the
	// merges alternate between; settle copies the ids out and lets it go.
	work *idWork
}

// idWork is the memory an IDSet's merges reuse while a replay lasts, and
// then the next replay's (Scratch).
type idWork struct {
	recent map[[16]byte]struct{}
	keys   [][16]byte
	bufs   [2][]byte
	cur    int // the buf old is in (-1: neither)
}

// replay makes s use w's memory until settle.
func (s *IDSet) replay(w *idWork) {
	s.merge()
	clear(w.recent)
	if w.recent == nil {
		w.recent = map[[16]byte]struct{}{}
	}
	w.cur, s.work, s.recent = -1, w, w.recent
}

// parseID16 reads an id of 32 lowercase hex digits (recovery reads one
// per message: a loop, not strings.ToLower and hex.Decode).
func parseID16[T string | []byte](id T) ([16]byte, bool) {
	var k [16]byte
	if len(id) != 32 {
		return k, false
	}
	for i := 0; i < 32; i += 2 {
		hi, ok1 := lowerHex(id[i])
		lo, ok2 := lowerHex(id[i+1])
		if !ok1 || !ok2 {
			return [16]byte{}, false
		}
		k[i/2] = hi<<4 | lo
	}
	return k, true
}

func lowerHex(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	}
	return 0, false
}

func (s *IDSet) Has(id string) bool {
	k, ok := parseID16(id)
	if !ok {
		_, found := s.other[id]
		return found
	}
	if _, found := s.recent[k]; found {
		return true
	}
	return s.inOld(k)
}

func (s *IDSet) inOld(k [16]byte) bool {
	n := len(s.old) / 16
	i := sort.Search(n, func(i int) bool { return bytes.Compare(s.old[i*16:i*16+16], k[:]) >= 0 })
	return i < n && bytes.Equal(s.old[i*16:i*16+16], k[:])
}

// add adds id; it reports false when it was there already.
func (s *IDSet) Add(id string) bool {
	if k, ok := parseID16(id); ok {
		return s.addHex(k)
	}
	if _, found := s.other[id]; found {
		return false
	}
	if s.other == nil {
		s.other = map[string]struct{}{}
	}
	s.other[id] = struct{}{}
	return true
}

// addHex is Add for an id of 32 hex digits, given as its 16 bytes.
func (s *IDSet) addHex(k [16]byte) bool {
	if _, found := s.recent[k]; found || s.inOld(k) {
		return false
	}
	if s.recent == nil {
		s.recent = map[[16]byte]struct{}{}
	}
	s.recent[k] = struct{}{}
	// Merge when the map holds an eighth of the array (at least 64 ids):
	// each id is copied a bounded number of times on average.
	if len(s.recent) >= max(64, len(s.old)/16/8) {
		s.merge()
	}
	return true
}

// merge moves the map's ids into the sorted array.
func (s *IDSet) merge() {
	if len(s.recent) == 0 {
		return
	}
	var keys [][16]byte
	if s.work != nil {
		keys = s.work.keys[:0]
	}
	for k := range s.recent {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b [16]byte) int { return bytes.Compare(a[:], b[:]) })
	var out []byte
	w := s.work
	into := 0
	if w != nil {
		// Into the array old is not in, grown as append grows it.
		if w.cur == 0 {
			into = 1
		}
		out = slices.Grow(w.bufs[into][:0], len(s.old)+16*len(keys))
	} else {
		out = make([]byte, 0, len(s.old)+16*len(keys))
	}
	i := 0
	for _, k := range keys {
		for i < len(s.old) && bytes.Compare(s.old[i:i+16], k[:]) < 0 {
			out = append(out, s.old[i:i+16]...)
			i += 16
		}
		out = append(out, k[:]...)
	}
	out = append(out, s.old[i:]...)
	s.old = out
	if w != nil {
		clear(s.recent)
		w.keys, w.bufs[into], w.cur = keys, out, into
	} else {
		s.recent = nil
	}
}

// settle ends the replay's keeping: the ids go to an array of their own,
// and the lent memory goes back.
func (s *IDSet) settle() {
	s.merge()
	if s.work != nil && s.work.cur >= 0 {
		s.old = append(make([]byte, 0, len(s.old)), s.old...)
	}
	s.work, s.recent = nil, nil
}

// Len is the number of ids in the set (kept for tests, which check the
// fold's sets by size).
func (s *IDSet) Len() int { return len(s.old)/16 + len(s.recent) + len(s.other) }

// encode returns the hex ids, sorted and concatenated, and the other ids.
func (s *IDSet) encode() (string, []string) {
	s.merge()
	others := make([]string, 0, len(s.other))
	for id := range s.other {
		others = append(others, id)
	}
	sort.Strings(others)
	return hex.EncodeToString(s.old), others
}

// digest writes the set to w (a hash) as encode orders it, without
// making its text.
func (s *IDSet) digest(w io.Writer) {
	s.merge()
	w.Write(s.old)
	others := make([]string, 0, len(s.other))
	for id := range s.other {
		others = append(others, id)
	}
	sort.Strings(others)
	for _, id := range others {
		fmt.Fprintf(w, "\n%q", id)
	}
	w.Write([]byte{'\n'})
}

// decodeIDSet is encode's inverse; it refuses ids out of order.
func decodeIDSet(hexIDs string, others []string) (IDSet, error) {
	var s IDSet
	if len(hexIDs)%32 != 0 {
		return s, fmt.Errorf("enqueued ids: %d hex characters, not a multiple of 32", len(hexIDs))
	}
	old, err := hex.DecodeString(hexIDs)
	if err != nil {
		return s, fmt.Errorf("enqueued ids: %w", err)
	}
	for i := 16; i < len(old); i += 16 {
		if bytes.Compare(old[i-16:i], old[i:i+16]) >= 0 {
			return s, fmt.Errorf("enqueued ids are not sorted at %d", i/16)
		}
	}
	s.old = old
	for _, id := range others {
		s.Add(id)
	}
	return s, nil
}
