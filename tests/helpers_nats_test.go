package tests

import (
	"crypto/ed25519"
	"os"
	"path/filepath"
	"testing"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"

	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider/remote"
	"github.com/warren-dev/warren/store/jetstream/natsembed"
)

// A daemon's embedded NATS server lets in only the daemon's key and its
// workers' (docs/WORKERS.md, Authority), so a test that talks to the
// servers itself signs in with the daemon's key, as `warren export
// --cluster` does.

// sharedDaemonKey makes the daemon key of the first home and copies its
// workers.json to the other homes, as an operator copies a node's file to
// every node of a cluster, and returns the key.
func sharedDaemonKey(t testing.TB, homes ...string) ed25519.PrivateKey {
	t.Helper()
	for _, h := range homes {
		if err := os.MkdirAll(h, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	first := filepath.Join(homes[0], remote.KeysFile)
	key, _, err := remote.DaemonKey(faultfs.OS{}, first)
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(first)
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range homes[1:] {
		if err := os.WriteFile(filepath.Join(h, remote.KeysFile), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return key
}

// connectAsDaemon connects to the servers at urls (comma-separated) with
// the daemon's key.
func connectAsDaemon(t testing.TB, key ed25519.PrivateKey, urls string, opts ...nats.Option) *nats.Conn {
	t.Helper()
	nc, err := natsembed.Connect(urls, key, opts...)
	if err != nil {
		t.Fatal(err)
	}
	return nc
}

// daemonOnly lets in the daemon's key alone, with every permission: the
// users of a test's own NATS server that joins a daemon's cluster.
func daemonOnly(pub ed25519.PublicKey) natsembed.Users {
	want := natsembed.NkeyOf(pub)
	return func(nkey string) (string, *server.Permissions, bool) { return "daemon", nil, nkey == want }
}
