package faultfs

import (
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"syscall"
	"testing"
)

// FuzzMem interprets the input as a program of Mem operations with odd
// paths, flags, sizes, crashes, reboots and injected faults. Mem must never
// panic, the trace must match the op count, and a crashed Mem must refuse
// every operation.
func FuzzMem(f *testing.F) {
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15})
	f.Add([]byte("\x00\x01\x02\x02\x03\x0c\x0d\x0e\x01\x02\x03\x0f\x10\x11"))
	f.Add([]byte("\x05\x05\x05\x0d\x00\x0e\x03\x0a\xff\xfe\x00\x01\x0c\x04"))
	paths := []string{"", "/", ".", "..", "a", "/a", "a/b", "/a/../b", "a//b/", "b", "c/d/e", "/a/b/c"}
	f.Fuzz(func(t *testing.T, prog []byte) {
		m := NewMem()
		var files []File
		next := func() int {
			if len(prog) == 0 {
				return 0
			}
			b := int(prog[0])
			prog = prog[1:]
			return b
		}
		num := func() int64 {
			var buf [8]byte
			for i := range buf {
				buf[i] = byte(next())
			}
			return int64(binary.LittleEndian.Uint64(buf[:]))
		}
		path := func() string { return paths[next()%len(paths)] }
		file := func() File {
			if len(files) == 0 {
				return nil
			}
			return files[next()%len(files)]
		}
		for steps := 0; len(prog) > 0 && steps < 200; steps++ {
			crashed := m.Crashed()
			var err error
			op := next() % 16
			switch op {
			case 0:
				var fl File
				fl, err = m.OpenFile(path(), int(num()), 0o644)
				if err == nil {
					files = append(files, fl)
				}
			case 1:
				if fl := file(); fl != nil {
					_, err = fl.Write(make([]byte, next()))
				}
			case 2:
				if fl := file(); fl != nil {
					err = fl.Sync()
				}
			case 3:
				if fl := file(); fl != nil {
					_, err = fl.Read(make([]byte, next()))
				}
			case 4:
				if fl := file(); fl != nil {
					_, err = fl.ReadAt(make([]byte, next()), num())
				}
			case 5:
				err = m.MkdirAll(path(), 0o755)
			case 6:
				err = m.Rename(path(), path())
			case 7:
				err = m.Remove(path())
			case 8:
				err = m.Truncate(path(), num()%(MaxMemFileSize/1024))
			case 9:
				err = m.SyncDir(path())
			case 10:
				_, err = m.ReadDir(path())
			case 11:
				_, err = m.Stat(path())
			case 12:
				m.CrashAt(next() % 8)
			case 13:
				m.Reboot(RebootOptions{Mode: RebootMode(next() % 3), Tail: TailMode(next() % 5),
					Rand: rand.New(rand.NewPCG(uint64(next()), 1))})
				files = nil
			case 14:
				m.Inject(Rule{Kind: OpKind(next() % 15), Path: path(), Nth: next() % 4,
					ShortWrite: next()%2 == 0, Sticky: next()%5 == 0, Err: syscall.EIO})
			case 15:
				if fl := file(); fl != nil {
					err = fl.Truncate(num() % 4096)
					_, _ = fl.Stat()
					_ = fl.Close()
				}
			}
			if crashed && err != nil && !errors.Is(err, ErrCrashed) {
				t.Fatalf("op on a crashed Mem failed with %v, not ErrCrashed", err)
			}
			if crashed && op != 13 && !m.Crashed() {
				t.Fatal("a crash cleared itself without Reboot")
			}
			if n := m.MutatingOps(); n != len(m.Ops()) {
				t.Fatalf("MutatingOps %d != len(Ops) %d", n, len(m.Ops()))
			}
		}
	})
}
