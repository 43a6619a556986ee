package engine

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/store"
)

// flakyStore answers the first fails opens of each log with
// store.ErrUnavailable, as a cluster electing its leaders does after the
// daemon that held them died.
type flakyStore struct {
	store.Store
	fails int
	mu    sync.Mutex
	tries map[string]int
}

func (f *flakyStore) OpenLog(ctx context.Context, id string, o store.LogOptions) (store.Log, error) {
	f.mu.Lock()
	f.tries[id]++
	n := f.tries[id]
	f.mu.Unlock()
	if n <= f.fails {
		return nil, fmt.Errorf("store/jetstream: read %s: %w: nats: API error: code=503 (test)", id, store.ErrUnavailable)
	}
	return f.Store.OpenLog(ctx, id, o)
}

func (f *flakyStore) UserLog(ctx context.Context, o store.LogOptions) (store.Log, error) {
	return f.OpenLog(ctx, store.UserID, o)
}

// TestRecoveryWaitsOutAnUnavailableCluster: a daemon whose cluster does not
// serve the USER log or an agent's log at first (store.ErrUnavailable)
// keeps trying: it neither exits nor lists the agent as corrupt, and once
// the cluster answers everything is recovered. (Found by killing the
// active one of three --cluster-embedded daemons: the standby that claimed
// the USER inbox exited on the first 503 of the leader election.)
func TestRecoveryWaitsOutAnUnavailableCluster(t *testing.T) {
	srv, nc := embeddedNATS(t)
	st := openEmbeddedStore(t, srv, nc, "b1")
	var slept []time.Duration
	var sleptMu sync.Mutex
	mk := func(s store.Store) *Core {
		c, err := NewCore(context.Background(), withDefaults(CoreOptions{FS: faultfs.NewMem(), Home: "/home", Store: s,
			Providers: map[string]provider.Provider{"inproc": inproc.New("inproc", inproc.Options{})}, DefaultProvider: "inproc",
			Logger: hclog.NewNullLogger(), CheckpointEvery: -1,
			Sleep: func(ctx context.Context, d time.Duration) error {
				sleptMu.Lock()
				slept = append(slept, d)
				sleptMu.Unlock()
				return nil
			}}))
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	c1 := mk(st)
	if _, err := c1.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	id, err := c1.CreateAgent(context.Background(), CreateSpec{Name: "a", Provider: "inproc", Model: "echo"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c1.Close(context.Background()); err != nil {
		t.Fatal(err)
	}

	flaky := &flakyStore{Store: st, fails: 3, tries: map[string]int{}}
	c2 := mk(flaky)
	t.Cleanup(func() { _ = c2.Close(context.Background()) })
	rep, err := c2.Recover(context.Background())
	if err != nil {
		t.Fatalf("recovery gave up on a cluster that did not answer at first: %v", err)
	}
	if rep.Agents != 1 || rep.Corrupt != 0 {
		t.Fatalf("recovered %d agents, %d corrupt; want 1 and 0", rep.Agents, rep.Corrupt)
	}
	if got := mustAgent(t, c2, id).Status(c2.bootID, c2.now()); got != "idle" {
		t.Fatalf("agent status %s, want idle", got)
	}
	flaky.mu.Lock()
	userTries, agentTries := flaky.tries[store.UserID], flaky.tries[id]
	flaky.mu.Unlock()
	if userTries != 4 || agentTries != 4 {
		t.Fatalf("opens: USER %d, agent %d; want 4 each (3 refused, then served)", userTries, agentTries)
	}
	sleptMu.Lock()
	defer sleptMu.Unlock()
	if len(slept) < 6 {
		t.Fatalf("recovery waited %d times; want 3 backoffs for the USER log and 3 for the agent's", len(slept))
	}
}
