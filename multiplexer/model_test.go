package multiplexer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
)

// model is a single-threaded reference of one pool: idle sessions in LRU
// order (front = least recently released) and the held set.
type model struct {
	limit int
	idle  []string
	held  map[string]bool
	evict []string // expected evictions so far
	opens []string // expected opens so far
}

func (md *model) used() int { return len(md.idle) + len(md.held) }

func (md *model) trim() {
	for md.used() > md.limit && len(md.idle) > 0 {
		md.evict = append(md.evict, md.idle[0])
		md.idle = md.idle[1:]
	}
}

// acquire with a context that is already done: it succeeds only if no wait
// is needed.
func (md *model) acquire(id string) error {
	if md.held[id] {
		return ErrBusy
	}
	if i := slices.Index(md.idle, id); i >= 0 {
		md.idle = slices.Delete(md.idle, i, i+1)
		md.held[id] = true
		return nil
	}
	switch {
	case md.used() < md.limit:
	case md.used() == md.limit && len(md.idle) > 0:
		md.evict = append(md.evict, md.idle[0])
		md.idle = md.idle[1:]
	default:
		return ErrNoSlot
	}
	md.opens = append(md.opens, id)
	md.held[id] = true
	return nil
}

// TestModelSequential drives the mux and the model with the same random
// sequence of operations and compares opens, evictions, liveness and stats
// after every step.
func TestModelSequential(t *testing.T) {
	steps := 1500
	seeds := []uint64{1, 2, 3}
	if os.Getenv("WARREN_LONG") == "1" {
		steps, seeds = 50000, []uint64{1, 2, 3, 4, 5, 6, 7, 8}
	}
	for _, seed := range seeds {
		t.Run(fmt.Sprint("seed", seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 7))
			h := newHarness(t, onePool(3))
			h.m.hookQueued = nil
			md := &model{limit: 3, held: map[string]bool{}}
			leases := map[string]*Lease[*sess]{}
			done, cancel := context.WithCancel(context.Background())
			cancel()
			ids := []string{"a", "b", "c", "d", "e", "f"}
			for step := range steps {
				id := ids[r.IntN(len(ids))]
				var op string
				switch k := r.IntN(20); {
				case k < 8:
					op = "acquire " + id
					l, err := h.m.Acquire(done, id, "p", h.open(id))
					werr := md.acquire(id)
					if (err == nil) != (werr == nil) || (werr != nil && !errors.Is(err, werr)) {
						t.Fatalf("step %d %s: err = %v, model %v", step, op, err, werr)
					}
					if err == nil {
						leases[id] = l
					}
				case k < 14:
					op = "release " + id
					if l := leases[id]; l != nil {
						l.Release()
						delete(leases, id)
						delete(md.held, id)
						md.idle = append(md.idle, id)
						md.trim()
					}
				case k < 15:
					op = "discard " + id
					if l := leases[id]; l != nil {
						l.Discard()
						delete(leases, id)
						delete(md.held, id)
					}
				case k < 16:
					op = "remove " + id
					_, ok := h.m.Remove(id)
					i := slices.Index(md.idle, id)
					if ok != (i >= 0) {
						t.Fatalf("step %d %s: ok = %v, model idle %v", step, op, ok, md.idle)
					}
					if ok {
						md.idle = slices.Delete(md.idle, i, i+1)
					}
				case k < 18:
					op = "evict " + id
					err := h.m.Evict(context.Background(), id)
					i := slices.Index(md.idle, id)
					switch {
					case i >= 0:
						if err != nil {
							t.Fatalf("step %d %s: %v", step, op, err)
						}
						md.idle = slices.Delete(md.idle, i, i+1)
						md.evict = append(md.evict, id)
					case md.held[id]:
						if !errors.Is(err, ErrBusy) {
							t.Fatalf("step %d %s: %v, want ErrBusy", step, op, err)
						}
					default:
						if !errors.Is(err, ErrNotLive) {
							t.Fatalf("step %d %s: %v, want ErrNotLive", step, op, err)
						}
					}
				default:
					n := 1 + r.IntN(4)
					op = fmt.Sprint("resize ", n)
					h.m.SetConfig(onePool(n))
					md.limit = n
					md.trim()
				}
				wantStrings(t, fmt.Sprintf("step %d %s: evictions", step, op), h.evictions(), md.evict)
				wantStrings(t, fmt.Sprintf("step %d %s: opens", step, op), h.opens(), md.opens)
				for _, x := range ids {
					if want := md.held[x] || slices.Contains(md.idle, x); h.m.Live(x) != want {
						t.Fatalf("step %d %s: Live(%s) = %v, model %v", step, op, x, !want, want)
					}
				}
				want := PoolStats{Slots: md.limit, Live: md.used(), Held: len(md.held)}
				if st := h.m.Stats()["default"]; st != want {
					t.Fatalf("step %d %s: stats %+v, model %+v", step, op, st, want)
				}
			}
		})
	}
}
