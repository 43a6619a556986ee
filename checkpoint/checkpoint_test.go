package checkpoint

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/projection"
	"github.com/warren-dev/warren/schema"
)

// foldedState is a projection of a one-entry log at seq 1, offset 0.
func foldedState(t *testing.T) (*projection.State, []byte) {
	t.Helper()
	data, err := json.Marshal(schema.AgentCreatedData{AgentID: "a", Name: "w"})
	if err != nil {
		t.Fatal(err)
	}
	p := projection.New()
	if err := p.Apply(eventlog.Entry{Seq: 1, TS: time.Unix(0, 0).UTC(), Event: schema.AgentCreated, Data: data}); err != nil {
		t.Fatal(err)
	}
	state, err := p.EncodeState()
	if err != nil {
		t.Fatal(err)
	}
	return p, state
}

// TestWriteReadRoundTrip: a written checkpoint reads back as the same
// state at the same line.
func TestWriteReadRoundTrip(t *testing.T) {
	fsys := faultfs.NewMem()
	if err := fsys.MkdirAll("/a", 0o700); err != nil {
		t.Fatal(err)
	}
	p, state := foldedState(t)
	r := eventlog.Resume{Seq: p.LastSeq, Off: p.LastOff, CRC: 0xdeadbeef, Len: 123}
	if err := WriteData(fsys, "/a", Encode(state, r)); err != nil {
		t.Fatal(err)
	}
	data, err := faultfs.ReadFile(fsys, "/a/"+Name)
	if err != nil {
		t.Fatal(err)
	}
	got, gr, err := Decode(data)
	if err != nil {
		t.Fatal(err)
	}
	if gr != r || got.Name != "w" || got.LastSeq != 1 {
		t.Fatalf("read %+v at %+v, want %+v", got, gr, r)
	}
	if !got.Replaying() {
		t.Fatal("a decoded state must be in replay mode (recovery folds the rest onto it)")
	}
}

// TestDecodeRefusesDamage: a flipped byte, another version, a missing
// header or a header naming another line are errors, never a state.
func TestDecodeRefusesDamage(t *testing.T) {
	p, state := foldedState(t)
	good := Encode(state, eventlog.Resume{Seq: p.LastSeq, Off: p.LastOff, CRC: 1})
	if _, _, err := Decode(good); err != nil {
		t.Fatalf("the good file: %v", err)
	}
	flipped := append([]byte(nil), good...)
	flipped[len(flipped)-2] ^= 1
	for name, data := range map[string][]byte{
		"flipped byte":  flipped,
		"other version": []byte(strings.Replace(string(good), fmt.Sprintf(`"version":%d`, Version), `"version":9`, 1)),
		"no header":     state[:0],
		"other line":    Encode(state, eventlog.Resume{Seq: p.LastSeq + 1, Off: p.LastOff, CRC: 1}),
		"negative len":  Encode(state, eventlog.Resume{Seq: p.LastSeq, Off: p.LastOff, CRC: 1, Len: -5}),
	} {
		if _, _, err := Decode(data); err == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// TestDecodeWithoutLen: a checkpoint written before the line's length was
// recorded still reads, with Len 0 (its line is then checked whole).
func TestDecodeWithoutLen(t *testing.T) {
	p, state := foldedState(t)
	withLen := Encode(state, eventlog.Resume{Seq: p.LastSeq, Off: p.LastOff, CRC: 1, Len: 99})
	if !strings.Contains(string(withLen), `"len":99,`) {
		t.Fatalf("the header does not record the length: %s", withLen[:80])
	}
	old := []byte(strings.Replace(string(withLen), `"len":99,`, "", 1))
	_, r, err := Decode(old)
	if err != nil {
		t.Fatalf("a checkpoint without len: %v", err)
	}
	if r.Len != 0 || r.Seq != p.LastSeq || r.CRC != 1 {
		t.Fatalf("resume point %+v, want seq %d, crc 1, len 0", r, p.LastSeq)
	}
}
