package engine

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/schema"
)

// The mail tests' helpers: a log buffer, a provider whose stop is held,
// damaged logs, recorded sends.

// logBuffer collects what a core logs (harness.logger), for the core's
// goroutines and the test at once.
type logBuffer struct {
	mu sync.Mutex
	b  strings.Builder
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// logInto makes the harness's core log into buf, from level info up.
func logInto(buf *logBuffer) func(h *harness) {
	return func(h *harness) {
		h.logger = hclog.New(&hclog.LoggerOptions{Output: buf, DisableTime: true, Level: hclog.Info})
	}
}

// mailMsg is a request from sender to recipient, stamped now.
func mailMsg(h *harness, id, sender, recipient, payload string) inbox.Message {
	return h.c.newMessage(id, sender, recipient, inbox.KindRequest, payload)
}

// mustEnqueue enqueues m and fails the test if it is refused.
func mustEnqueue(t *testing.T, h *harness, m inbox.Message) {
	t.Helper()
	if err := h.c.enqueue(m); err != nil {
		t.Fatalf("enqueue %s to %s: %v", m.ID, m.Recipient, err)
	}
}

// logWrites runs f and returns how many writes agent id's log file took
// meanwhile: the records of one write are durable together or not at all.
func logWrites(h *harness, id string, f func()) int {
	before := len(h.fs.Ops())
	f()
	n := 0
	for _, op := range h.fs.Ops()[before:] {
		if op.Kind == faultfs.OpWrite && strings.HasSuffix(op.Path, id+"/events.jsonl") {
			n++
		}
	}
	return n
}

// failNextLogWrite makes the next write of agent id's log file fail with
// ENOSPC: the append is refused and nothing of it is logged. With
// harness.healBackoff -1 the log reopens on the next append.
func failNextLogWrite(h *harness, id string) {
	h.fs.Inject(faultfs.Rule{Kind: faultfs.OpWrite, Path: id + "/events.jsonl", Err: syscall.ENOSPC})
}

// enqueuedIDs lists the ids of the message.enqueued entries of agent id's
// log, in order.
func enqueuedIDs(h *harness, id string) []string {
	var out []string
	for _, e := range h.entries(id) {
		if e.Event == schema.MessageEnqueued {
			out = append(out, dataOf(h.t, e)["message_id"].(string))
		}
	}
	return out
}

// countOf is how many times s occurs in list.
func countOf(list []string, s string) int {
	n := 0
	for _, x := range list {
		if x == s {
			n++
		}
	}
	return n
}

// stopHeld is the inproc provider with sessions whose first Stop waits
// until released. terminate stops the provider session after it logged
// agent.terminated and before the agent leaves the table of agents, so a
// termination held there shows the window in which the engine still finds
// an agent whose log records its termination.
type stopHeld struct {
	*inproc.Provider
	entered chan struct{}
	release chan struct{}
	first   atomic.Bool
	once    sync.Once
}

type stopHeldSession struct {
	provider.Session
	p *stopHeld
}

// withStopHeld registers p as provider "held".
func withStopHeld(p *stopHeld) func(h *harness) {
	return func(h *harness) {
		if h.extra == nil {
			h.extra = map[string]provider.Provider{}
		}
		h.extra["held"] = p
	}
}

func newStopHeld() *stopHeld {
	return &stopHeld{Provider: inproc.New("held", inproc.Options{NativeResume: true}),
		entered: make(chan struct{}), release: make(chan struct{})}
}

func (p *stopHeld) Create(ctx context.Context, spec provider.Spec) (provider.Session, error) {
	s, err := p.Provider.Create(ctx, spec)
	if err != nil {
		return nil, err
	}
	return &stopHeldSession{Session: s, p: p}, nil
}

func (p *stopHeld) Restore(ctx context.Context, spec provider.Spec, blob []byte, handle string) (provider.Session, error) {
	s, err := p.Provider.Restore(ctx, spec, blob, handle)
	if err != nil {
		return nil, err
	}
	return &stopHeldSession{Session: s, p: p}, nil
}

func (s *stopHeldSession) Stop() error {
	if s.p.first.CompareAndSwap(false, true) {
		close(s.p.entered)
		<-s.p.release
	}
	return s.Session.Stop()
}

// let lets the held Stop (and every later one) go.
func (p *stopHeld) let() { p.once.Do(func() { close(p.release) }) }

// createHeld creates an agent on the "held" provider.
func createHeld(h *harness, name, parent string) string {
	h.t.Helper()
	id, err := h.c.CreateAgent(context.Background(), CreateSpec{Name: name, ParentID: parent, Provider: "held", Model: "echo"})
	if err != nil {
		h.t.Fatalf("create %s: %v", name, err)
	}
	return id
}

// terminating terminates agent id (created with createHeld) and returns
// while the termination is held: agent.terminated logged, the agent still
// listed. finish lets the termination end and waits for it.
func terminating(t *testing.T, h *harness, p *stopHeld, id string) (finish func()) {
	t.Helper()
	t.Cleanup(p.let)
	done := make(chan error, 1)
	go func() { done <- h.c.Terminate(context.Background(), id) }()
	select {
	case <-p.entered:
	case err := <-done:
		t.Fatalf("terminate of %s returned (%v) without stopping its provider session", id, err)
	}
	a := mustAgent(t, h.c, id)
	if !a.Terminated() {
		t.Fatalf("agent %s: held termination has not logged agent.terminated", id)
	}
	return func() {
		t.Helper()
		p.let()
		if err := <-done; err != nil {
			t.Fatalf("terminate %s: %v", id, err)
		}
	}
}

// damageLog stops the core, spoils the checksum of the last but one line
// of agent id's log (a valid line follows it: damage, not a torn tail)
// and starts the core again; it returns once the agent is listed with its
// log damaged (found by recovery or by the scrub after it). What the agent
// had before that line stays in its projection.
func damageLog(t *testing.T, h *harness, id string) {
	t.Helper()
	h.stop()
	path := h.c.logPath(id)
	lines := bytes.SplitAfter(h.read(path), []byte("\n")) // the last is empty
	if len(lines) < 4 {
		t.Fatalf("log of %s has %d lines; want one to damage before the last", id, len(lines)-1)
	}
	i := len(lines) - 3
	spoiled := bytes.Replace(lines[i], []byte(`"event":"`), []byte(`"event":"X`), 1)
	if bytes.Equal(spoiled, lines[i]) {
		t.Fatalf("line %d of %s has no event to spoil: %s", i+1, id, lines[i])
	}
	lines[i] = spoiled
	h.rewrite(path, bytes.Join(lines, nil))
	h.start()
	<-h.c.scrubbed
	if mustAgent(t, h.c, id).Corrupt() == nil {
		t.Fatalf("agent %s: its damaged log was not found", id)
	}
}

// recordSent logs in sender's log a tool.call that sent msgs (as
// broadcast logs it) without enqueueing them, as a crash between the
// sender's write and the recipients' leaves it, and returns the sender's
// references to them (what recovery and a re-run hand redeliverRefs).
func recordSent(t *testing.T, h *harness, sender string, msgs ...inbox.Message) []sentRef {
	t.Helper()
	a := mustAgent(t, h.c, sender)
	envs := make([]map[string]any, len(msgs))
	for i, m := range msgs {
		envs[i] = m.EventData()
	}
	e, err := a.Append(schema.ToolCall, schema.ToolCallData{CallID: inbox.NewID(), Tool: "broadcast",
		Args: map[string]any{}, Messages: envs})
	if err != nil {
		t.Fatal(err)
	}
	var refs []sentRef
	for _, s := range a.Sent() {
		if s.Ref.Seq == e.Seq {
			refs = append(refs, s)
		}
	}
	if len(refs) != len(msgs) {
		t.Fatalf("the sender's projection refers to %d of the %d messages its tool.call sent", len(refs), len(msgs))
	}
	return refs
}
