//go:build nocluster

package logcopy

import (
	"context"
	"path/filepath"

	"github.com/warren-dev/warren/daemon"
	"github.com/warren-dev/warren/store"
)

// A binary built with -tags nocluster links no NATS code: the cluster
// side of export and migrate refuses.

// OpenReader refuses: this build has no cluster support.
func OpenReader(context.Context, string, string) (store.Store, func(), error) {
	return nil, nil, daemon.ErrNoCluster
}

// KeysFile is the keys file export and migrate would sign in with.
func KeysFile(home, keys string) string {
	if keys != "" {
		return keys
	}
	return filepath.Join(home, "workers.json")
}

// Migrate refuses: this build has no cluster support.
func Migrate(context.Context, string, string, string, bool) (int, int, error) {
	return 0, 0, daemon.ErrNoCluster
}
