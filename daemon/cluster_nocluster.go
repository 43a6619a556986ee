//go:build nocluster

package daemon

import (
	"context"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/faultfs"
)

// ClusterSupport says whether this binary links the NATS server and
// client (false: built with -tags nocluster).
const ClusterSupport = false

// openStore returns the home's store; cluster options are refused, this
// binary having no NATS code.
func openStore(_ context.Context, opts Options, fsys faultfs.FS, home string, logger hclog.Logger, _ string, maxOpenLogs int) (storeParts, error) {
	if opts.Cluster.enabled() {
		return storeParts{}, ErrNoCluster
	}
	st, closeSt := openLocalStore(fsys, home, logger, maxOpenLogs)
	return storeParts{st: st, close: closeSt}, nil
}
