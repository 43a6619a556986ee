package eventlog

import (
	"errors"
	"testing"

	"github.com/warren-dev/warren/eventlog/record"
	"github.com/warren-dev/warren/faultfs"
)

// EncodeLine gives the bytes Append writes; DecodeLine reads them back and
// refuses any altered byte as corruption.
func TestLineAPI(t *testing.T) {
	fsys, path := tempLog(t)
	l, err := Open(fsys, path, Options{PendingIdle: -1})
	if err != nil {
		t.Fatal(err)
	}
	e, err := l.Append("test.event", map[string]any{"a": "é\n\"x\"", "n": 1})
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Close()
	file, err := faultfs.ReadFile(fsys, path)
	if err != nil {
		t.Fatal(err)
	}
	line, err := record.EncodeLine(e.Seq, e.TS, Record{Event: e.Event, Data: e.Data})
	if err != nil {
		t.Fatal(err)
	}
	if string(line) != string(file) {
		t.Fatalf("EncodeLine %q, Append wrote %q", line, file)
	}
	got, err := record.DecodeLine(line)
	if err != nil || got.Seq != e.Seq || got.Event != e.Event || string(got.Data) != string(e.Data) || !got.TS.Equal(e.TS) {
		t.Fatalf("DecodeLine: %+v, %v", got, err)
	}
	if record.LineCRC(line) == 0 {
		t.Fatal("LineCRC is 0")
	}
	for i := range line[:len(line)-1] {
		bad := append([]byte(nil), line...)
		bad[i] ^= 0x20
		if _, err := record.DecodeLine(bad); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("byte %d altered: %v, want ErrCorrupt", i, err)
		}
	}
	if _, err := record.EncodeLine(0, e.TS, Record{Event: "x"}); !errors.Is(err, ErrInvalidRecord) {
		t.Fatalf("seq 0: %v", err)
	}
	if record.CheckNext(4, 5) != nil || !errors.Is(record.CheckNext(4, 6), ErrCorrupt) || !errors.Is(record.CheckNext(4, 4), ErrCorrupt) {
		t.Fatal("CheckNext")
	}
}
