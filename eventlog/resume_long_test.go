package eventlog

import (
	"bytes"
	"errors"
	"io/fs"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/warren-dev/warren/faultfs"
)

// readCountingFS counts the bytes read from the files it opens.
type readCountingFS struct {
	faultfs.FS
	read atomic.Int64
}

func (c *readCountingFS) OpenFile(name string, flag int, perm fs.FileMode) (faultfs.File, error) {
	f, err := c.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &readCountingFile{File: f, c: c}, nil
}

type readCountingFile struct {
	faultfs.File
	c *readCountingFS
}

func (f *readCountingFile) Read(p []byte) (int, error) {
	n, err := f.File.Read(p)
	f.c.read.Add(int64(n))
	return n, err
}

func (f *readCountingFile) ReadAt(p []byte, off int64) (int, error) {
	n, err := f.File.ReadAt(p, off)
	f.c.read.Add(int64(n))
	return n, err
}

// longLineLog writes a log of three entries, the last a line of about
// 300 KB, and returns its bytes and the resume point of that line.
func longLineLog(t *testing.T, fsys faultfs.FS) ([]byte, Resume) {
	t.Helper()
	l := mustOpen(t, fsys, memPath)
	mustAppend(t, l, "test.event", map[string]any{"i": 1})
	mustAppend(t, l, "test.event", map[string]any{"i": 2})
	last := mustAppend(t, l, "test.event", map[string]any{"i": 3, "pad": strings.Repeat("p", 300<<10)})
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	data := readBytes(t, fsys, memPath)
	r, err := ResumeAt(fsys, memPath, 3, last.Off)
	if err != nil {
		t.Fatal(err)
	}
	if r.Len != int64(len(data))-last.Off || r.Len < longLine {
		t.Fatalf("ResumeAt gave length %d for a line of %d bytes (want it at least %d)", r.Len, int64(len(data))-last.Off, longLine)
	}
	return data, r
}

// A start must not read every long last line whole (a 1 MB message
// waiting for a gated agent): a resumed Open checks a long line of known
// length by its ends.
func TestOpenResumeReadsALongLineByItsEnds(t *testing.T) {
	mem := faultfs.NewMem()
	_, r := longLineLog(t, mem)
	cfs := &readCountingFS{FS: mem}
	l, seen, err := openCollect(cfs, memPath, &r)
	if err != nil {
		t.Fatalf("Open with the long line's resume point: %v", err)
	}
	defer l.Close()
	if n := cfs.read.Load(); n >= 4<<10 {
		t.Fatalf("a resumed Open read %d bytes of a log whose last line is %d bytes long; want a few hundred", n, r.Len)
	}
	if len(seen) != 0 || l.LastSeq() != 3 {
		t.Fatalf("replayed %d entries, last seq %d; want none and 3", len(seen), l.LastSeq())
	}
	if err := l.VerifyPrefix(); err != nil {
		t.Fatalf("VerifyPrefix of an intact log: %v", err)
	}
	if e := mustAppend(t, l, "test.event", map[string]any{"i": 4}); e.Seq != 4 {
		t.Fatalf("append after the resumed Open got seq %d, want 4", e.Seq)
	}
}

// What the ends check cannot see (a byte changed inside the long line) the
// scrub finds before anything is appended on top of it.
func TestOpenResumeLongLineDamageInsideIsFoundBeforeAnAppend(t *testing.T) {
	mem := faultfs.NewMem()
	data, r := longLineLog(t, mem)
	bad := bytes.Clone(data)
	bad[r.Off+r.Len/2] ^= 0x01
	writeBytes(t, mem, memPath, bad)
	l, _, err := openCollect(mem, memPath, &r)
	if err != nil {
		t.Fatalf("Open with the long line's resume point: %v (its ends are intact)", err)
	}
	defer l.Close()
	var ce *CorruptError
	if err := l.VerifyPrefix(); !errors.As(err, &ce) {
		t.Fatalf("VerifyPrefix of a log whose resume line is damaged inside: %v, want a *CorruptError", err)
	}
	if _, err := l.Append("test.event", map[string]any{"i": 4}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("append on top of the damaged line: %v, want ErrCorrupt", err)
	}
	if got := readBytes(t, mem, memPath); !bytes.Equal(got, bad) {
		t.Fatal("the damaged log changed")
	}
}

// A long line's ends that do not match the resume point are a mismatch,
// which changes nothing (the caller folds the whole log instead).
func TestOpenResumeLongLineMismatch(t *testing.T) {
	mem := faultfs.NewMem()
	data, r := longLineLog(t, mem)
	flip := func(at int64) []byte {
		b := bytes.Clone(data)
		b[at] ^= 0x01
		return b
	}
	cases := map[string]struct {
		log []byte
		r   Resume
	}{
		"wrong crc":          {data, Resume{Seq: r.Seq, Off: r.Off, CRC: r.CRC ^ 1, Len: r.Len}},
		"wrong seq":          {data, Resume{Seq: r.Seq + 1, Off: r.Off, CRC: r.CRC, Len: r.Len}},
		"length too short":   {data, Resume{Seq: r.Seq, Off: r.Off, CRC: r.CRC, Len: r.Len - 1}},
		"length too long":    {append(bytes.Clone(data), data[:r.Off]...), Resume{Seq: r.Seq, Off: r.Off, CRC: r.CRC, Len: r.Len + 7}},
		"offset inside line": {data, Resume{Seq: r.Seq, Off: r.Off + 1, CRC: r.CRC, Len: r.Len - 1}},
		"crc field changed":  {flip(r.Off + r.Len - 5), r},
		"newline lost":       {flip(r.Off + r.Len - 1), r},
		"seq changed":        {flip(r.Off + 7), r},
		"log cut short":      {data[:r.Off+r.Len-1], r},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			writeBytes(t, mem, memPath, c.log)
			ops := mem.MutatingOps()
			_, _, err := openCollect(mem, memPath, &c.r)
			if !errors.Is(err, ErrResumeMismatch) {
				t.Fatalf("Open: %v, want ErrResumeMismatch", err)
			}
			if n := mem.MutatingOps() - ops; n != 0 {
				t.Fatalf("%d mutating ops on a mismatch, want none", n)
			}
		})
	}
}
