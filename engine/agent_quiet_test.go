package engine

import "testing"

// listing returns the records a quiet scan reads, running between(n)
// before the n-th listing (0: the first read, 1: the second).
func listing(between func(n int), recs ...*agent) func() []*agent {
	n := 0
	return func() []*agent {
		between(n)
		n++
		return append([]*agent(nil), recs...)
	}
}

// quiet says "at rest" only when every record is at rest and nothing
// began between its two reads: the race the crash fuzzer found, where a
// subscriber read at rest was woken by a notice from an agent read after
// it, once that agent's aftermath had ended.
func TestQuietSeesATurnBetweenItsReads(t *testing.T) {
	nothing := func(int) {}
	x, _ := newRec(t)
	y, _ := newRec(t)
	if !quiet(listing(nothing, x, y), false) {
		t.Fatal("two records at rest: not quiet")
	}

	// A whole turn of x (claimed and ended) between the reads: each read
	// alone finds x at rest, its count of claims does not match.
	turn := func(n int) {
		if n == 1 {
			noErr(t, x.Claim())
			x.Unclaim()
		}
	}
	if quiet(listing(turn, x, y), false) {
		t.Fatal("a turn claimed and ended between the reads went unseen")
	}

	// A wake taken between the reads, still running at the second.
	wake := func(n int) {
		if n == 1 {
			enqueue(t, y, "m1")
			if _, ok := y.TakeWake(false, 10, 1<<20); !ok {
				t.Fatal("y did not wake")
			}
		}
	}
	if quiet(listing(wake, x, y), false) {
		t.Fatal("a wake turn taken between the reads went unseen")
	}
	y.Unclaim()

	// A record that appears (a spawn) between the reads.
	z, _ := newRec(t)
	recs := []*agent{x}
	grow := func() []*agent {
		out := append([]*agent(nil), recs...)
		recs = append(recs, z)
		return out
	}
	if quiet(grow, false) {
		t.Fatal("a record added between the reads went unseen")
	}

	// A record active at the first read.
	noErr(t, x.Claim())
	if quiet(listing(nothing, x, y), false) {
		t.Fatal("a claimed record: quiet")
	}
	x.Unclaim()

	// y's pending m1 makes a wake due, unless wakes are off.
	if quiet(listing(nothing, x, y), false) {
		t.Fatal("a wake is due: quiet")
	}
	if !quiet(listing(nothing, x, y), true) {
		t.Fatal("wakes are off and nothing runs: not quiet")
	}
}
