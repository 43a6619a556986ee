package eventlog

import (
	"context"
	"errors"
	"math/rand/v2"
	"os"
	"testing"

	"github.com/warren-dev/warren/faultfs"
)

// chunkWriter appends data to path in random small chunks, signalling
// notify after each chunk.
func chunkWriter(t *testing.T, fsys faultfs.FS, path string, data []byte, rng *rand.Rand, notify chan<- struct{}) {
	f, err := fsys.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Error(err)
		return
	}
	defer f.Close()
	for len(data) > 0 {
		n := 1 + rng.IntN(17)
		if n > len(data) {
			n = len(data)
		}
		if _, err := f.Write(data[:n]); err != nil {
			t.Error(err)
			return
		}
		data = data[n:]
		select {
		case notify <- struct{}{}:
		default:
		}
	}
}

func waitOn(notify <-chan struct{}) func(ctx context.Context) error {
	return func(ctx context.Context) error {
		select {
		case <-notify:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

func TestFollowYieldsOnlyCompleteLinesAsFileGrows(t *testing.T) {
	src, full := memLog(t, 40)
	_ = src
	want, err := ReadAll(src, memPath)
	if err != nil {
		t.Fatal(err)
	}
	for seed := uint64(0); seed < 5; seed++ {
		m := faultfs.NewMem()
		if err := m.MkdirAll("home/agents/a1", 0o700); err != nil {
			t.Fatal(err)
		}
		notify := make(chan struct{}, 1)
		ctx, cancel := context.WithCancel(context.Background())
		var got []Entry
		done := make(chan error, 1)
		go func() {
			done <- Follow(ctx, m, memPath, 5, waitOn(notify), func(e Entry) error {
				got = append(got, e)
				if e.Seq == 40 {
					cancel()
				}
				return nil
			})
		}()
		chunkWriter(t, m, memPath, full, rand.New(rand.NewPCG(seed, 1)), notify)
		err := <-done
		cancel()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("seed %d: Follow returned %v", seed, err)
		}
		assertEntries(t, got, want[4:])
	}
}

func TestFollowReportsCorruptionAndTruncation(t *testing.T) {
	m, full := memLog(t, 3)
	ends := lineEnds(full)
	bad := append([]byte{}, full...)
	bad[ends[0]+5] ^= 1
	writeBytes(t, m, memPath, bad)
	noWait := func(ctx context.Context) error { return errors.New("wait called") }
	var n int
	err := Follow(context.Background(), m, memPath, 0, noWait, func(Entry) error { n++; return nil })
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Line != 2 || n != 1 {
		t.Fatalf("got %v after %d entries", err, n)
	}

	writeBytes(t, m, memPath, full)
	shrink := func(ctx context.Context) error {
		writeBytes(t, m, memPath, full[:ends[0]])
		return nil
	}
	err = Follow(context.Background(), m, memPath, 0, shrink, func(Entry) error { return nil })
	if !errors.Is(err, ErrTruncated) {
		t.Fatalf("shrunk file: %v", err)
	}

	stop := errors.New("stop")
	err = Follow(context.Background(), m, memPath, 0, noWait, func(Entry) error { return stop })
	if !errors.Is(err, stop) {
		t.Fatalf("yield error: %v", err)
	}
}

func TestFollowWaitsForTornTailRepair(t *testing.T) {
	m, full := memLog(t, 3)
	ends := lineEnds(full)
	// A torn line (no newline) and then its repair by truncation and new
	// appends at the same offset.
	writeBytes(t, m, memPath, append(append([]byte{}, full[:ends[1]]...), full[ends[1]:ends[1]+9]...))
	waits := 0
	var got []uint64
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wait := func(ctx context.Context) error {
		waits++
		if waits == 1 {
			l := mustOpen(t, m, memPath)
			mustAppend(t, l, "after", nil)
			l.Close()
			return nil
		}
		return errors.New("done")
	}
	err := Follow(ctx, m, memPath, 0, wait, func(e Entry) error { got = append(got, e.Seq); return nil })
	if err == nil || err.Error() != "done" || len(got) != 3 || got[2] != 3 {
		t.Fatalf("got %v %v", got, err)
	}
}
