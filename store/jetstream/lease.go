package jetstream

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/warren-dev/warren/store"
)

// ownerValue is the value of a key of the owners bucket (doc.go).
type ownerValue struct {
	Node   string `json:"node"`
	BootID string `json:"boot_id"`
}

// lease is a claim in the owners bucket, renewed every OwnerTTL/3.
type lease struct {
	s     *Store
	id    string
	epoch uint64
	value []byte
	lost  chan struct{}
	stop  chan struct{}
	done  chan struct{}

	// clean are the epochs of the holders before this claim that are
	// known to write no more (lazy.go): the release marker this claim
	// replaced named them (none after a lapse).
	clean []uint64

	mu       sync.Mutex
	rev      uint64 // revision of the last write of the key (claim or renewal)
	expires  time.Time
	released bool
}

// Own claims id: a kv.Create of its key, which succeeds only when the key
// is absent, deleted or expired (or lapsed by its last write's time, or
// this boot's own claim whose answer was lost: see below). The claim's
// revision is the epoch. The lease renews itself every OwnerTTL/3 with a
// kv.Update on the revision it last wrote (renewOnce: through an outage
// of the bucket; Lost closes only when another claim took the key).
//
// Once this Store holds the USER inbox's lease, an agent's claim is not a
// key of its own: it rests on that lease (agentLease), as the daemon's
// ownership of the cluster's agents does, so that agents at rest cost no
// renewals (doc.go, "Ownership").
func (s *Store) Own(ctx context.Context, id string) (store.Lease, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	if id != store.UserID {
		if u := s.userLease(); u != nil {
			return u.agent(ctx, id)
		}
	}
	v, _ := json.Marshal(ownerValue{Node: s.o.Node, BootID: s.o.BootID})
	start := s.o.Now()
	// A claim the servers do not answer (the owners bucket electing a
	// leader) is tried again, as appends are: a create whose answer was
	// lost is found by the next attempt as this boot's own value (mine,
	// below) and taken on its revision, so a retry never claims twice.
	c, err := retried(s, ctx, "claim "+id, func(ctx context.Context) (claimed, error) {
		return s.claim(ctx, id, v)
	})
	if err != nil {
		return nil, err
	}
	l := &lease{s: s, id: id, epoch: c.rev, rev: c.rev, value: v, expires: start.Add(s.o.OwnerTTL), clean: c.clean,
		lost: make(chan struct{}), stop: make(chan struct{}), done: make(chan struct{})}
	go l.renew()
	if id == store.UserID {
		s.userMu.Lock()
		s.user = l
		s.userMu.Unlock()
	}
	return l, nil
}

// userLease is the USER inbox's lease this Store claimed last (nil: none
// yet).
func (s *Store) userLease() *lease {
	s.userMu.Lock()
	defer s.userMu.Unlock()
	return s.user
}

// agent is the claim of agent id that rests on l, the USER inbox's lease:
// its epoch, expiry and loss are l's. It is refused once l was lost or
// released (the daemon no longer runs the cluster's agents then). While l
// is past its expiry unrenewed (an election; or this daemon was paused or
// cut off, and another may hold the inbox by now), it waits for the next
// renewal, as appends wait out an election, for claimWait at most.
func (l *lease) agent(ctx context.Context, id string) (store.Lease, error) {
	var deadline time.Time
	for {
		select {
		case <-l.lost:
			return nil, fmt.Errorf("store/jetstream: %s: this daemon's claim on the USER inbox, which its agents' claims rest on, was lost: %w", id, store.ErrOwned)
		default:
		}
		l.mu.Lock()
		released, expires := l.released, l.expires
		l.mu.Unlock()
		if released {
			return nil, fmt.Errorf("store/jetstream: %s: this daemon gave up the USER inbox, which its agents' claims rest on: %w", id, store.ErrOwned)
		}
		now := l.s.o.Now()
		if !now.After(expires) {
			return agentLease{id: id, user: l}, nil
		}
		if deadline.IsZero() {
			deadline = now.Add(claimWait)
		}
		if now.After(deadline) || sleepCtx(ctx, 100*time.Millisecond) != nil {
			return nil, fmt.Errorf("store/jetstream: %s: this daemon's claim on the USER inbox has not been renewed since it expired %s ago; try again once the cluster answers: %w", id, now.Sub(expires).Round(time.Millisecond), store.ErrUnavailable)
		}
	}
}

// claimWait bounds how long an agent claim waits for the USER lease's
// renewal: about as long as the store retries an unanswered append.
const claimWait = 20 * time.Second

// agentLease is an agent's claim resting on the daemon's USER lease: no
// key, no renewal. Another daemon can claim the agent only after claiming
// the USER inbox, which needs this daemon's USER lease lapsed; it then
// appends its own agent.claimed, with a greater epoch, to the agent's log
// before writing it, and the fence refuses this daemon's appends from then
// on.
type agentLease struct {
	id   string
	user *lease
}

func (a agentLease) ID() string                    { return a.id }
func (a agentLease) Epoch() uint64                 { return a.user.epoch }
func (a agentLease) Lost() <-chan struct{}         { return a.user.lost }
func (a agentLease) Expires() time.Time            { return a.user.Expires() }
func (a agentLease) Release(context.Context) error { return nil } // nothing of its own to give up

// claim is one attempt of Own's write: a write of id's key expecting no
// message on it, or, when the key exists, an Update on its revision if it
// has lapsed, was deleted, or holds this boot's own value. A read or write
// the servers did not answer is returned as it is, for Own to retry. A
// claim that replaced a release marker (lazy.go) takes the clean epochs it
// names.
func (s *Store) claim(ctx context.Context, id string, v []byte) (claimed, error) {
	rev, err := s.owners.Update(ctx, id, v, 0)
	if err == nil {
		return claimed{rev: rev}, nil
	}
	if !errors.Is(err, jetstream.ErrKeyExists) && !isWrongLastSeq(err) {
		return claimed{}, fmt.Errorf("store/jetstream: claim %s: %w", id, err)
	}
	holder := "another daemon"
	// The key's last write as the bucket's leader holds it: a KV Get may
	// be answered by a lagging replica (direct get), whose older revision
	// would make the update below fail although the lease has lapsed (the
	// long three-node torture saw a restarted daemon refused so).
	e, err := s.ownerKey(ctx, id)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		// Removed since the create was refused (the bucket's MaxAge
		// sweep): the create is tried again, once.
		if rev, err = s.owners.Update(ctx, id, v, 0); err == nil {
			return claimed{rev: rev}, nil
		}
		if errors.Is(err, jetstream.ErrKeyExists) || isWrongLastSeq(err) {
			return claimed{}, s.held(id, holder)
		}
		return claimed{}, fmt.Errorf("store/jetstream: claim %s: %w", id, err)
	}
	if err != nil {
		if isUnavailable(err) {
			return claimed{}, fmt.Errorf("store/jetstream: claim %s: reading its key: %w", id, err)
		}
		return claimed{}, fmt.Errorf("%w (its key could not be read: %v)", s.held(id, holder), err)
	}
	var ov ownerValue
	if json.Unmarshal(e.Data, &ov) == nil {
		holder = fmt.Sprintf("node %q (boot %s)", ov.Node, ov.BootID)
	}
	op := e.Header.Get("KV-Operation")
	deleted := op != ""
	// This boot's own value is a claim of this Store whose answer was lost
	// (an earlier attempt or Own timed out after the create was stored):
	// only this boot writes it, and its caller asks for one lease per id
	// at a time. It is taken over like a lapsed one, so that a lost answer
	// does not block the id for a TTL.
	mine := !deleted && bytes.Equal(e.Data, v)
	if s.o.Now().Sub(e.Time) <= s.o.OwnerTTL && !deleted && !mine {
		return claimed{}, s.held(id, holder)
	}
	// Lapsed, but not removed yet (the server's MaxAge sweep runs late),
	// deleted since the create was refused, or ours: replace it on its
	// revision. A renewal racing with this fails on the same revision, so
	// one wins.
	rev, err = s.owners.Update(ctx, id, v, e.Sequence)
	if errors.Is(err, jetstream.ErrKeyExists) || isWrongLastSeq(err) {
		return claimed{}, s.held(id, holder)
	}
	if err != nil {
		return claimed{}, fmt.Errorf("store/jetstream: claim %s: %w", id, err)
	}
	c := claimed{rev: rev}
	if op == "DEL" {
		c.clean = parseEpochs(e.Header.Get(hdrCleanEpochs))
	}
	return c, nil
}

// claimed is a claim's write: its revision (the epoch), and the clean
// epochs of the release it replaced.
type claimed struct {
	rev   uint64
	clean []uint64
}

// held is the refusal of a claim of id while holder's lease stands.
func (s *Store) held(id, holder string) error {
	return fmt.Errorf("store/jetstream: %s is held by %s: %w; its lease lapses %s after its last renewal", id, holder, store.ErrOwned, s.o.OwnerTTL)
}

func (l *lease) renew() {
	defer close(l.done)
	ttl := l.s.o.OwnerTTL
	t := time.NewTicker(ttl / 3)
	defer t.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-t.C:
		}
		if err := l.renewOnce(); err != nil {
			l.s.o.Logger.Warn("lease renewal failed: the agent must stop", "agent", l.id, "epoch", l.epoch, "err", err)
			close(l.lost)
			return
		}
	}
}

// renewOnce writes the key on the revision last written. It is lost only
// when a read shows another claim (or the key gone and claimed by someone
// else since): while the bucket does not answer (an election, a server
// going away) it keeps trying, past the lease's expiry if need be. Nobody
// can claim the key meanwhile (a claim needs the same bucket's leader),
// and the log's fence keeps a late append safe whatever the lease thinks;
// the holder pauses its side effects while Expires is past (store.Lease).
// A key that lapsed with nobody claiming it is created again.
func (l *lease) renewOnce() error {
	ttl := l.s.o.OwnerTTL
	l.mu.Lock()
	rev := l.rev
	l.mu.Unlock()
	first := l.s.o.Now()
	for n := 1; ; n++ {
		start := l.s.o.Now()
		ctx, cancel := context.WithTimeout(context.Background(), min(ttl/6, attemptTimeout))
		nrev, err := l.s.owners.Update(ctx, l.id, l.value, rev)
		cancel()
		if err == nil {
			l.renewed(nrev, start)
			return nil
		}
		if errors.Is(err, jetstream.ErrKeyExists) || isWrongLastSeq(err) || errors.Is(err, jetstream.ErrKeyNotFound) {
			// An attempt whose answer was lost (a timeout here, or the
			// client's own retry after "no responders") may have been
			// stored: then the key holds this lease's value at a later
			// revision, written after the first attempt began.
			switch nrev, who := l.lastWrite(rev); who {
			case writeMine:
				l.renewed(nrev, first)
				return nil
			case writeOther:
				return fmt.Errorf("the claim of %s changed since revision %d: %w", l.id, rev, err)
			case writeGone:
				if nrev, err := l.recreate(); err == nil {
					l.s.o.Logger.Info("the lease lapsed unclaimed during an outage; taken again", "agent", l.id, "epoch", l.epoch)
					l.renewed(nrev, start)
					return nil
				} else if errors.Is(err, jetstream.ErrKeyExists) {
					return fmt.Errorf("the claim of %s lapsed and another daemon took it: %w", l.id, err)
				}
			}
			// writeUnknown: the read lags the write, or failed; try again.
		}
		if l.s.nc.IsClosed() {
			return fmt.Errorf("no renewal of %s: the connection to the cluster is closed: %w", l.id, err)
		}
		if n == 3 {
			l.s.o.Logger.Warn("the owners bucket does not answer; the lease is kept and renewed when it does", "agent", l.id, "err", err)
		}
		select {
		case <-l.stop:
			return nil
		case <-time.After(min(retryDelay(n), ttl/3, renewRetryMax)): // the bucket may be electing a leader; it gives no signal
		}
	}
}

// renewRetryMax bounds the wait between two renewal attempts while the
// bucket does not answer: well under the grace a standby gives a lapsed
// lease it saw held (engine/internal/claims, grace.go), so that once the
// bucket answers again the holder writes its key back first.
const renewRetryMax = 400 * time.Millisecond

// renewed records a write of the key at rev, started at start.
func (l *lease) renewed(rev uint64, start time.Time) {
	l.mu.Lock()
	l.rev = rev
	l.expires = start.Add(l.s.o.OwnerTTL)
	l.mu.Unlock()
}

// recreate claims the key again after it lapsed: a kv.Create, which
// fails if another daemon got there first. The epoch stays the first
// claim's, so the log must show that no other claim wrote it since: its
// last message was written under this lease's epoch (or there is none).
// A claim that came and went (another daemon took the key, wrote, and
// released it) has left its own entries last: the lease is lost then.
func (l *lease) recreate() (uint64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), min(l.s.o.OwnerTTL/6, attemptTimeout))
	defer cancel()
	last, err := l.s.lastOf(ctx, Subject(l.id))
	if err != nil {
		return 0, err
	}
	if last != nil {
		id := last.Header.Get(hdrMsgID)
		if epoch, ok := msgIDEpoch(id); !ok || epoch != l.epoch {
			return 0, fmt.Errorf("the log of %s was written under another claim (%q) while the lease had lapsed: %w", l.id, id, jetstream.ErrKeyExists)
		}
	}
	return l.s.owners.Create(ctx, l.id, l.value)
}

// ownerKey is the last write of id's key in the owners bucket, read from
// the bucket's stream leader (a KV Get may be answered by a lagging
// replica): jetstream.ErrMsgNotFound when there is none.
func (s *Store) ownerKey(ctx context.Context, id string) (*jetstream.RawStreamMsg, error) {
	return s.leaderGetFrom(ctx, "KV_"+OwnersBucket, msgGetRequest{LastFor: "$KV." + OwnersBucket + "." + id})
}

// Who wrote the owners key last, as lastWrite tells.
const (
	writeUnknown = iota // the read failed, or lags (shows rev or older)
	writeMine           // this lease's value at a later revision
	writeOther          // another value: another claim
	writeGone           // no key: lapsed, or released by a claim that came and went
)

// lastWrite reads the key after a renewal on rev was refused. One daemon
// holds one lease per id, so no other writer puts this lease's value.
// KV reads may be served by a lagging replica: a read showing rev or an
// older revision proves nothing.
func (l *lease) lastWrite(rev uint64) (uint64, int) {
	ctx, cancel := context.WithTimeout(context.Background(), l.s.o.OwnerTTL/6)
	defer cancel()
	e, err := l.s.owners.Get(ctx, l.id)
	switch {
	case errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted):
		return 0, writeGone
	case err != nil || e.Revision() <= rev:
		return 0, writeUnknown
	case !bytes.Equal(e.Value(), l.value):
		return 0, writeOther
	}
	return e.Revision(), writeMine
}

func (l *lease) ID() string            { return l.id }
func (l *lease) Epoch() uint64         { return l.epoch }
func (l *lease) Lost() <-chan struct{} { return l.lost }

func (l *lease) Expires() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.expires
}

// Release stops renewing and deletes the key if it still holds this
// lease's last write, so another daemon can claim at once.
func (l *lease) Release(ctx context.Context) error {
	l.mu.Lock()
	if l.released {
		l.mu.Unlock()
		return nil
	}
	l.released = true
	l.mu.Unlock()
	close(l.stop)
	<-l.done
	select {
	case <-l.lost:
		return nil // the key is no longer ours to delete
	default:
	}
	if l.id == store.UserID && !l.s.seal(l.epoch) {
		// A release tells the next holder this daemon writes no log
		// more (lazy.go); it cannot say so, so the key is left to lapse.
		l.s.o.Logger.Warn("leaving the USER inbox's lease to lapse instead of releasing it: a log is still open, an append is in flight, or one's outcome is unknown", "ttl", l.s.o.OwnerTTL)
		return nil
	}
	l.mu.Lock()
	rev := l.rev
	l.mu.Unlock()
	if l.id == store.UserID {
		return l.s.releaseUser(ctx, rev, append([]uint64{l.epoch}, l.clean...))
	}
	if err := l.s.owners.Delete(ctx, l.id, jetstream.LastRevision(rev)); err != nil {
		return fmt.Errorf("store/jetstream: release %s: %w", l.id, err)
	}
	return nil
}

// isWrongLastSeq reports a KV write refused on its expected revision.
func isWrongLastSeq(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}
