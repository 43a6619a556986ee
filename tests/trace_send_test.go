package tests

import (
	"context"
	"errors"
	"fmt"
	"github.com/warren-dev/warren/homedir"
	"github.com/warren-dev/warren/registry"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/config"
	"github.com/warren-dev/warren/daemon"
	"github.com/warren-dev/warren/engine"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/protocol"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/session"
)

// traceSendsEnv sets how many sends TestTraceSendCrossesPackages makes
// (default 1). scripts/enginemetrics runs the test with 1 and with 2
// under coverage: the blocks whose counts differ are the code that one
// more send runs. traceSettleEnv (a duration, default none) is how long
// the test waits after each send's last turn, so that the writes a send
// leaves to timers (session.json, checkpoint.json, the pending file's
// retirement, about a second later) belong to that send.
const (
	traceSendsEnv  = "WARREN_TRACE_SENDS"
	traceSettleEnv = "WARREN_TRACE_SETTLE"
)

// TestTraceSendCrossesPackages makes WARREN_TRACE_SENDS agent.sends to a
// sender agent whose turn makes exactly one send_message tool call to its
// child, the recipient, and checks that every send succeeded and that
// the recipient was shown every message, in a wake turn of its own. The
// socket subtest goes through an in-process daemon, the core subtest
// calls the engine's Core directly.
//
// The test is written so that a run with N+1 sends executes the code of
// a run with N plus that of one send (scripts/enginemetrics relies on
// it; what timing still varies is in packages a send crosses anyway):
// the daemon reports readiness through Options.Ready instead of being
// polled, nothing polls for idleness, and each send waits for the
// recipient's turn.complete before the next, so that no two wake turns
// fold into one.
func TestTraceSendCrossesPackages(t *testing.T) {
	tr := traceRun{n: 1}
	if s := os.Getenv(traceSendsEnv); s != "" {
		var err error
		if tr.n, err = strconv.Atoi(s); err != nil || tr.n < 1 {
			t.Fatalf("%s=%q: want a positive number", traceSendsEnv, s)
		}
	}
	if s := os.Getenv(traceSettleEnv); s != "" {
		var err error
		if tr.settle, err = time.ParseDuration(s); err != nil {
			t.Fatalf("%s=%q: %v", traceSettleEnv, s, err)
		}
	}
	t.Run("socket", func(t *testing.T) { tr.socket(t) })
	t.Run("core", func(t *testing.T) { tr.core(t) })
}

// traceRun is how many sends to make and how long to wait after each.
type traceRun struct {
	n      int
	settle time.Duration
}

// traceText is the i-th message.
func traceText(i int) string { return fmt.Sprintf("trace-message-%d", i) }

// traceProvider is an inproc provider with two programs: "trace-sender"
// makes one send_message tool call per turn, passing its prompt to the
// agent named "recipient"; "trace-recipient" hands each prompt it is
// shown to shown.
func traceProvider(shown chan<- string) *inproc.Provider {
	p := inproc.New("inproc", inproc.Options{})
	p.Register("trace-sender", func(_ context.Context, turn *inproc.Turn) (string, error) {
		r, err := turn.Call("send_message", map[string]any{"recipient": "recipient", "text": turn.Prompt})
		if err != nil {
			return "", err
		}
		if e, ok := r["error"]; ok {
			return "", fmt.Errorf("send_message: %v", e)
		}
		return "sent " + turn.Prompt, nil
	})
	p.Register("trace-recipient", func(ctx context.Context, turn *inproc.Turn) (string, error) {
		select {
		case shown <- turn.Prompt:
		case <-ctx.Done():
			return "", ctx.Err()
		}
		return "ok", nil
	})
	return p
}

// received waits for the recipient's wake turn to show message i and for
// that turn's turn.complete (an event name on completed), then settles.
func (tr traceRun) received(t *testing.T, i int, shown <-chan string, completed <-chan string) {
	t.Helper()
	timeout := time.After(time.Minute)
	select {
	case prompt := <-shown:
		if !strings.Contains(prompt, traceText(i)) {
			t.Fatalf("the recipient's turn after send %d was shown %q", i, prompt)
		}
	case <-timeout:
		t.Fatalf("the recipient was not shown message %d", i)
	}
	select {
	case <-completed:
	case <-timeout:
		t.Fatalf("the recipient's turn after send %d did not complete", i)
	}
	time.Sleep(tr.settle) // timers: nothing to wait on from outside the engine
}

// socket runs the sends through an in-process daemon's socket.
func (tr traceRun) socket(t *testing.T) {
	shown := make(chan string, 1)
	prov := traceProvider(shown)
	dir, err := os.MkdirTemp("", "w") // short: the socket path is limited to 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	home := filepath.Join(dir, "h")
	ctx, stop := context.WithCancel(procCtx(t))
	defer stop()
	ready, exited := make(chan struct{}), make(chan error, 1)
	go func() {
		exited <- daemon.Run(ctx, daemon.Options{Home: home, Logger: hclog.NewNullLogger(), Version: "test",
			Providers: func(registry.Env) (map[string]provider.Provider, error) {
				return map[string]provider.Provider{"inproc": prov}, nil
			},
			Ready: func(string) { close(ready) }})
	}()
	select {
	case <-ready:
	case err := <-exited:
		t.Fatalf("the daemon exited before serving: %v", err)
	}
	cl, err := protocol.Dial(ctx, homedir.SocketPath(home))
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	call := func(method string, params map[string]any) map[string]any {
		t.Helper()
		res, err := cl.Call(ctx, method, params)
		if err != nil {
			t.Fatalf("%s %v: %v", method, params, err)
		}
		return res
	}
	create := func(name, model, parent string) string {
		t.Helper()
		id, _ := call("agent.create", map[string]any{"name": name, "instructions": name, "provider": "inproc",
			"model": model, "parent": parent})["agent_id"].(string)
		return id
	}
	sender := create("sender", "trace-sender", "")
	recipient := create("recipient", "trace-recipient", sender)

	// The recipient's turn.complete events, from a subscription in place
	// before the first send.
	events, err := protocol.Dial(ctx, homedir.SocketPath(home))
	if err != nil {
		t.Fatal(err)
	}
	defer events.Close()
	subscribed, completed, streamErr := make(chan struct{}), make(chan string, tr.n), make(chan error, 1)
	go func() {
		streamErr <- events.Stream(ctx, "events.subscribe", map[string]any{"agent_id": recipient, "ready": true},
			func(f protocol.Frame) error {
				switch f.Event["event"] {
				case "subscribed":
					close(subscribed)
				case schema.TurnComplete:
					completed <- schema.TurnComplete
				}
				return nil
			})
	}()
	select {
	case <-subscribed:
	case err := <-streamErr:
		t.Fatalf("events.subscribe: %v", err)
	}

	for i := range tr.n {
		res := call("agent.send", map[string]any{"agent_id": sender, "message": traceText(i)})
		if res["status"] != string(session.StatusIdle) || res["response"] != "sent "+traceText(i) {
			t.Fatalf("agent.send %d = %v", i, res)
		}
		tr.received(t, i, shown, completed)
	}
	stop()
	if err := <-exited; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("daemon: %v", err)
	}
}

// core runs the sends through the engine's Core.
func (tr traceRun) core(t *testing.T) {
	shown := make(chan string, 1)
	prov := traceProvider(shown)
	c, err := engine.NewCore(context.Background(), engine.CoreOptions{FS: faultfs.OS{}, Home: t.TempDir(), Config: config.Default(),
		Providers: map[string]provider.Provider{"inproc": prov}, Logger: hclog.NewNullLogger(),
		// The daemon's settings (config/engine.go), as its boot passes them.
		CheckpointEvery: config.DefaultCheckpointEvery, SessionSaveDelay: config.DefaultSessionSaveDelay,
		MaxOpenLogs: config.DefaultMaxOpenLogs})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	ctx := procCtx(t)
	sender, err := c.CreateAgent(ctx, engine.CreateSpec{Name: "sender", Instructions: "sender", Provider: "inproc",
		Model: "trace-sender"})
	if err != nil {
		t.Fatal(err)
	}
	recipient, err := c.CreateAgent(ctx, engine.CreateSpec{Name: "recipient", Instructions: "recipient", ParentID: sender,
		Provider: "inproc", Model: "trace-recipient"})
	if err != nil {
		t.Fatal(err)
	}
	evs, cancel := c.Subscribe(recipient)
	defer cancel()
	completed := make(chan string, tr.n)
	go func() {
		for ev := range evs {
			if ev.Entry.Event == schema.TurnComplete {
				completed <- ev.Entry.Event
			}
		}
	}()
	for i := range tr.n {
		res, err := c.Send(ctx, sender, traceText(i), "", "", nil)
		if err != nil || res.Err != nil || res.Status != session.StatusIdle || res.Response != "sent "+traceText(i) {
			t.Fatalf("Send %d = %+v, %v", i, res, err)
		}
		tr.received(t, i, shown, completed)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
}
