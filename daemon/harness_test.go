package daemon

import (
	"context"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/config"
	"github.com/warren-dev/warren/engine"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/inproc"
)

// harness runs an engine.Core on an in-memory filesystem with the inproc
// provider, for the tests of the RPC edge (the engine's own tests have a
// harness that also crashes and restarts it).
type harness struct {
	t      *testing.T
	fs     *faultfs.Mem
	prov   *inproc.Provider
	c      *engine.Core
	cfg    config.Config
	noWake bool
}

func newHarness(t *testing.T, setup ...func(h *harness)) *harness {
	t.Helper()
	h := &harness{t: t, fs: faultfs.NewMem(), prov: inproc.New("inproc", inproc.Options{NativeResume: true}), cfg: config.Default()}
	h.cfg.RetryBaseDelay = time.Millisecond
	for _, f := range setup {
		f(h)
	}
	c, err := engine.NewCore(context.Background(), engine.CoreOptions{
		FS: h.fs, Home: "/home", Providers: map[string]provider.Provider{"inproc": h.prov},
		DefaultProvider: "inproc", DefaultModel: "echo", Config: h.cfg, NoWake: h.noWake,
		Logger: hclog.NewNullLogger(),
		// The daemon's settings (config/engine.go), as boot passes them.
		CheckpointEvery: config.DefaultCheckpointEvery, SessionSaveDelay: config.DefaultSessionSaveDelay,
		MaxOpenLogs: config.DefaultMaxOpenLogs,
		Sleep:       func(context.Context, time.Duration) error { return nil },
		Jitter:      func() float64 { return 0.5 },
	})
	if err != nil {
		t.Fatalf("NewCore: %v", err)
	}
	if _, err := c.Recover(context.Background()); err != nil {
		t.Fatalf("Recover: %v", err)
	}
	h.c = c
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = h.c.Close(ctx)
	})
	return h
}

func (h *harness) create(name, parent, model string) string {
	h.t.Helper()
	id, err := h.c.CreateAgent(context.Background(), engine.CreateSpec{Name: name, ParentID: parent, Provider: "inproc", Model: model})
	if err != nil {
		h.t.Fatalf("create %s: %v", name, err)
	}
	return id
}

func (h *harness) send(id, msg string) engine.TurnResult {
	h.t.Helper()
	res, err := h.c.Send(context.Background(), id, msg, "", "", nil)
	if err != nil {
		h.t.Fatalf("send to %s: %v", id, err)
	}
	return res
}

func (h *harness) tool(id, name string, args map[string]any) map[string]any {
	h.t.Helper()
	r, err := h.c.CallTool(context.Background(), id, name, args)
	if err != nil {
		h.t.Fatalf("%s: %v", name, err)
	}
	return r
}

func (h *harness) entries(id string) []eventlog.Entry {
	h.t.Helper()
	es, err := eventlog.ReadAll(h.fs, "/home/agents/"+id+"/events.jsonl")
	if err != nil {
		h.t.Fatalf("reading log of %s: %v", id, err)
	}
	return es
}

// codeOf is the wire code the RPC edge gives err (0 for nil).
func codeOf(err error) int {
	if err == nil {
		return 0
	}
	return toRPCError(err).Code
}

// inspectMap is agent.inspect's reply for an agent, as the edge builds it.
func inspectMap(c *engine.Core, id string) (map[string]any, error) {
	d, err := c.Inspect(context.Background(), id)
	if err != nil {
		return nil, err
	}
	return detailMap(d), nil
}
