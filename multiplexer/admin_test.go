package multiplexer

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/go-hclog"
)

func TestShrinkEvictsIdleBeyondLimit(t *testing.T) {
	h := newHarness(t, onePool(3))
	for _, id := range []string{"a", "b", "c"} {
		h.acquire(id).Release()
	}
	h.m.SetConfig(onePool(1))
	wantStrings(t, "evicted", h.evictions(), []string{"a", "b"})
	if st := h.m.Stats()["default"]; st != (PoolStats{Slots: 1, Live: 1}) {
		t.Fatalf("stats = %+v", st)
	}
	if !h.m.Live("c") {
		t.Fatal("most recently released session was evicted")
	}
}

func TestShrinkBelowHeldEvictsOnRelease(t *testing.T) {
	h := newHarness(t, onePool(2))
	a, b := h.acquire("a"), h.acquire("b")
	h.m.SetConfig(onePool(1))
	wantStrings(t, "evicted", h.evictions(), nil) // held: never evicted
	if st := h.m.Stats()["default"]; st != (PoolStats{Slots: 1, Live: 2, Held: 2}) {
		t.Fatalf("stats = %+v", st)
	}
	a.Release() // over the limit: a goes at once
	wantStrings(t, "evicted", h.evictions(), []string{"a"})
	b.Release() // within the limit now: stays
	wantStrings(t, "evicted", h.evictions(), []string{"a"})
	if st := h.m.Stats()["default"]; st != (PoolStats{Slots: 1, Live: 1}) {
		t.Fatalf("stats = %+v", st)
	}
}

func TestGrowWakesWaiters(t *testing.T) {
	h := newHarness(t, onePool(1))
	x := h.acquire("x")
	got := make(chan *Lease[*sess], 2)
	for _, id := range []string{"y", "z"} {
		go func() {
			l, err := h.m.Acquire(context.Background(), id, "p", h.open(id))
			if err != nil {
				t.Errorf("Acquire(%s): %v", id, err)
			}
			got <- l
		}()
		<-h.queued
	}
	h.m.SetConfig(onePool(3))
	l1, l2 := <-got, <-got
	wantStrings(t, "evicted", h.evictions(), nil) // new slots, no eviction
	if st := h.m.Stats()["default"]; st != (PoolStats{Slots: 3, Live: 3, Held: 3}) {
		t.Fatalf("stats = %+v", st)
	}
	x.Release()
	l1.Release()
	l2.Release()
}

func TestRemovedPoolDrains(t *testing.T) {
	cfg := Config{Pools: map[string]int{"default": 1, "old": 2}, ProviderPools: map[string]string{"o": "old"}, DefaultPool: "default"}
	h := newHarness(t, cfg)
	l, err := h.m.Acquire(context.Background(), "a", "o", h.open("a"))
	if err != nil {
		t.Fatal(err)
	}
	h.m.SetConfig(Config{Pools: map[string]int{"default": 1}, ProviderPools: map[string]string{"o": "old"}, DefaultPool: "default"})
	if _, err := h.m.Acquire(context.Background(), "b", "o", h.open("b")); !errors.Is(err, ErrUnknownPool) {
		t.Fatalf("Acquire in a removed pool = %v, want ErrUnknownPool", err)
	}
	if st := h.m.Stats()["old"]; st != (PoolStats{Slots: 0, Live: 1, Held: 1}) {
		t.Fatalf("removed pool stats = %+v", st)
	}
	l.Release()
	wantStrings(t, "evicted", h.evictions(), []string{"a"})
	if h.m.Live("a") {
		t.Fatal("session of a removed pool stayed live after release")
	}
	if _, ok := h.m.Stats()["old"]; ok {
		t.Fatal("empty removed pool still reported")
	}
}

func TestEvictErrorStillFreesSlot(t *testing.T) {
	var buf strings.Builder
	logger := hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Error})
	h := newHarness(t, onePool(1))
	h.m.logger = logger
	h.evictErr["a"] = errors.New("disk full")
	h.acquire("a").Release()
	h.acquire("b").Release() // eviction of a fails; b still gets the slot
	if h.m.Live("a") {
		t.Fatal("victim whose eviction failed is still tracked")
	}
	if !strings.Contains(buf.String(), "disk full") || !strings.Contains(buf.String(), "session=a") {
		t.Fatalf("eviction failure not logged with key/values: %q", buf.String())
	}
	h.evictErr["b"] = errors.New("suspend failed")
	err := h.m.Evict(context.Background(), "b")
	if err == nil || !strings.Contains(err.Error(), "suspend failed") {
		t.Fatalf("Evict = %v, want the evict func's error", err)
	}
	if h.m.Live("b") {
		t.Fatal("Evict left b live after an error")
	}
	if st := h.m.Stats()["default"]; st != (PoolStats{Slots: 1}) {
		t.Fatalf("stats = %+v", st)
	}
}

func TestEvictPanicIsAnError(t *testing.T) {
	m := New[int](onePool(1), func(context.Context, string, int) error { panic("bad provider") }, nil)
	l, err := m.Acquire(context.Background(), "a", "p", func(context.Context) (int, error) { return 1, nil })
	if err != nil {
		t.Fatal(err)
	}
	l.Release()
	if err := m.Evict(context.Background(), "a"); err == nil || !strings.Contains(err.Error(), "panicked") {
		t.Fatalf("Evict = %v, want a panic error", err)
	}
	if m.Live("a") {
		t.Fatal("a still live")
	}
}

func TestEvictErrors(t *testing.T) {
	h := newHarness(t, onePool(2))
	if err := h.m.Evict(context.Background(), "nope"); !errors.Is(err, ErrNotLive) {
		t.Fatalf("Evict(unknown) = %v, want ErrNotLive", err)
	}
	l := h.acquire("a")
	if err := h.m.Evict(context.Background(), "a"); !errors.Is(err, ErrBusy) {
		t.Fatalf("Evict(held) = %v, want ErrBusy", err)
	}
	l.Release()
	if err := h.m.Evict(context.Background(), "a"); err != nil {
		t.Fatal(err)
	}
	wantStrings(t, "evicted", h.evictions(), []string{"a"})
}

func TestEvictAll(t *testing.T) {
	cfg := Config{Pools: map[string]int{"default": 2, "s": 2}, ProviderPools: map[string]string{"s": "s"}, DefaultPool: "default"}
	h := newHarness(t, cfg)
	h.evictErr["b"] = errors.New("b broke")
	h.evictErr["c"] = errors.New("c broke")
	h.acquire("a").Release()
	h.acquire("b").Release()
	l, _ := h.m.Acquire(context.Background(), "c", "s", h.open("c"))
	l.Release()
	held, _ := h.m.Acquire(context.Background(), "d", "s", h.open("d"))
	err := h.m.EvictAll(context.Background())
	if err == nil || !strings.Contains(err.Error(), "b broke") || !strings.Contains(err.Error(), "c broke") {
		t.Fatalf("EvictAll = %v, want both failures", err)
	}
	if got := len(h.evictions()); got != 3 {
		t.Fatalf("evicted %v, want a, b, c", h.evictions())
	}
	if !h.m.Live("d") {
		t.Fatal("EvictAll evicted a held session")
	}
	held.Release()
}

func TestDiscardAndRemove(t *testing.T) {
	h := newHarness(t, onePool(1))
	l := h.acquire("a")
	if _, ok := h.m.Remove("a"); ok {
		t.Fatal("Remove took a held session")
	}
	l.Discard()
	l.Release() // no effect after Discard
	l.Discard()
	if h.m.Live("a") {
		t.Fatal("discarded session still live")
	}
	wantStrings(t, "evicted", h.evictions(), nil)
	l = h.acquire("b") // the slot is free: no eviction needed
	l.Release()
	l.Discard() // no effect after Release
	if !h.m.Live("b") {
		t.Fatal("Discard after Release dropped the session")
	}
	s, ok := h.m.Remove("b")
	if !ok || s.id != "b" {
		t.Fatalf("Remove(b) = %v, %v", s, ok)
	}
	if _, ok := h.m.Remove("b"); ok {
		t.Fatal("second Remove succeeded")
	}
	wantStrings(t, "evicted", h.evictions(), nil)
	if st := h.m.Stats()["default"]; st != (PoolStats{Slots: 1}) {
		t.Fatalf("stats = %+v", st)
	}
}

func TestDiscardWakesWaiter(t *testing.T) {
	h := newHarness(t, onePool(1))
	l := h.acquire("a")
	got := make(chan *Lease[*sess])
	go func() {
		l, err := h.m.Acquire(context.Background(), "b", "p", h.open("b"))
		if err != nil {
			t.Errorf("Acquire(b): %v", err)
		}
		got <- l
	}()
	<-h.queued
	l.Discard()
	(<-got).Release()
	wantStrings(t, "evicted", h.evictions(), nil)
}

func TestAcquireDuringEvictionReopens(t *testing.T) {
	entered, unblock := make(chan struct{}), make(chan struct{})
	evict := func(_ context.Context, id string, _ *sess) error {
		if id == "a" {
			close(entered)
			<-unblock
		}
		return nil
	}
	m := New[*sess](onePool(1), evict, nil)
	queued := make(chan string, 4)
	m.hookQueued = func(_, id string) { queued <- id }
	opens := 0
	open := func(id string) func(context.Context) (*sess, error) {
		return func(context.Context) (*sess, error) { opens++; return &sess{id: id, gen: opens}, nil }
	}
	l, _ := m.Acquire(context.Background(), "a", "p", open("a"))
	l.Release()
	errc := make(chan error, 1)
	go func() { errc <- m.Evict(context.Background(), "a") }()
	<-entered
	if m.Live("a") {
		t.Fatal("a session being evicted reported live")
	}
	got := make(chan *Lease[*sess])
	go func() {
		l, err := m.Acquire(context.Background(), "a", "p", open("a"))
		if err != nil {
			t.Errorf("Acquire(a) during eviction: %v", err)
		}
		got <- l
	}()
	// The acquirer blocks on the eviction; cancelling another one shows
	// the wait respects its context.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := m.Acquire(ctx, "a", "p", open("a")); !errors.Is(err, ErrNoSlot) {
		t.Fatalf("cancelled acquire during eviction = %v", err)
	}
	close(unblock)
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	l = <-got
	if l.Value().gen != 2 {
		t.Fatalf("gen = %d, want a reopened session", l.Value().gen)
	}
	l.Release()
}

func TestOneSlotHundredIDs(t *testing.T) {
	h := newHarness(t, onePool(1))
	const n = 100
	for round := range 2 {
		for i := range n {
			id := fmt.Sprintf("s%03d", i)
			l := h.acquire(id)
			if l.Value().gen != round+1 {
				t.Fatalf("%s gen = %d, want %d", id, l.Value().gen, round+1)
			}
			l.Release()
		}
	}
	if got := len(h.evictions()); got != 2*n-1 {
		t.Fatalf("evictions = %d, want %d", got, 2*n-1)
	}
	if got := len(h.opens()); got != 2*n {
		t.Fatalf("opens = %d, want %d", got, 2*n)
	}
	for i, id := range h.evictions() {
		if want := fmt.Sprintf("s%03d", i%n); id != want {
			t.Fatalf("eviction %d was %s, want %s", i, id, want)
		}
	}
}
