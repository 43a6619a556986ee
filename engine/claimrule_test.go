package engine

import (
	"context"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/store"
)

// TestRunUnderEarlierClaimIsInterrupted: on a cluster store a run is
// interrupted when the agent was claimed again since its turn began, even
// by a daemon with the same boot id (the boot rule alone would call the
// run its own and leave it open forever). The second core here has the
// first's boot id; its claim (a new epoch) is what marks the run, once.
func TestRunUnderEarlierClaimIsInterrupted(t *testing.T) {
	srv, nc := embeddedNATS(t)
	st := openEmbeddedStore(t, srv, nc, "same")
	prov := inproc.New("inproc", inproc.Options{})
	started := make(chan *inproc.Turn, 1)
	prov.Register("hold", inproc.Signal(started, inproc.Block(make(chan struct{}), inproc.Echo)))
	mk := func(s store.Store) *Core {
		c, err := NewCore(context.Background(), withDefaults(CoreOptions{FS: faultfs.NewMem(), Home: "/home", Store: s, BootID: "same",
			Providers: map[string]provider.Provider{"inproc": prov}, DefaultProvider: "inproc",
			Logger: hclog.NewNullLogger(), CheckpointEvery: -1}))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Recover(context.Background()); err != nil {
			t.Fatal(err)
		}
		return c
	}
	z := &zombieStore{Store: st}
	c1 := mk(z)
	id, err := c1.CreateAgent(context.Background(), CreateSpec{Name: "a", Provider: "inproc", Model: "hold"})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _, _ = c1.Send(context.Background(), id, "go", "", "", nil) }()
	<-started
	// The daemon dies mid-turn (nothing more reaches the store) and its
	// claims are given up, as a lapse would.
	z.Kill()
	c1.Abandon()
	c1.claims.ReleaseAll(context.Background())

	c2 := mk(st)
	t.Cleanup(func() { _ = c2.Close(context.Background()) })
	es := events(t, st, id)
	if n := countEvent(es, schema.RunInterrupted); n != 1 {
		t.Fatalf("%d run.interrupted after a new claim by a daemon of the same boot id; want 1:%s", n, eventNames(es))
	}
	if got := mustAgent(t, c2, id).Status(c2.bootID, c2.now()); got != "interrupted_startup" {
		t.Fatalf("status %s, want interrupted_startup", got)
	}
	// A restart of the same claim adds no second mark.
	if _, err := c2.Takeover(context.Background()); err != nil {
		t.Fatal(err)
	}
	if n := countEvent(events(t, st, id), schema.RunInterrupted); n != 1 {
		t.Fatalf("%d run.interrupted after a second look; want 1", n)
	}
}

func mustAgent(t *testing.T, c *Core, id string) *agent {
	t.Helper()
	a, ok := c.agent(id)
	if !ok {
		t.Fatalf("agent %s not loaded", id)
	}
	return a
}
