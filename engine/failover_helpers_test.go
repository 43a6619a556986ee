package engine

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/store"
	"github.com/warren-dev/warren/store/jetstream/natsembed"
)

// The parts of the failover test (failover_test.go): three routed NATS
// servers, a TCP proxy that cuts one daemon off, and store wrappers that
// play a killed daemon and time the claims of the one taking over.

// startNATSCluster starts three sync-always servers routed on loopback and
// waits for JetStream's meta leader.
func startNATSCluster(t *testing.T) ([]*server.Server, []string) {
	t.Helper()
	// EmbedLocalCluster starts again on fresh ports when a route port was
	// taken between its pick and the bind.
	srvs, err := natsembed.StartCluster(natsembed.ClusterOptions{Nodes: 3,
		Dir: func(int) string { return t.TempDir() }, StartTimeout: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	var urls []string
	for _, s := range srvs {
		s := s
		t.Cleanup(func() { s.Shutdown(); s.WaitForShutdown() })
		urls = append(urls, s.ClientURL())
	}
	pollFor(t, 30*time.Second, "a JetStream meta leader", func() bool {
		for _, s := range srvs {
			if s.JetStreamIsLeader() {
				return true
			}
		}
		return false
	})
	return srvs, urls
}

// pollFor polls cond: the NATS server offers no event for its cluster
// state (a meta leader elected, an R3 stream placed).
func pollFor(t *testing.T, limit time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("no %s after %s", what, limit)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cutProxy forwards TCP connections to a server until Cut, which drops
// them and refuses new ones until Resume: a daemon whose network is gone.
type cutProxy struct {
	ln     net.Listener
	mu     sync.Mutex
	target string
	cut    bool
	conns  []net.Conn
}

func newCutProxy(t *testing.T, target string) *cutProxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &cutProxy{ln: ln, target: target}
	go p.serve()
	t.Cleanup(func() { _ = ln.Close(); p.Cut() })
	return p
}

func (p *cutProxy) URL() string { return "nats://" + p.ln.Addr().String() }

func (p *cutProxy) serve() {
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.cut {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		s, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			_ = c.Close()
			continue
		}
		p.conns = append(p.conns, c, s)
		p.mu.Unlock()
		go func() { _, _ = io.Copy(s, c); _ = s.Close() }()
		go func() { _, _ = io.Copy(c, s); _ = c.Close() }()
	}
}

// Cut closes every forwarded connection and refuses new ones.
func (p *cutProxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for _, c := range p.conns {
		_ = c.Close()
	}
	p.conns = nil
}

// Resume forwards new connections again, to target.
func (p *cutProxy) Resume(target string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut, p.target = false, target
}

// errDead is what a killed daemon's store answers: nothing it does
// reaches the cluster any more.
var errDead = fmt.Errorf("this daemon was killed (failover test): %w", eventlog.ErrPoisoned)

// zombieStore is the store of the daemon the test kills. Until Kill it
// passes everything through; after, every call fails (a dead process does
// nothing), and closing a log leaves the real handle as it was: what a
// process paused past its lease holds when it runs again (raw).
type zombieStore struct {
	store.Store
	dead atomic.Bool
	mu   sync.Mutex
	raw  map[string]store.Log
}

func (z *zombieStore) Kill() { z.dead.Store(true) }

func (z *zombieStore) rawLog(id string) store.Log {
	z.mu.Lock()
	defer z.mu.Unlock()
	return z.raw[id]
}

func (z *zombieStore) OpenLog(ctx context.Context, id string, o store.LogOptions) (store.Log, error) {
	if z.dead.Load() {
		return nil, errDead
	}
	lg, err := z.Store.OpenLog(ctx, id, o)
	if err != nil {
		return nil, err
	}
	z.mu.Lock()
	if z.raw == nil {
		z.raw = map[string]store.Log{}
	}
	z.raw[id] = lg
	z.mu.Unlock()
	return &zombieLog{Log: lg, z: z}, nil
}

func (z *zombieStore) UserLog(ctx context.Context, o store.LogOptions) (store.Log, error) {
	return z.OpenLog(ctx, store.UserID, o)
}

func (z *zombieStore) Own(ctx context.Context, id string) (store.Lease, error) {
	if z.dead.Load() {
		return nil, errDead
	}
	return z.Store.Own(ctx, id)
}

func (z *zombieStore) Agents(ctx context.Context) ([]string, error) {
	if z.dead.Load() {
		return nil, errDead
	}
	return z.Store.Agents(ctx)
}

func (z *zombieStore) Read(ctx context.Context, id string, from uint64, hint int64) (store.Reader, error) {
	if z.dead.Load() {
		return nil, errDead
	}
	return z.Store.Read(ctx, id, from, hint)
}

func (z *zombieStore) ReadSeq(ctx context.Context, id string, seq uint64, hint int64) (eventlog.Entry, error) {
	if z.dead.Load() {
		return eventlog.Entry{}, errDead
	}
	return z.Store.ReadSeq(ctx, id, seq, hint)
}

type zombieLog struct {
	store.Log
	z *zombieStore
}

func (l *zombieLog) Append(event string, data any) (eventlog.Entry, error) {
	if l.z.dead.Load() {
		return eventlog.Entry{}, errDead
	}
	return l.Log.Append(event, data)
}

func (l *zombieLog) AppendBatch(recs []eventlog.Record) ([]eventlog.Entry, error) {
	if l.z.dead.Load() {
		return nil, errDead
	}
	return l.Log.AppendBatch(recs)
}

func (l *zombieLog) Degraded() error {
	if l.z.dead.Load() {
		return errDead
	}
	return l.Log.Degraded()
}

func (l *zombieLog) ReadAll(ctx context.Context) ([]eventlog.Entry, error) {
	if l.z.dead.Load() {
		return nil, errDead
	}
	return l.Log.ReadAll(ctx)
}

func (l *zombieLog) Abandon() {
	if !l.z.dead.Load() {
		l.Log.Abandon()
	}
}

func (l *zombieLog) Close() error {
	if l.z.dead.Load() {
		return nil
	}
	return l.Log.Close()
}

// timedStore records when each of its claims succeeded (the daemon taking
// over) and signals each attempt.
type timedStore struct {
	store.Store
	mu       sync.Mutex
	claimed  map[string]time.Time // last successful claim
	attempts chan string          // id, for every claim attempt refused as owned
}

func newTimedStore(s store.Store) *timedStore {
	return &timedStore{Store: s, claimed: map[string]time.Time{}, attempts: make(chan string, 1024)}
}

func (s *timedStore) Own(ctx context.Context, id string) (store.Lease, error) {
	l, err := s.Store.Own(ctx, id)
	now := time.Now()
	if err == nil {
		s.mu.Lock()
		s.claimed[id] = now
		s.mu.Unlock()
	} else if errors.Is(err, store.ErrOwned) {
		select {
		case s.attempts <- id:
		default:
		}
	}
	return l, err
}

func (s *timedStore) claimedAt(id string) (time.Time, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	at, ok := s.claimed[id]
	return at, ok
}

// waitCore waits, driven by the core's events and changes, until cond
// holds; the 90 s bound is a failure bound, not a wait.
func waitCore(t *testing.T, c *Core, what string, cond func() bool, describe ...func() string) {
	t.Helper()
	ch, cancel := c.bus.Subscribe("")
	defer func() { cancel() }()
	deadline := time.NewTimer(90 * time.Second)
	defer deadline.Stop()
	for {
		changed := c.changed.Wait()
		if cond() {
			return
		}
		select {
		case <-changed:
		case _, ok := <-ch:
			if !ok {
				ch, cancel = c.bus.Subscribe("")
			}
		case <-deadline.C:
			state := ""
			for _, d := range describe {
				state += d()
			}
			t.Fatalf("timed out waiting for %s%s", what, state)
		}
	}
}

// events names the entries of id's log, read through st.
func events(t *testing.T, st store.Store, id string) []eventlog.Entry {
	t.Helper()
	r, err := st.Read(context.Background(), id, 0, 0)
	if err != nil {
		t.Fatalf("reading %s: %v", id, err)
	}
	defer r.Close()
	var es []eventlog.Entry
	for {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			return es
		}
		if err != nil {
			t.Fatalf("reading %s: %v", id, err)
		}
		es = append(es, e)
	}
}

func eventNames(es []eventlog.Entry) string {
	var b strings.Builder
	for _, e := range es {
		fmt.Fprintf(&b, " %d:%s", e.Seq, e.Event)
	}
	return b.String()
}

// describeAgents shows what c knows of each agent, for a failure.
func describeAgents(c *Core) func() string {
	return func() string {
		var b strings.Builder
		for _, a := range c.agentList() {
			a.View(func(p *projection, l liveFlags) {
				fmt.Fprintf(&b, "\n  %s %s turn=%d busy=%v cur=%v pending=%d released=%v", a.ID()[:8], p.Name, p.TurnNo, l.Busy, l.Running, p.Pending.Len(), l.Released)
				if r := p.Run; r != nil {
					fmt.Fprintf(&b, " run=%s ended=%v interrupted=%v msgs=%d", r.RunID[:8], r.Ended, r.Interrupted, len(r.MessageIDs))
				}
			})
			if es, err := c.Log(context.Background(), a.ID(), 0); err == nil {
				b.WriteString(eventNames(es))
			}
		}
		return b.String()
	}
}
