package eventlog

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warren-dev/warren/eventlog/record"
	"github.com/warren-dev/warren/faultfs"
)

// Three complete, newline-terminated lines with bad CRCs at the end of a
// log are not a torn tail: each was an acknowledged append (issue 16). Open
// reports corruption and leaves the file as it is, with or without a stale
// pending file that covers only the last of them.
func TestCompleteBadLinesAtTheEndAreCorruption(t *testing.T) {
	_, full := memLog(t, 6)
	ends := lineEnds(full)
	bad := append([]byte{}, full...)
	for _, i := range []int{2, 3, 4} { // lines 4, 5, 6
		bad[ends[i]+15] ^= 0x08
	}
	for _, pending := range [][]byte{nil, record.AppendTrailer(append([]byte(nil), full[ends[4]:]...), 1)} {
		m := emptyMem(t)
		writeBytes(t, m, memPath, bad)
		if pending != nil {
			writeBytes(t, m, PendingPath(memPath), pending)
		}
		_, err := Open(m, memPath, Options{})
		var ce *CorruptError
		if !errors.As(err, &ce) || ce.Line != 4 || ce.Seq != 4 || ce.Offset != int64(ends[2]) {
			t.Fatalf("pending=%v: Open = %v, want ErrCorrupt at line 4", pending != nil, err)
		}
		if got := readBytes(t, m, memPath); !bytes.Equal(got, bad) {
			t.Fatalf("pending=%v: Open changed a corrupt log", pending != nil)
		}
		if !strings.Contains(err.Error(), "warren repair") {
			t.Fatalf("the error does not say how to repair: %v", err)
		}
	}
}

// A pending file still holding the last group (kept for reuse before the
// idle removal) covers damage to that group's lines: they are cut (and
// kept) and replayed byte for byte from the pending file.
func TestDamageThePendingFileCoversIsReplayed(t *testing.T) {
	_, full := memLog(t, 4)
	ends := lineEnds(full)
	bad := append([]byte{}, full...)
	bad[ends[1]+15] ^= 0x08 // line 3 of the group 3-4; line 4 stays valid
	m := emptyMem(t)
	writeBytes(t, m, memPath, bad)
	writeBytes(t, m, PendingPath(memPath), record.AppendTrailer(append([]byte(nil), full[ends[1]:]...), 2))
	l, err := Open(m, memPath, Options{})
	if err != nil {
		t.Fatal(err)
	}
	l.Close()
	if got := readBytes(t, m, memPath); !bytes.Equal(got, full) {
		t.Fatalf("log after recovery differs from the acknowledged log")
	}
	asides := tornCopies(t, m)
	if len(asides) != 1 || !bytes.Equal(readBytes(t, m, asides[0]), bad[ends[1]:]) {
		t.Fatalf("the cut bytes were not kept: %v", asides)
	}
}

// Every bit of a small log flipped in turn: Open either gives back the
// same bytes with every entry, or reports corruption and changes nothing.
// A flipped final newline is restored. Nothing is ever cut silently.
func TestBitFlipAtEveryPosition(t *testing.T) {
	_, full := memLog(t, 3)
	restored, corrupt := 0, 0
	for i := range full {
		for bit := 0; bit < 8; bit++ {
			b := append([]byte{}, full...)
			b[i] ^= 1 << bit
			m := emptyMem(t)
			writeBytes(t, m, memPath, b)
			l, err := Open(m, memPath, Options{})
			what := fmt.Sprintf("byte %d bit %d", i, bit)
			if err != nil {
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("%s: Open = %v, want ErrCorrupt or success", what, err)
				}
				if got := readBytes(t, m, memPath); !bytes.Equal(got, b) {
					t.Fatalf("%s: Open changed a corrupt log", what)
				}
				corrupt++
				continue
			}
			if l.LastSeq() != 3 {
				t.Fatalf("%s: LastSeq %d, want 3", what, l.LastSeq())
			}
			l.Close()
			if got := readBytes(t, m, memPath); !bytes.Equal(got, full) {
				t.Fatalf("%s: Open succeeded but the log is not the original:\n%q", what, got)
			}
			if len(tornCopies(t, m)) != 0 {
				t.Fatalf("%s: bytes were cut", what)
			}
			restored++
		}
	}
	// Only the flips of the final newline are repaired in place.
	if restored != 8 || corrupt != 8*len(full)-8 {
		t.Fatalf("restored %d, corrupt %d of %d flips", restored, corrupt, 8*len(full))
	}
}

// Restoring a lost newline survives a crash at every step.
func TestRestoredNewlineSurvivesCrashes(t *testing.T) {
	_, full := memLog(t, 3)
	damaged := append([]byte{}, full...)
	damaged[len(damaged)-1] = 'X'
	setup := func() *faultfs.Mem {
		m := emptyMem(t)
		durableWrite(t, m, memPath, damaged)
		return m
	}
	m := setup()
	before := m.MutatingOps()
	l := mustOpen(t, m, memPath)
	l.Close()
	total := m.MutatingOps() - before
	for k := 1; k <= total; k++ {
		for _, r := range allReboots {
			m := setup()
			m.CrashAt(k)
			if l, err := Open(m, memPath, Options{}); err == nil {
				l.Close()
			}
			m.Crash()
			m.Reboot(r.opts(uint64(k)))
			l, err := Open(m, memPath, Options{})
			if err != nil {
				t.Fatalf("k=%d %s: %v", k, r.name, err)
			}
			l.Close()
			if got := readBytes(t, m, memPath); !bytes.Equal(got, full) {
				t.Fatalf("k=%d %s: log %q, want the original", k, r.name, got)
			}
		}
	}
}

// A log or pending file that is a symbolic link is an error naming it; the
// link is not followed and its target is left alone.
func TestSymlinkedLogIsRefused(t *testing.T) {
	for _, fsys := range []faultfs.FS{faultfs.OS{}, faultfs.NewMem()} {
		dir := "/home/agents/a1"
		if _, ok := fsys.(faultfs.OS); ok {
			dir = filepath.Join(t.TempDir(), "a1")
		}
		if err := fsys.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		path := dir + "/events.jsonl"
		for _, link := range []string{path, PendingPath(path)} {
			target := dir + "/target"
			content := []byte("precious, not a log\n")
			writeBytes(t, fsys, target, content)
			if link == PendingPath(path) {
				writeBytes(t, fsys, path, nil)
			}
			if err := fsys.(faultfs.Symlinker).Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			_, err := Open(fsys, path, Options{})
			if !errors.Is(err, faultfs.ErrSymlink) || !strings.Contains(err.Error(), link) {
				t.Fatalf("%T: Open with a link at %s = %v, want ErrSymlink naming it", fsys, link, err)
			}
			if got := readBytes(t, fsys, target); !bytes.Equal(got, content) {
				t.Fatalf("%T: the link's target changed: %q", fsys, got)
			}
			if link == path {
				if _, err := ReadAll(fsys, path); !errors.Is(err, faultfs.ErrSymlink) {
					t.Fatalf("%T: ReadAll through a link = %v", fsys, err)
				}
				if _, err := Repair(fsys, path); !errors.Is(err, faultfs.ErrSymlink) {
					t.Fatalf("%T: Repair through a link = %v", fsys, err)
				}
			}
			for _, p := range []string{link, path, target} {
				_ = fsys.Remove(p)
			}
		}
	}
}

// emptyMem returns a Mem holding the durable directory of memPath.
func emptyMem(t *testing.T) *faultfs.Mem {
	t.Helper()
	m := faultfs.NewMem()
	if err := m.MkdirAll(filepath.Dir(memPath), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{".", "home", "home/agents"} {
		if err := m.SyncDir(d); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// MustExist never creates a missing log or its directory.
func TestMustExistDoesNotCreate(t *testing.T) {
	m := faultfs.NewMem()
	if _, err := Open(m, memPath, Options{MustExist: true}); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Open(MustExist) of a missing log = %v, want ErrNotExist", err)
	}
	if ok, _ := faultfs.Exists(m, filepath.Dir(memPath)); ok {
		t.Fatal("Open(MustExist) created the log's directory")
	}
	makeLog(t, m, memPath, 2)
	l, err := Open(m, memPath, Options{MustExist: true})
	if err != nil || l.LastSeq() != 2 {
		t.Fatalf("Open(MustExist) of an existing log: %v", err)
	}
	l.Close()
}
