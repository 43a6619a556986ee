package worker

import (
	"crypto/ed25519"
	"crypto/rand"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"

	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/remote"
)

// TestNewRefusesBadOptions: a worker says what is wrong with its id or
// pools before it joins anything.
func TestNewRefusesBadOptions(t *testing.T) {
	lookup := func(name string) (provider.Provider, bool) { return nil, name == "scripted" }
	_, key, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	daemonPub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		o    Options
		want string
	}{
		{Options{ID: "a.b", Key: key, DaemonKey: daemonPub, Pools: map[string]int{"scripted": 1}, Lookup: lookup}, "id"},
		{Options{ID: "w1", Key: key, DaemonKey: daemonPub, Lookup: lookup}, "at least one pool"},
		{Options{ID: "w1", Pools: map[string]int{"scripted": 1}, Lookup: lookup}, "token"},
		{Options{ID: "w1", Key: key, DaemonKey: daemonPub, Pools: map[string]int{"scripted": 0}, Lookup: lookup}, "at least 1 slot"},
		{Options{ID: "w1", Key: key, DaemonKey: daemonPub, Pools: map[string]int{"claude": 2}, Lookup: lookup}, "no provider entry"},
		{Options{ID: "w1", Key: key, DaemonKey: daemonPub, Pools: map[string]int{"scripted": 2}, Lookup: lookup, Conn: &nats.Conn{}}, "CustomInboxPrefix"},
	} {
		if _, err := New(c.o); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("New(%+v): %v, want an error about %q", c.o, err, c.want)
		}
	}
	conn := &nats.Conn{Opts: nats.Options{InboxPrefix: remote.InboxPrefix("w1")}}
	if _, err := New(Options{ID: "w1", Key: key, DaemonKey: daemonPub, Pools: map[string]int{"scripted": 2}, Lookup: lookup, Conn: conn}); err != nil {
		t.Fatal(err)
	}
}
