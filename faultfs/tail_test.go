package faultfs

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
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

func TestTailOnlyAppliesPastSyncedLength(t *testing.T) {
	// Overwriting synced bytes without a sync: the old bytes come back.
	m := NewMem()
	mustWrite(t, m, "/f", []byte("AAAA"))
	mustSyncFile(t, m, "/f")
	must(t, m.SyncDir("/"))
	f, err := m.OpenFile("/f", os.O_WRONLY, 0)
	must(t, err)
	_, err = f.Write([]byte("BBBBBB"))
	must(t, err)
	m.Reboot(RebootOptions{Tail: TailPrefix, Rand: rand.New(rand.NewPCG(1, 1))})
	got, err := ReadFile(m, "/f")
	must(t, err)
	if !bytes.HasPrefix(got, []byte("AAAA")) || len(got) > 6 {
		t.Fatalf("got %q, want AAAA plus at most 2 tail bytes", got)
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
