package jetstream

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/store"
	"github.com/warren-dev/warren/store/jetstream/natsembed"
	"github.com/warren-dev/warren/store/storetest"
)

// TestStateReadsDuringOnAppend: LastSeq and Degraded answer while an
// append's OnAppend runs. The daemon's OnAppend takes its agent lock, and
// the daemon asks Degraded holding that lock (agent.list): a handle that
// kept its state lock across OnAppend deadlocked the daemon (found by the
// kill -9 torture on JetStream). The reads run on another goroutine, as
// the daemon's would; a read still blocked after 10 s fails the test.
func TestStateReadsDuringOnAppend(t *testing.T) {
	srv := embed(t, natsembed.Options{Name: "n1"})
	s := newStore(t, connect(t, srv.ClientURL()), "node1", srv)
	ctx := context.Background()
	id := storetest.NewID(t)
	lease, err := s.Own(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	var lg store.Log
	blocked := ""
	onAppend := func(es []eventlog.Entry) {
		done := make(chan string, 1)
		go func() {
			seq, deg := lg.LastSeq(), lg.Degraded()
			if seq != es[len(es)-1].Seq || deg != nil {
				done <- fmt.Sprintf("during OnAppend: LastSeq %d, Degraded %v; want %d and nil", seq, deg, es[len(es)-1].Seq)
				return
			}
			done <- ""
		}()
		select {
		case blocked = <-done:
		case <-time.After(10 * time.Second):
			blocked = "LastSeq/Degraded blocked while OnAppend ran"
		}
	}
	lg, err = s.OpenLog(ctx, id, store.LogOptions{Lease: lease, OnAppend: onAppend})
	if err != nil {
		t.Fatal(err)
	}
	defer lg.Close()
	if _, err := lg.Append("test.event", map[string]int{"n": 1}); err != nil {
		t.Fatal(err)
	}
	if blocked != "" {
		t.Fatal(blocked)
	}
}
