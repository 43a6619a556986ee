// Package logcopy copies agents' logs line for line between stores:
// `warren export` writes one log as the events.jsonl a home holds (every
// entry read back with its CRC and seq checked), and `warren migrate`
// copies a stopped home's logs and session snapshots into a NATS
// JetStream cluster and verifies each by exporting both. The cluster side
// (cluster.go) is the only code of the binary that links the NATS client;
// a build with -tags nocluster takes nocluster.go, which refuses.
package logcopy

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/eventlog/record"
	"github.com/warren-dev/warren/store"
)

// Export writes id's log in st to w as SPEC 3 lines and returns how many.
func Export(ctx context.Context, st store.Store, id string, w io.Writer) (int, error) {
	r, err := st.Read(ctx, id, 0, 0)
	if err != nil {
		return 0, fmt.Errorf("reading the log of %s: %w", id, err)
	}
	defer r.Close()
	n := 0
	for {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("reading the log of %s after %d entries: %w", id, n, err)
		}
		line, err := record.EncodeLine(e.Seq, e.TS, eventlog.Record{Event: e.Event, Data: e.Data})
		if err != nil {
			return n, fmt.Errorf("encoding entry %d of %s: %w", e.Seq, id, err)
		}
		if _, err := w.Write(line); err != nil {
			return n, err
		}
		n++
	}
}
