package jetstream

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/warren-dev/warren/store"
	"github.com/warren-dev/warren/store/jetstream/natsembed"
	"github.com/warren-dev/warren/store/storetest"
)

// embed starts one sync-always server for the test.
func embed(t testing.TB, o natsembed.Options) *server.Server {
	t.Helper()
	if o.Dir == "" {
		o.Dir = t.TempDir()
	}
	if o.Port == 0 {
		o.Port = -1
	}
	srv, err := natsembed.Start(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	return srv
}

func connect(t testing.TB, urls string) *nats.Conn {
	t.Helper()
	nc, err := nats.Connect(urls, nats.MaxReconnects(-1), nats.ReconnectWait(50*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(nc.Close)
	return nc
}

func newStore(t testing.TB, nc *nats.Conn, node string, srvs ...*server.Server) *Store {
	t.Helper()
	s, err := New(context.Background(), Options{Conn: nc, Node: node, BootID: node + "-boot", Embedded: srvs,
		Replicas: len(srvs), OwnerTTL: 3 * time.Second, Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// ownedLog claims id on s and opens its log under that lease.
func ownedLog(t testing.TB, s *Store, id string) (store.Lease, store.Log) {
	t.Helper()
	ctx := context.Background()
	lease, err := s.Own(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	lg, err := s.OpenLog(ctx, id, store.LogOptions{Lease: lease})
	if err != nil {
		t.Fatal(err)
	}
	return lease, lg
}

// takeover makes node2 claim id as if the current lease had lapsed: the
// owner key is deleted behind the holder's back, then claimed.
func takeover(t *testing.T, s *Store, id string) store.Lease {
	t.Helper()
	ctx := context.Background()
	if err := s.owners.Purge(ctx, id); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		t.Fatal(err)
	}
	s2 := newStore(t, s.nc, "node2", s.o.Embedded...)
	l, err := s2.Own(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = l.Release(context.Background()) })
	return l
}

// raw concatenates the message bodies of id's subject.
func raw(t *testing.T, s *Store, id string) []byte {
	t.Helper()
	ctx := context.Background()
	last, err := s.lastOf(ctx, Subject(id))
	if err != nil || last == nil {
		t.Fatalf("no messages for %s: %v", id, err)
	}
	var out []byte
	for seq := uint64(1); seq <= last.Sequence; seq++ {
		m, err := s.leaderGet(ctx, msgGetRequest{Seq: seq})
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgNotFound) {
				continue
			}
			t.Fatal(err)
		}
		if m.Subject == Subject(id) {
			out = append(out, m.Data...)
		}
	}
	return out
}

func harness() storetest.Harness {
	return storetest.Harness{
		New: func(t *testing.T) store.Store {
			srv := embed(t, natsembed.Options{Name: "n1"})
			return newStore(t, connect(t, srv.ClientURL()), "node1", srv)
		},
		Reopen: func(t *testing.T, s store.Store) store.Store {
			js := s.(*Store)
			_ = js.Close()
			return newStore(t, js.nc, "node1", js.o.Embedded...)
		},
		Raw:      func(t *testing.T, s store.Store, id string) []byte { return raw(t, s.(*Store), id) },
		Takeover: func(t *testing.T, s store.Store, id string) store.Lease { return takeover(t, s.(*Store), id) },
	}
}

func srvs(s ...*server.Server) []*server.Server { return s }
