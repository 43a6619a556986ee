package eventlog

import (
	"bytes"
	"errors"
	"testing"

	"github.com/warren-dev/warren/faultfs"
)

// FuzzOpen feeds arbitrary log and pending-file bytes to Open. It must never
// panic; it either reports corruption and changes nothing, or recovers a
// log that reads back cleanly and that a second Open leaves unchanged.
func FuzzOpen(f *testing.F) {
	m, full := memLog(f, 3)
	_ = m
	f.Add(full, []byte(nil))
	f.Add(full[:len(full)-7], pendingGroup(3, 4))
	f.Add(append(append([]byte{}, full...), 0, 0, 0), []byte("garbage"))
	f.Add([]byte("\xff\n{\"seq\":1}\n"), pendingGroup(1))
	f.Fuzz(func(t *testing.T, logData, pending []byte) {
		m := faultfs.NewMem()
		if err := m.MkdirAll("home/agents/a1", 0o700); err != nil {
			t.Fatal(err)
		}
		writeBytes(t, m, memPath, logData)
		if pending != nil {
			writeBytes(t, m, PendingPath(memPath), pending)
		}
		l, err := Open(m, memPath, Options{})
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open failed without ErrCorrupt: %v", err)
			}
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.Line < 1 || ce.Seq < 1 {
				t.Fatalf("corrupt error without line/seq: %v", err)
			}
			if got := readBytes(t, m, memPath); !bytes.Equal(got, logData) {
				t.Fatal("Open changed a corrupt log")
			}
			return
		}
		last := l.LastSeq()
		l.Close()
		es, err := ReadAll(m, memPath)
		if err != nil || uint64(len(es)) != last {
			t.Fatalf("ReadAll after Open: %d entries (LastSeq %d), %v", len(es), last, err)
		}
		before := readBytes(t, m, memPath)
		if !bytes.Equal(before, logData[:min(len(before), len(logData))]) && last > 0 && pending == nil {
			t.Fatal("recovery rewrote bytes instead of truncating")
		}
		l, err = Open(m, memPath, Options{})
		if err != nil {
			t.Fatalf("second Open: %v", err)
		}
		l.Close()
		if after := readBytes(t, m, memPath); !bytes.Equal(after, before) {
			t.Fatal("second Open changed the log")
		}
	})
}
