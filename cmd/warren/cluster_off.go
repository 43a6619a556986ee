//go:build nocluster

package main

import (
	"context"

	"github.com/warren-dev/warren/daemon"
	"github.com/warren-dev/warren/store"
)

// A binary built with -tags nocluster links no NATS code: the cluster
// side of export and migrate refuses.

func openClusterStore(context.Context, string, string, bool) (store.Store, func(), error) {
	return nil, nil, daemon.ErrNoCluster
}

func migrateTo(context.Context, string, string, bool) (int, int, error) {
	return 0, 0, daemon.ErrNoCluster
}
