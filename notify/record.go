package notify

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/warren-dev/warren/atomicfile"
	"github.com/warren-dev/warren/faultfs"
)

// line is one line of notify.jsonl (doc.go).
type line struct {
	Ack   string            `json:"ack,omitempty"`
	Sink  string            `json:"sink,omitempty"`
	Mark  map[string]uint64 `json:"mark,omitempty"`
	Since string            `json:"since,omitempty"`
	TS    string            `json:"ts"`
}

// maxLines is when notify.jsonl is rewritten.
const maxLines = 10_000

// record is notify.jsonl.
type record struct {
	fsys  faultfs.FS
	path  string
	f     faultfs.File
	lines int
}

// state is what notify.jsonl says: the last mark, when notifications
// began, and the acks after that mark, id -> sinks.
type state struct {
	mark  map[string]uint64
	since time.Time
	acks  map[string]map[string]bool
	fresh bool // no file yet
}

// load reads the record's state; a line that does not parse (a torn last
// line) is skipped.
func (r *record) load() (state, error) {
	st := state{mark: map[string]uint64{}, acks: map[string]map[string]bool{}}
	f, err := r.fsys.OpenFile(r.path, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		st.fresh = true
		return st, nil
	}
	if err != nil {
		return st, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var l line
		if json.Unmarshal(sc.Bytes(), &l) != nil {
			continue
		}
		r.lines++
		switch {
		case l.Mark != nil || l.Since != "":
			if l.Mark != nil {
				st.mark = l.Mark
			}
			if t, err := time.Parse(time.RFC3339Nano, l.Since); err == nil {
				st.since = t
			}
		case l.Ack != "":
			if st.acks[l.Ack] == nil {
				st.acks[l.Ack] = map[string]bool{}
			}
			st.acks[l.Ack][l.Sink] = true
		}
	}
	return st, sc.Err()
}

// append adds l to the file.
func (r *record) append(l line) error {
	if r.f == nil {
		f, err := r.fsys.OpenFile(r.path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
		if err != nil {
			return err
		}
		r.f = f
	}
	b, err := json.Marshal(l)
	if err != nil {
		return err
	}
	if _, err := r.f.Write(append(b, '\n')); err != nil {
		return err
	}
	r.lines++
	return nil
}

// rewrite replaces the file with mark m and the acks that still matter
// (of entries past m).
func (r *record) rewrite(m line, acks map[string]map[string]bool) error {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	if err := enc.Encode(m); err != nil {
		return err
	}
	n := 1
	for id, sinks := range acks {
		if !past(id, m.Mark) {
			continue
		}
		for s := range sinks {
			if err := enc.Encode(line{Ack: id, Sink: s, TS: m.TS}); err != nil {
				return err
			}
			n++
		}
	}
	if r.f != nil {
		_ = r.f.Close()
		r.f = nil
	}
	if err := atomicfile.Write(r.fsys, r.path, b.Bytes(), 0o600); err != nil {
		return err
	}
	r.lines = n
	return nil
}

func (r *record) close() {
	if r.f != nil {
		_ = r.f.Close()
		r.f = nil
	}
}

// past reports whether occurrence id is past mark m (not covered by it).
func past(id string, m map[string]uint64) bool {
	log, seq, ok := splitID(id)
	return !ok || seq > m[log]
}

// splitID splits "<log>:<seq>".
func splitID(id string) (string, uint64, bool) {
	i := strings.LastIndexByte(id, ':')
	if i < 0 {
		return "", 0, false
	}
	seq, err := strconv.ParseUint(id[i+1:], 10, 64)
	return id[:i], seq, err == nil
}

// Log reads notify.jsonl's lines for `warren notify log`: the last limit
// of them (all with limit <= 0), oldest first.
func Log(fsys faultfs.FS, path string, limit int) ([]json.RawMessage, error) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []json.RawMessage
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		if json.Valid(sc.Bytes()) {
			out = append(out, append(json.RawMessage(nil), sc.Bytes()...))
		}
	}
	if limit > 0 && len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out, sc.Err()
}
