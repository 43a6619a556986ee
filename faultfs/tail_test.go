package faultfs

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"syscall"
	"testing"
)

// tailSetup makes /f durable with synced content, then appends unsynced.
func tailSetup(t *testing.T, synced, unsynced []byte) *Mem {
	t.Helper()
	m := NewMem()
	f := openAppend(t, m, "/f")
	must(t, m.SyncDir("/"))
	_, err := f.Write(synced)
	must(t, err)
	must(t, f.Sync())
	_, err = f.Write(unsynced)
	must(t, err)
	return m
}

func TestTailModesStayWithinBounds(t *testing.T) {
	synced := []byte("synced-part|")
	unsynced := []byte("unsynced-appended-data-0123456789")
	for _, mode := range []TailMode{TailNone, TailPrefix, TailZero, TailGarbage} {
		lengths := map[int]bool{}
		var sawZero, sawGarbage bool
		for seed := uint64(0); seed < 200; seed++ {
			m := tailSetup(t, synced, unsynced)
			m.Reboot(RebootOptions{Mode: PowerLoss, Tail: mode, Rand: rand.New(rand.NewPCG(seed, 7))})
			got, err := ReadFile(m, "/f")
			must(t, err)
			if !bytes.HasPrefix(got, synced) {
				t.Fatalf("mode %d seed %d: synced data damaged: %q", mode, seed, got)
			}
			if len(got) > len(synced)+len(unsynced) {
				t.Fatalf("mode %d seed %d: tail longer than written: %d bytes", mode, seed, len(got))
			}
			tail := got[len(synced):]
			p := commonPrefix(tail, unsynced)
			rest := tail[p:]
			switch mode {
			case TailNone:
				if len(tail) != 0 {
					t.Fatalf("TailNone kept %q", tail)
				}
			case TailPrefix:
				if len(rest) != 0 {
					t.Fatalf("TailPrefix kept non-prefix %q", tail)
				}
			case TailZero:
				if len(bytes.Trim(rest, "\x00")) != 0 {
					t.Fatalf("TailZero: after the prefix %q is not zeros", rest)
				}
				sawZero = sawZero || len(rest) > 0
			case TailGarbage:
				sawGarbage = sawGarbage || len(bytes.Trim(rest, "\x00")) > 0
			}
			lengths[len(tail)] = true
			// The surviving state is now durable: a second power loss keeps it.
			m.Reboot(RebootOptions{Mode: PowerLoss})
			wantContent(t, m, "/f", got)
		}
		if mode != TailNone && len(lengths) < 5 {
			t.Errorf("mode %d: only %d distinct tail lengths over 200 seeds", mode, len(lengths))
		}
		if mode == TailZero && !sawZero {
			t.Error("TailZero never produced zeros")
		}
		if mode == TailGarbage && !sawGarbage {
			t.Error("TailGarbage never produced garbage")
		}
	}
}

func commonPrefix(a, b []byte) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

func TestTailDeterministicPerSeed(t *testing.T) {
	run := func() []byte {
		m := tailSetup(t, []byte("s"), bytes.Repeat([]byte("u"), 100))
		m.Reboot(RebootOptions{Tail: TailGarbage, Rand: rand.New(rand.NewPCG(42, 42))})
		got, err := ReadFile(m, "/f")
		must(t, err)
		return got
	}
	if a, b := run(), run(); !bytes.Equal(a, b) {
		t.Fatalf("same seed gave %q and %q", a, b)
	}
}

func TestUnsyncedOverwriteOfSyncedBytes(t *testing.T) {
	// Durable bytes overwritten in place without a sync, with 2 more bytes
	// appended: TailNone brings the old bytes back; the other modes tear
	// the overwrite unit by unit, and never touch bytes that did not change.
	old := bytes.Repeat([]byte("A"), 4*TearUnit+5)
	cur := bytes.Repeat([]byte("B"), 3*TearUnit)
	setup := func() *Mem {
		m := NewMem()
		mustWrite(t, m, "/f", old)
		mustSyncFile(t, m, "/f")
		must(t, m.SyncDir("/"))
		f, err := m.OpenFile("/f", os.O_WRONLY, 0)
		must(t, err)
		_, err = f.WriteAt(cur, TearUnit) // units 1-3; unit 0 and the end unchanged
		must(t, err)
		_, err = f.WriteAt([]byte("CC"), int64(len(old)))
		must(t, err)
		return m
	}
	for _, mode := range []TailMode{TailNone, TailPrefix, TailZero, TailGarbage} {
		kinds := map[string]bool{}
		for seed := uint64(0); seed < 100; seed++ {
			m := setup()
			m.Reboot(RebootOptions{Tail: mode, Rand: rand.New(rand.NewPCG(seed, 1))})
			got, err := ReadFile(m, "/f")
			must(t, err)
			if len(got) < len(old) || len(got) > len(old)+2 {
				t.Fatalf("mode %d seed %d: length %d, want %d plus at most 2", mode, seed, len(got), len(old))
			}
			if !bytes.Equal(got[:TearUnit], old[:TearUnit]) || !bytes.Equal(got[4*TearUnit:len(old)], old[4*TearUnit:]) {
				t.Fatalf("mode %d seed %d: bytes outside the overwrite changed: %q", mode, seed, got)
			}
			for u := 1; u <= 3; u++ {
				unit := got[u*TearUnit : (u+1)*TearUnit]
				switch {
				case bytes.Equal(unit, old[:TearUnit]):
					kinds["old"] = true
				case bytes.Equal(unit, cur[:TearUnit]):
					kinds["new"] = true
				case mode == TailZero && len(bytes.Trim(unit, "\x00")) == 0:
					kinds["zero"] = true
				case mode == TailGarbage:
					kinds["garbage"] = true
				default:
					t.Fatalf("mode %d seed %d: unit %d is %q", mode, seed, u, unit)
				}
			}
		}
		want := map[TailMode][]string{TailNone: {"old"}, TailPrefix: {"old", "new"},
			TailZero: {"old", "new", "zero"}, TailGarbage: {"old", "new", "garbage"}}[mode]
		if len(kinds) != len(want) {
			t.Errorf("mode %d: saw units %v, want exactly %v", mode, kinds, want)
		}
		for _, k := range want {
			if !kinds[k] {
				t.Errorf("mode %d: never saw a unit that is %s (saw %v)", mode, k, kinds)
			}
		}
	}
}

func TestWriteAtRefusedOnAppendFile(t *testing.T) {
	m := NewMem()
	f := openAppend(t, m, "/f")
	if _, err := f.WriteAt([]byte("x"), 0); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("WriteAt on an O_APPEND file: %v, want EINVAL", err)
	}
}

func TestTornWriteAtCrash(t *testing.T) {
	write := []byte("in-flight-write-payload")
	setup := func(t *testing.T) *Mem {
		m := tailSetup(t, []byte("old|"), nil)
		f := openAppend(t, m, "/f")
		m.CrashAt(1)
		if _, err := f.Write(write); !errors.Is(err, ErrCrashed) {
			t.Fatalf("crashing write: %v", err)
		}
		return m
	}
	t.Run("process crash, no tail: the write did not happen", func(t *testing.T) {
		m := setup(t)
		m.Reboot(RebootOptions{Mode: ProcessCrash})
		wantContent(t, m, "/f", []byte("old|"))
	})
	t.Run("power loss, no tail", func(t *testing.T) {
		m := setup(t)
		m.Reboot(RebootOptions{Mode: PowerLoss})
		wantContent(t, m, "/f", []byte("old|"))
	})
	for _, mode := range []RebootMode{ProcessCrash, PowerLoss} {
		lengths := map[int]bool{}
		for seed := uint64(0); seed < 100; seed++ {
			m := setup(t)
			m.Reboot(RebootOptions{Mode: mode, Tail: TailPrefix, Rand: rand.New(rand.NewPCG(seed, 3))})
			got, err := ReadFile(m, "/f")
			must(t, err)
			tail, ok := bytes.CutPrefix(got, []byte("old|"))
			if !ok || !bytes.HasPrefix(write, tail) {
				t.Fatalf("mode %d seed %d: torn write left %q, want old| plus a prefix of the write", mode, seed, got)
			}
			lengths[len(tail)] = true
		}
		if len(lengths) < 5 {
			t.Errorf("mode %d: only %d distinct torn lengths", mode, len(lengths))
		}
	}
}

func TestUnsyncedTruncateThenAppendKeepsSyncedBytes(t *testing.T) {
	m := NewMem()
	f := openAppend(t, m, "/f")
	must(t, m.SyncDir("/"))
	_, err := f.Write([]byte("0123456789"))
	must(t, err)
	must(t, f.Sync())
	must(t, f.Truncate(3))
	_, err = f.Write([]byte("xyz"))
	must(t, err)
	wantContent(t, m, "/f", []byte("012xyz"))
	m.Reboot(RebootOptions{Mode: PowerLoss})
	wantContent(t, m, "/f", []byte("0123456789"))
}

func TestOverwriteAfterSyncKeepsSyncedBytes(t *testing.T) {
	m := NewMem()
	f, err := m.OpenFile("/f", os.O_RDWR|os.O_CREATE, 0o644)
	must(t, err)
	must(t, m.SyncDir("/"))
	_, err = f.Write([]byte("AAAAAAAA"))
	must(t, err)
	must(t, f.Sync())
	_, err = f.Write([]byte("BB")) // appends at offset 8
	must(t, err)
	must(t, f.Sync())
	_, err = f.ReadAt(make([]byte, 1), 0)
	must(t, err)
	g, err := m.OpenFile("/f", os.O_WRONLY, 0)
	must(t, err)
	_, err = g.Write([]byte("CC")) // overwrites offset 0, unsynced
	must(t, err)
	wantContent(t, m, "/f", []byte("CCAAAAAABB"))
	m.Reboot(RebootOptions{Mode: PowerLoss})
	wantContent(t, m, "/f", []byte("AAAAAAAABB"))
}
