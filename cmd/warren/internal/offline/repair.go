package offline

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// errClusterRepair is returned by `warren repair` for a home whose daemon
// keeps its logs in a NATS JetStream cluster (docs/DECISIONS.md,
// "Failover between daemons"): there is no local log to cut.
var errClusterRepair = errors.New("warren repair works on a local home's files only")

// RefuseClusterRepair refuses a repair when the home has no local log for
// ref but runs an embedded NATS server (<home>/nats), or when the user
// names a cluster: a JetStream log has no torn tail to cut, and a damaged
// entry (CRC or seq) is reported, not cut. The error says what to do.
func RefuseClusterRepair(home, cluster string, missing error) error {
	why := ""
	switch {
	case cluster != "":
		why = "the logs of " + cluster + " are in NATS JetStream"
	case missing != nil:
		if st, err := os.Stat(filepath.Join(home, "nats")); err == nil && st.IsDir() {
			why = "this home's daemon runs with --cluster-embedded (" + filepath.Join(home, "nats") + "): its logs are in NATS JetStream"
		}
	}
	if why == "" {
		return nil
	}
	return fmt.Errorf("%w: %s, where appends are all-or-none (no torn tail to cut) and a damaged entry is reported, not cut: "+
		"the daemon lists such an agent as corrupt. Keep a copy of what is readable with `warren export REF --cluster URL`; "+
		"there is no repair of a cluster log yet", errClusterRepair, why)
}

// ClusterHome reports whether home's daemon runs (or ran) an embedded
// NATS server (<home>/nats), which keeps its logs.
func ClusterHome(home string) bool {
	st, err := os.Stat(filepath.Join(home, "nats"))
	return err == nil && st.IsDir()
}
