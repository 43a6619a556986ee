package multiplexer

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sync"
	"sync/atomic"
	"testing"
)

type stressSess struct {
	id   string
	pool string
	held atomic.Bool
	dead atomic.Bool
}

// TestStressInvariants runs many goroutines doing random acquire, release,
// discard and evict calls on two pools. Inside every open and evict callback
// it checks that the pool's live sessions never exceed its slots, that a
// held session is never evicted, and that a session is never used after it
// was evicted.
func TestStressInvariants(t *testing.T) {
	workers, ops := 16, 400
	if os.Getenv("WARREN_LONG") == "1" {
		workers, ops = 64, 20000
	}
	limits := map[string]int{"a": 3, "b": 2}
	cfg := Config{Pools: limits, ProviderPools: map[string]string{"pa": "a"}, DefaultPool: "b"}
	var mu sync.Mutex
	live := map[string]int{}
	check := func(pool, where string) {
		if live[pool] > limits[pool] {
			t.Errorf("%s: pool %s has %d live sessions, limit %d", where, pool, live[pool], limits[pool])
		}
	}
	evict := func(_ context.Context, id string, s *stressSess) error {
		if s.held.Load() {
			t.Errorf("evicted held session %s", id)
		}
		if s.dead.Swap(true) {
			t.Errorf("session %s evicted twice", id)
		}
		mu.Lock()
		check(s.pool, "evict")
		live[s.pool]--
		mu.Unlock()
		if id[1] == '0' {
			return errors.New("injected eviction failure")
		}
		return nil
	}
	m := New[*stressSess](cfg, evict, nil)
	open := func(id, pool string) func(context.Context) (*stressSess, error) {
		return func(context.Context) (*stressSess, error) {
			if id[1] == '1' && rand.IntN(8) == 0 {
				return nil, errors.New("injected open failure")
			}
			mu.Lock()
			live[pool]++
			check(pool, "open")
			mu.Unlock()
			return &stressSess{id: id, pool: pool}, nil
		}
	}
	var wg sync.WaitGroup
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := rand.New(rand.NewPCG(42, uint64(w)))
			for range ops {
				pool, prov := "a", "pa"
				if r.IntN(2) == 0 {
					pool, prov = "b", "pb"
				}
				id := fmt.Sprintf("%s%d", pool, r.IntN(6))
				if r.IntN(10) == 0 {
					if err := m.Evict(context.Background(), id); err != nil && !errors.Is(err, ErrBusy) && !errors.Is(err, ErrNotLive) && !containsInjected(err) {
						t.Errorf("Evict(%s): %v", id, err)
					}
					continue
				}
				ctx, cancel := context.WithCancel(context.Background())
				switch r.IntN(8) {
				case 0:
					cancel()
				case 1:
					go cancel()
				}
				l, err := m.Acquire(ctx, id, prov, open(id, pool))
				cancel()
				if err != nil {
					if !errors.Is(err, ErrBusy) && !errors.Is(err, ErrNoSlot) && !containsInjected(err) {
						t.Errorf("Acquire(%s): %v", id, err)
					}
					continue
				}
				s := l.Value()
				if s.id != id || s.dead.Load() {
					t.Errorf("Acquire(%s) returned %s (dead=%v)", id, s.id, s.dead.Load())
				}
				if s.held.Swap(true) {
					t.Errorf("session %s leased twice", id)
				}
				if r.IntN(10) == 0 {
					s.held.Store(false)
					s.dead.Store(true)
					mu.Lock()
					live[pool]--
					mu.Unlock()
					l.Discard()
					continue
				}
				s.held.Store(false)
				l.Release()
			}
		}()
	}
	wg.Wait()
	st := m.Stats()
	mu.Lock()
	defer mu.Unlock()
	for name, limit := range limits {
		ps := st[name]
		if ps.Held != 0 || ps.Waiting != 0 || ps.Live > limit || ps.Live != live[name] {
			t.Errorf("pool %s after the run: %+v, callbacks count %d live", name, ps, live[name])
		}
	}
}

func containsInjected(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if s := e.Error(); len(s) >= 8 && s[:8] == "injected" {
			return true
		}
	}
	return false
}

func BenchmarkAcquireReleaseHit(b *testing.B) {
	m := New[int](onePool(4), nil, nil)
	open := func(context.Context) (int, error) { return 1, nil }
	ctx := context.Background()
	for b.Loop() {
		l, err := m.Acquire(ctx, "a", "p", open)
		if err != nil {
			b.Fatal(err)
		}
		l.Release()
	}
}

func BenchmarkAcquireReleaseEvict(b *testing.B) {
	m := New[int](onePool(1), func(context.Context, string, int) error { return nil }, nil)
	open := func(context.Context) (int, error) { return 1, nil }
	ids := []string{"a", "b"}
	ctx := context.Background()
	i := 0
	for b.Loop() {
		l, err := m.Acquire(ctx, ids[i&1], "p", open)
		if err != nil {
			b.Fatal(err)
		}
		l.Release()
		i++
	}
}

func BenchmarkAcquireReleaseParallel(b *testing.B) {
	m := New[int](onePool(64), nil, nil)
	open := func(context.Context) (int, error) { return 1, nil }
	var next atomic.Int64
	b.RunParallel(func(pb *testing.PB) {
		id := fmt.Sprintf("s%d", next.Add(1))
		for pb.Next() {
			l, err := m.Acquire(context.Background(), id, "p", open)
			if err != nil {
				b.Fatal(err)
			}
			l.Release()
		}
	})
}
