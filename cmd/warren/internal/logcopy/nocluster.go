//go:build nocluster

package logcopy

import (
	"context"

	"github.com/warren-dev/warren/daemon"
	"github.com/warren-dev/warren/store"
)

// A binary built with -tags nocluster links no NATS code: the cluster
// side of export and migrate refuses.

// OpenReader refuses: this build has no cluster support.
func OpenReader(context.Context, string, string, string) (store.Store, func(), error) {
	return nil, nil, daemon.ErrNoCluster
}

// Migrate refuses: this build has no cluster support.
func Migrate(context.Context, string, string, string, bool) (int, int, error) {
	return 0, 0, daemon.ErrNoCluster
}
