package jetstream

import (
	"context"
	"testing"
	"time"

	"github.com/warren-dev/warren/store/jetstream/natsembed"
)

// readerKeeps checks that a store opened with zero Replicas and OwnerTTL
// (a reader such as warren export) leaves the stream's replicas and the
// owners bucket's TTL as the daemons set them, and renews on that TTL.
func readerKeeps(t *testing.T, s *Store, urls string, replicas int) {
	t.Helper()
	ctx := context.Background()
	before, err := s.owners.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ttl := before.TTL()
	r, err := New(ctx, Options{Conn: connect(t, urls), UnsafeLazyFsync: true})
	if err != nil {
		t.Fatal(err)
	}
	stream, err := r.js.Stream(ctx, StreamName)
	if err != nil {
		t.Fatal(err)
	}
	info, err := stream.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := info.Config.Replicas; got != replicas {
		t.Errorf("after a reader opened the store the stream has %d replicas, want %d (left as created)", got, replicas)
	}
	st, err := r.owners.Status(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if st.TTL() != ttl || r.o.OwnerTTL != ttl {
		t.Errorf("after a reader opened the store the owners TTL is %v and the reader renews on %v, want %v for both", st.TTL(), r.o.OwnerTTL, ttl)
	}
}

// TestReaderKeepsSettings: one node, a store with a 3 s owner TTL, then a
// reader with zero options.
func TestReaderKeepsSettings(t *testing.T) {
	srv := embed(t, natsembed.Options{Name: "n1"})
	s := newStore(t, connect(t, srv.ClientURL()), "node1", srv)
	if s.o.OwnerTTL != 3*time.Second {
		t.Fatalf("the store was made with a 3s owner TTL, has %v", s.o.OwnerTTL)
	}
	readerKeeps(t, s, srv.ClientURL(), 1)
}
