package multiplexer

import (
	"context"
	"errors"
	"slices"
	"sync"
	"testing"
	"time"
)

type sess struct {
	id  string
	gen int
}

// harness records opens and evictions of a Mux[*sess].
type harness struct {
	t        *testing.T
	m        *Mux[*sess]
	mu       sync.Mutex
	opened   []string
	evicted  []string
	gen      map[string]int
	evictErr map[string]error
	queued   chan string // ids that joined a wait queue
}

func newHarness(t *testing.T, cfg Config) *harness {
	t.Helper()
	h := &harness{t: t, gen: map[string]int{}, evictErr: map[string]error{}, queued: make(chan string, 64)}
	h.m = New[*sess](cfg, h.evict, nil)
	h.m.hookQueued = func(_, id string) { h.queued <- id }
	return h
}

func onePool(n int) Config {
	return Config{Pools: map[string]int{"default": n}, DefaultPool: "default"}
}

func (h *harness) evict(_ context.Context, id string, s *sess) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if s.id != id {
		h.t.Errorf("evict(%s) got session of %s", id, s.id)
	}
	h.evicted = append(h.evicted, id)
	return h.evictErr[id]
}

func (h *harness) open(id string) func(context.Context) (*sess, error) {
	return func(context.Context) (*sess, error) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.gen[id]++
		h.opened = append(h.opened, id)
		return &sess{id: id, gen: h.gen[id]}, nil
	}
}

func (h *harness) acquire(id string) *Lease[*sess] {
	h.t.Helper()
	l, err := h.m.Acquire(context.Background(), id, "p", h.open(id))
	if err != nil {
		h.t.Fatalf("Acquire(%s): %v", id, err)
	}
	if l.Value().id != id || l.ID() != id {
		h.t.Fatalf("Acquire(%s) returned session %s", id, l.Value().id)
	}
	return l
}

func (h *harness) evictions() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.evicted)
}

func (h *harness) opens() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.opened)
}

func wantStrings(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Fatalf("%s = %v, want %v", what, got, want)
	}
}

func TestLRUOrderEvictsLeastRecentlyReleased(t *testing.T) {
	h := newHarness(t, onePool(2))
	a, b := h.acquire("a"), h.acquire("b")
	a.Release()
	b.Release()
	h.acquire("c").Release() // evicts a: released before b
	wantStrings(t, "evicted", h.evictions(), []string{"a"})
	// Re-using b moves it to the tail: c is now least recently released.
	h.acquire("b").Release()
	h.acquire("d").Release()
	wantStrings(t, "evicted", h.evictions(), []string{"a", "c"})
	if !h.m.Live("b") || !h.m.Live("d") || h.m.Live("a") || h.m.Live("c") {
		t.Fatalf("live set wrong: a=%v b=%v c=%v d=%v", h.m.Live("a"), h.m.Live("b"), h.m.Live("c"), h.m.Live("d"))
	}
	if got := h.m.Stats()["default"]; got != (PoolStats{Slots: 2, Live: 2}) {
		t.Fatalf("stats = %+v", got)
	}
}

func TestReacquireIdleSessionKeepsIt(t *testing.T) {
	h := newHarness(t, onePool(1))
	l := h.acquire("a")
	first := l.Value()
	l.Release()
	l2 := h.acquire("a")
	if l2.Value() != first {
		t.Fatal("re-acquiring an idle session opened a new one")
	}
	wantStrings(t, "opened", h.opens(), []string{"a"})
	wantStrings(t, "evicted", h.evictions(), nil)
}

func TestEvictedSessionReopensOnNextUse(t *testing.T) {
	h := newHarness(t, onePool(1))
	h.acquire("a").Release()
	h.acquire("b").Release()
	l := h.acquire("a")
	if l.Value().gen != 2 {
		t.Fatalf("a's generation = %d, want 2 (reopened after eviction)", l.Value().gen)
	}
	wantStrings(t, "evicted", h.evictions(), []string{"a", "b"})
}

func TestHeldSessionIsNeverEvicted(t *testing.T) {
	h := newHarness(t, onePool(2))
	a := h.acquire("a") // stays held throughout
	h.acquire("b").Release()
	c := h.acquire("c") // must evict b, not a
	wantStrings(t, "evicted", h.evictions(), []string{"b"})
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-h.queued; cancel() }()
	_, err := h.m.Acquire(ctx, "d", "p", h.open("d"))
	if !errors.Is(err, ErrNoSlot) || !errors.Is(err, context.Canceled) {
		t.Fatalf("Acquire with all slots held: err = %v, want ErrNoSlot and context.Canceled", err)
	}
	wantStrings(t, "evicted", h.evictions(), []string{"b"})
	if !h.m.Live("a") || !h.m.Live("c") {
		t.Fatal("held sessions were dropped")
	}
	if err := h.m.Evict(context.Background(), "a"); !errors.Is(err, ErrBusy) {
		t.Fatalf("Evict(held) = %v, want ErrBusy", err)
	}
	if err := h.m.EvictAll(context.Background()); err != nil {
		t.Fatalf("EvictAll: %v", err)
	}
	wantStrings(t, "evicted", h.evictions(), []string{"b"})
	a.Release()
	c.Release()
}

func TestDeadlineGivesErrNoSlot(t *testing.T) {
	h := newHarness(t, onePool(1))
	h.acquire("a")
	ctx, cancel := context.WithDeadline(context.Background(), timeZero)
	defer cancel()
	_, err := h.m.Acquire(ctx, "b", "p", h.open("b"))
	if !errors.Is(err, ErrNoSlot) || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("err = %v, want ErrNoSlot wrapping DeadlineExceeded", err)
	}
	if st := h.m.Stats()["default"]; st.Waiting != 0 || st.Live != 1 || st.Held != 1 {
		t.Fatalf("stats after a timed-out wait = %+v", st)
	}
}

func TestBusy(t *testing.T) {
	h := newHarness(t, onePool(2))
	l := h.acquire("a")
	if _, err := h.m.Acquire(context.Background(), "a", "p", h.open("a")); !errors.Is(err, ErrBusy) {
		t.Fatalf("Acquire(held) = %v, want ErrBusy", err)
	}
	// A session being opened is busy too.
	entered, unblock := make(chan struct{}), make(chan struct{})
	done := make(chan error)
	go func() {
		l, err := h.m.Acquire(context.Background(), "b", "p", func(context.Context) (*sess, error) {
			close(entered)
			<-unblock
			return &sess{id: "b"}, nil
		})
		if err == nil {
			l.Release()
		}
		done <- err
	}()
	<-entered
	if _, err := h.m.Acquire(context.Background(), "b", "p", h.open("b")); !errors.Is(err, ErrBusy) {
		t.Fatalf("Acquire(opening) = %v, want ErrBusy", err)
	}
	if h.m.Live("b") {
		t.Fatal("a session being opened reported live")
	}
	close(unblock)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	l.Release()
	l.Release() // idempotent
	if st := h.m.Stats()["default"]; st != (PoolStats{Slots: 2, Live: 2}) {
		t.Fatalf("stats = %+v", st)
	}
}

func TestFIFOWaiters(t *testing.T) {
	h := newHarness(t, onePool(1))
	x := h.acquire("x")
	var mu sync.Mutex
	var got []string
	var wg sync.WaitGroup
	ids := []string{"w1", "w2", "w3", "w4"}
	for _, id := range ids {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l, err := h.m.Acquire(context.Background(), id, "p", h.open(id))
			if err != nil {
				t.Errorf("Acquire(%s): %v", id, err)
				return
			}
			mu.Lock()
			got = append(got, id)
			mu.Unlock()
			l.Release()
		}()
		if q := <-h.queued; q != id {
			t.Fatalf("queued %s, want %s", q, id)
		}
	}
	if st := h.m.Stats()["default"]; st.Waiting != 4 {
		t.Fatalf("waiting = %d, want 4", st.Waiting)
	}
	// A newcomer must not overtake the queue even though x is about to be
	// released: it queues behind w4.
	wg.Add(1)
	go func() {
		defer wg.Done()
		l, err := h.m.Acquire(context.Background(), "late", "p", h.open("late"))
		if err != nil {
			t.Errorf("Acquire(late): %v", err)
			return
		}
		mu.Lock()
		got = append(got, "late")
		mu.Unlock()
		l.Release()
	}()
	<-h.queued
	x.Release()
	wg.Wait()
	wantStrings(t, "grant order", got, append(ids, "late"))
	wantStrings(t, "evicted", h.evictions(), []string{"x", "w1", "w2", "w3", "w4"})
}

func TestWaiterForSessionThatBecameBusyGetsErrBusy(t *testing.T) {
	h := newHarness(t, onePool(1))
	x := h.acquire("x")
	first := make(chan *Lease[*sess])
	go func() {
		l, err := h.m.Acquire(context.Background(), "y", "p", h.open("y"))
		if err != nil {
			t.Errorf("first Acquire(y): %v", err)
		}
		first <- l
	}()
	<-h.queued
	second := make(chan error)
	go func() {
		_, err := h.m.Acquire(context.Background(), "y", "p", h.open("y"))
		second <- err
	}()
	<-h.queued
	x.Release()
	l := <-first
	if err := <-second; !errors.Is(err, ErrBusy) {
		t.Fatalf("second waiter for y: %v, want ErrBusy", err)
	}
	l.Release()
	wantStrings(t, "opened", h.opens(), []string{"x", "y"})
}

func TestCancelledWaiterPassesGrantOn(t *testing.T) {
	// A waiter whose context ends after it was granted a slot (with x as
	// the victim to evict) gives the grant back: x stays live and idle, and
	// an Acquire of x that was waiting for that eviction gets x itself.
	h := newHarness(t, onePool(1))
	x := h.acquire("x")
	woken, proceed, evictWait := make(chan string, 1), make(chan struct{}), make(chan string, 1)
	h.m.hookWoken = func(id string) { woken <- id; <-proceed }
	h.m.hookEvictWait = func(id string) { evictWait <- id }
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error)
	go func() {
		_, err := h.m.Acquire(ctx, "y", "p", h.open("y"))
		errc <- err
	}()
	<-h.queued
	x.Release() // grants x's slot to y; y is held in hookWoken
	<-woken
	cancel()
	got := make(chan *Lease[*sess])
	go func() {
		l, err := h.m.Acquire(context.Background(), "x", "p", h.open("x"))
		if err != nil {
			t.Errorf("Acquire(x): %v", err)
		}
		got <- l
	}()
	if id := <-evictWait; id != "x" {
		t.Fatalf("evict wait for %s", id)
	}
	close(proceed)
	if err := <-errc; !errors.Is(err, ErrNoSlot) || !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v", err)
	}
	l := <-got
	if l.Value().gen != 1 {
		t.Fatalf("x was reopened (gen %d); the grant was not handed back", l.Value().gen)
	}
	wantStrings(t, "evicted", h.evictions(), nil)
	if h.m.Live("y") {
		t.Fatal("y live after its Acquire failed")
	}
	l.Release()
	if st := h.m.Stats()["default"]; st != (PoolStats{Slots: 1, Live: 1}) {
		t.Fatalf("stats = %+v", st)
	}
}

func TestIndependentPools(t *testing.T) {
	cfg := Config{
		Pools:         map[string]int{"default": 1, "scripted": 2},
		ProviderPools: map[string]string{"scripted": "scripted"},
		DefaultPool:   "default",
	}
	h := newHarness(t, cfg)
	acq := func(id, prov string) *Lease[*sess] {
		l, err := h.m.Acquire(context.Background(), id, prov, h.open(id))
		if err != nil {
			t.Fatalf("Acquire(%s,%s): %v", id, prov, err)
		}
		return l
	}
	d1 := acq("d1", "api")
	acq("s1", "scripted").Release()
	acq("s2", "scripted").Release()
	// default is full and held: a request there waits and must not evict
	// the idle sessions of the scripted pool.
	ctx, cancel := context.WithCancel(context.Background())
	go func() { <-h.queued; cancel() }()
	if _, err := h.m.Acquire(ctx, "d2", "api", h.open("d2")); !errors.Is(err, ErrNoSlot) {
		t.Fatalf("err = %v, want ErrNoSlot", err)
	}
	wantStrings(t, "evicted", h.evictions(), nil)
	// scripted evicts only within scripted.
	acq("s3", "scripted").Release()
	wantStrings(t, "evicted", h.evictions(), []string{"s1"})
	d1.Release()
	acq("d2", "other").Release()
	wantStrings(t, "evicted", h.evictions(), []string{"s1", "d1"})
	st := h.m.Stats()
	if st["default"] != (PoolStats{Slots: 1, Live: 1}) || st["scripted"] != (PoolStats{Slots: 2, Live: 2}) {
		t.Fatalf("stats = %+v", st)
	}
	if p, ok := h.m.PoolOf("s3"); !ok || p != "scripted" {
		t.Fatalf("PoolOf(s3) = %q %v", p, ok)
	}
}

func TestUnknownPool(t *testing.T) {
	h := newHarness(t, Config{Pools: map[string]int{"default": 1}, ProviderPools: map[string]string{"x": "nope"}, DefaultPool: "default"})
	_, err := h.m.Acquire(context.Background(), "a", "x", h.open("a"))
	if !errors.Is(err, ErrUnknownPool) {
		t.Fatalf("err = %v, want ErrUnknownPool", err)
	}
	if len(h.opens()) != 0 {
		t.Fatal("open was called for an unknown pool")
	}
	if _, err := h.m.Acquire(context.Background(), "a", "x", nil); err == nil {
		t.Fatal("Acquire with a nil open succeeded")
	}
}

func TestOpenErrorFreesSlot(t *testing.T) {
	h := newHarness(t, onePool(1))
	boom := errors.New("boom")
	_, err := h.m.Acquire(context.Background(), "a", "p", func(context.Context) (*sess, error) { return nil, boom })
	if !errors.Is(err, boom) {
		t.Fatalf("err = %v, want boom", err)
	}
	_, err = h.m.Acquire(context.Background(), "a", "p", func(context.Context) (*sess, error) { panic("kaboom") })
	if err == nil {
		t.Fatal("a panicking open succeeded")
	}
	if h.m.Live("a") {
		t.Fatal("failed open left the session live")
	}
	h.acquire("b").Release()
	if st := h.m.Stats()["default"]; st != (PoolStats{Slots: 1, Live: 1}) {
		t.Fatalf("stats = %+v", st)
	}
}

func TestOpenErrorWakesWaiter(t *testing.T) {
	h := newHarness(t, onePool(1))
	entered, fail := make(chan struct{}), make(chan struct{})
	errc := make(chan error)
	go func() {
		_, err := h.m.Acquire(context.Background(), "a", "p", func(context.Context) (*sess, error) {
			close(entered)
			<-fail
			return nil, errors.New("provider did not start")
		})
		errc <- err
	}()
	<-entered
	got := make(chan *Lease[*sess])
	go func() {
		l, err := h.m.Acquire(context.Background(), "b", "p", h.open("b"))
		if err != nil {
			t.Errorf("Acquire(b): %v", err)
		}
		got <- l
	}()
	<-h.queued
	close(fail)
	if err := <-errc; err == nil {
		t.Fatal("failing open succeeded")
	}
	(<-got).Release()
	wantStrings(t, "evicted", h.evictions(), nil)
}

var timeZero = time.Unix(0, 0)
