package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/session"
	"github.com/warren-dev/warren/tree"
)

// The tests of the former engine/internal/lifecycle for create.go
// (CreateAgent, checkCreate, reserveCreate, logCreation, createdRecords),
// through a real Core.

// agentDirs lists the agents' directories in the home.
func agentDirs(t *testing.T, h *harness) []string {
	t.Helper()
	ents, err := h.fs.ReadDir("/home/agents")
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// opIndex is the index of the first op in ops of the kind whose path (or
// a rename's target) ends in suffix; -1 if none.
func opIndex(ops []faultfs.Op, kind faultfs.OpKind, suffix string) int {
	for i, op := range ops {
		if op.Kind == kind && (strings.HasSuffix(op.Path, suffix) || op.To != "" && strings.HasSuffix(op.To, suffix)) {
			return i
		}
	}
	return -1
}

// Create checks the spec, reserves the name, opens the provider session,
// logs agent.created and session.created in one write (the session's
// handle in it), gives the agent its snapshot, adopts it, keeps the
// session and saves session.json behind the log. (The clock's reads
// cannot be counted through the engine: agent.created's time and the
// snapshot's are the fake clock's now.)
func TestCreateOrdersItsSteps(t *testing.T) {
	lp, lw := &lifeProv{}, &groupWrites{}
	h := newHarness(t, withFakeClock, withLifeProv(lp), recordWrites(lw), func(h *harness) { h.saveDelay = -1 })
	var turnHandle string
	h.prov.Register("m", func(_ context.Context, tr *inproc.Turn) (string, error) {
		turnHandle = tr.Handle
		return "ok", nil
	})
	boss := h.create("boss", "", "echo")
	h.c.snaps.Wait()
	ops := len(h.fs.Ops())
	id, err := h.c.CreateAgent(context.Background(), CreateSpec{Name: "kid", ParentID: boss, Instructions: "work",
		Provider: "inproc", Model: "m", Cwd: "/w"})
	if err != nil || !session.ValidID(id) {
		t.Fatalf("CreateAgent = %q, %v; want a fresh id", id, err)
	}
	if ws := lw.of(id); len(ws) != 1 || ws[0] != "agent.created+session.created" {
		t.Fatalf("writes of the new log %q, want agent.created+session.created in one write", ws)
	}
	lp.mu.Lock()
	handle := lp.created[len(lp.created)-1]
	lp.mu.Unlock()
	if sc := dataAs[schema.SessionCreatedData](t, lastEntry(t, h, id, schema.SessionCreated)); sc != (schema.SessionCreatedData{Provider: "inproc", Model: "m", Handle: handle}) {
		t.Fatalf("session.created %+v, want the new session's handle %s", sc, handle)
	}
	ac := dataAs[schema.AgentCreatedData](t, lastEntry(t, h, id, schema.AgentCreated))
	if ac.CreatedAt != clockStart.Format(time.RFC3339Nano) || ac.ParentID == nil || *ac.ParentID != boss {
		t.Fatalf("agent.created %+v", ac)
	}
	if _, ok := h.c.agent(id); !ok || !slices.Contains(h.c.tree.Children(boss), id) || h.c.tree.Path(id) != "boss/kid" {
		t.Fatalf("the new agent was not adopted: listed %v, children of boss %v", ok, h.c.tree.Children(boss))
	}
	s := savedSession(t, h, id)
	if s.ID != id || s.State != session.StateIdle || s.Handle != handle || s.Provider != "inproc" || s.Model != "m" ||
		!s.CreatedAt.Equal(clockStart) || !s.UpdatedAt.Equal(clockStart) || s.Run != nil || len(s.ProviderState) != 0 {
		t.Fatalf("session.json = %+v", s)
	}
	// The log before the snapshot.
	after := h.fs.Ops()[ops:]
	logged, saved := opIndex(after, faultfs.OpWrite, id+"/events.jsonl"), opIndex(after, faultfs.OpRename, id+"/"+session.FileName)
	if logged < 0 || saved < 0 || saved < logged {
		t.Fatalf("the creation's log write at op %d, session.json's rename at %d: want the log first", logged, saved)
	}
	// The session was kept: not stopped, and the agent's first turn runs
	// on it.
	if lp.wasStopped(handle) {
		t.Fatal("the new agent's session was stopped")
	}
	if res := h.send(id, "hi"); res.Response != "ok" || turnHandle != handle {
		t.Fatalf("first turn %+v on session %q, want the created session %q", res, turnHandle, handle)
	}
}

// createdRecords are the log's first two entries: agent.created (a root
// has a null parent, given metadata is kept, none is {}) and
// session.created with the handle; CreateAgent writes exactly them.
func TestCreatedRecordsAreTheFirstTwoEntries(t *testing.T) {
	t0 := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	recs := createdRecords("a1", CreateSpec{Name: "kid", ParentID: "p1", Instructions: "i", Provider: "prov", Model: "m", Cwd: "/w"}, "h1", t0, nil)
	b, err := json.Marshal(recs)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"Event":"agent.created","Data":{"agent_id":"a1","name":"kid","parent_id":"p1","instructions":"i","provider":"prov","model":"m","metadata":{},"created_at":"2026-03-01T12:00:00Z","cwd":"/w"}},` +
		`{"Event":"session.created","Data":{"provider":"prov","model":"m","handle":"h1"}}]`
	if string(b) != want {
		t.Errorf("records:\n %s\nwant\n %s", b, want)
	}
	recs = createdRecords("a2", CreateSpec{Name: "r", Metadata: map[string]string{"k": "v"}}, "", t0, nil)
	d, _ := json.Marshal(recs[0].Data)
	if want := `{"agent_id":"a2","name":"r","parent_id":null,"instructions":"","provider":"","model":"","metadata":{"k":"v"},"created_at":"2026-03-01T12:00:00Z"}`; string(d) != want {
		t.Errorf("root's agent.created = %s, want %s", d, want)
	}

	// What CreateAgent logs is these records.
	lp := &lifeProv{}
	h := newHarness(t, withFakeClock, withLifeProv(lp))
	spec := CreateSpec{ID: newID(), Name: "r", Instructions: "i", Provider: "inproc", Model: "echo", Metadata: map[string]string{"k": "v"}, Cwd: "/w"}
	if _, err := h.c.CreateAgent(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	es := h.entries(spec.ID)
	lp.mu.Lock()
	handle := lp.created[0]
	lp.mu.Unlock()
	wantRecs := createdRecords(spec.ID, spec, handle, clockStart, nil)
	if len(es) != 2 {
		t.Fatalf("the new log holds %s", eventNames(es))
	}
	for i, r := range wantRecs {
		wd, _ := json.Marshal(r.Data)
		if es[i].Event != r.Event || string(es[i].Data) != string(wd) {
			t.Fatalf("entry %d = %s %s, want %s %s", i, es[i].Event, es[i].Data, r.Event, wd)
		}
	}
}

// Without a provider the default provider and its default model are
// used; a given id is kept; a named provider without a model gets no
// default model.
func TestCreateFillsTheDefaultsAndKeepsAGivenID(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		h.extra = map[string]provider.Provider{"other": inproc.New("other", inproc.Options{})}
	})
	given := newID()
	id, err := h.c.CreateAgent(context.Background(), CreateSpec{ID: given, Name: "r"})
	if err != nil || id != given {
		t.Fatalf("CreateAgent = %q, %v; want the given id %s", id, err, given)
	}
	if ac := dataAs[schema.AgentCreatedData](t, lastEntry(t, h, id, schema.AgentCreated)); ac.Provider != "inproc" || ac.Model != "echo" {
		t.Fatalf("agent.created %+v, want the default provider and model", ac)
	}
	other, err := h.c.CreateAgent(context.Background(), CreateSpec{Name: "s", Provider: "other"})
	if err != nil {
		t.Fatal(err)
	}
	if ac := dataAs[schema.AgentCreatedData](t, lastEntry(t, h, other, schema.AgentCreated)); ac.Provider != "other" || ac.Model != "" {
		t.Fatalf("agent.created %+v, want provider other and no model", ac)
	}
}

// A create of an id that exists already does nothing (no file, no
// session) and returns the id.
func TestARepeatedCreateDoesNothing(t *testing.T) {
	lp := &lifeProv{}
	h := newHarness(t, withLifeProv(lp), func(h *harness) { h.saveDelay = -1 })
	spec := CreateSpec{ID: newID(), Name: "r"}
	if _, err := h.c.CreateAgent(context.Background(), spec); err != nil {
		t.Fatal(err)
	}
	h.c.snaps.Wait()
	ops := len(h.fs.Ops())
	created, _ := lp.counts()
	id, err := h.c.CreateAgent(context.Background(), spec)
	if err != nil || id != spec.ID {
		t.Fatalf("CreateAgent = %q, %v", id, err)
	}
	h.c.snaps.Wait()
	if n := len(effects(h, ops)); n != 0 {
		t.Fatalf("a repeated create made %d filesystem changes: %v", n, effects(h, ops))
	}
	if n, _ := lp.counts(); n != created {
		t.Fatalf("a repeated create opened %d provider sessions", n-created)
	}
	if es := h.entries(id); len(es) != 2 {
		t.Fatalf("log %s", eventNames(es))
	}
}

// Each refusal is the domain error of its kind with its text, and
// nothing is reserved and no session opened. The checks come in order
// (the provider, its model, the name, the texts, the parent, then the
// reservation): each case also breaks what a later check looks at, and
// the earlier refusal is the one returned.
func TestCreateRefusals(t *testing.T) {
	long := strings.Repeat("i", 101)
	for _, tc := range []struct {
		name  string
		setup func(h *harness) CreateSpec
		kind  error
		text  string
	}{
		{"unknown provider", func(h *harness) CreateSpec { return CreateSpec{Name: "a/b", Provider: "nope"} },
			ErrInvalid, ""},
		{"model not served", func(h *harness) CreateSpec { return CreateSpec{Name: "a/b", Model: "no-such-program"} },
			ErrInvalid, ""},
		{"bad name", func(h *harness) CreateSpec { return CreateSpec{Name: "a/b", Instructions: long} },
			ErrInvalid, tree.ValidateName("a/b").Error()},
		{"long instructions", func(h *harness) CreateSpec { return CreateSpec{Name: "r", Instructions: long, ParentID: "nobody"} },
			ErrInvalid, fmt.Sprintf("instructions are %d bytes, over the 100-byte limit (limits.message_bytes); shorten them", len(long))},
		{"no parent", func(h *harness) CreateSpec {
			h.stop() // closed: the parent is checked before the reservation
			return CreateSpec{Name: "r", ParentID: "nobody"}
		}, ErrNotFound, "parent agent nobody not found"},
		{"terminated parent", func(h *harness) CreateSpec {
			p := h.create("p", "", "echo")
			if err := h.c.Terminate(context.Background(), p); err != nil {
				h.t.Fatal(err)
			}
			return CreateSpec{Name: "r", ParentID: p}
		}, ErrNotFound, ""},
		{"closed", func(h *harness) CreateSpec { h.stop(); return CreateSpec{Name: "r"} }, ErrShuttingDown, "daemon is shutting down"},
		{"name taken", func(h *harness) CreateSpec { h.create("r", "", "echo"); return CreateSpec{Name: "r"} }, ErrInvalid, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lp := &lifeProv{}
			h := newHarness(t, withLifeProv(lp), func(h *harness) {
				h.cfg.Limits.MessageBytes = 100
				h.saveDelay = -1
			})
			spec := tc.setup(h)
			h.c.snaps.Wait()
			dirs, listed := agentDirs(t, h), len(h.c.List())
			created, _ := lp.counts()
			_, err := h.c.CreateAgent(context.Background(), spec)
			if !errors.Is(err, tc.kind) {
				t.Fatalf("err = %v, want kind %v", err, tc.kind)
			}
			switch tc.name {
			case "unknown provider":
				if want := fmt.Sprintf("unknown provider %q (known: %s)", "nope", strings.Join(h.c.providers.Names(), ", ")); err.Error() != want {
					t.Fatalf("text %q, want %q", err, want)
				}
			case "model not served":
				if !strings.Contains(err.Error(), `does not serve model "no-such-program"`) {
					t.Fatalf("text %q", err)
				}
			case "terminated parent":
				if err.Error() != "parent agent "+spec.ParentID+" not found" {
					t.Fatalf("text %q", err)
				}
			case "name taken":
				if !errors.Is(err, tree.ErrNameTaken) {
					t.Fatalf("text %q, want the tree's name taken", err)
				}
			default:
				if err.Error() != tc.text {
					t.Fatalf("text %q, want %q", err, tc.text)
				}
			}
			if n, _ := lp.counts(); n != created {
				t.Fatalf("a refused create opened %d provider sessions", n-created)
			}
			if got := agentDirs(t, h); fmt.Sprint(got) != fmt.Sprint(dirs) || len(h.c.List()) != listed {
				t.Fatalf("a refused create left agents %v (was %v)", got, dirs)
			}
			if tc.name == "name taken" || tc.name == "closed" || tc.name == "no parent" {
				return
			}
			// Nothing was reserved: the name is free.
			spec.Name, spec.ParentID, spec.Provider, spec.Model, spec.Instructions = "r", "", "", "", ""
			if _, err := h.c.CreateAgent(context.Background(), spec); err != nil {
				t.Fatalf("the name is not free after a refused create: %v", err)
			}
		})
	}
	// No provider named and no default configured.
	o := withDefaults(CoreOptions{FS: faultfs.NewMem(), Home: "/home", Logger: hclog.NewNullLogger(),
		Providers: map[string]provider.Provider{"inproc": inproc.New("inproc", inproc.Options{})}})
	o.DefaultProvider = ""
	c, err := NewCore(context.Background(), o)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Recover(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close(context.Background()) }()
	_, err = c.CreateAgent(context.Background(), CreateSpec{Name: "a/b"})
	if !errors.Is(err, ErrInvalid) || err.Error() != "no provider named and no default provider configured: name one" {
		t.Fatalf("create without any provider: %v", err)
	}
	if len(c.List()) != 0 {
		t.Fatal("an agent was created")
	}
}

// A failure after the reservation undoes what came before it: the
// provider session is abandoned (stopped), the lease on the id dropped, a
// log found with entries left as it is, a directory the failed write left
// removed, the name freed; nothing is adopted.
func TestAFailedCreateUndoesWhatCameBefore(t *testing.T) {
	boom := errors.New("boom")
	for _, tc := range []struct {
		name    string
		setup   func(h *harness, lp *lifeProv, id string)
		text    string
		cause   error
		session bool // a provider session was opened (and must be stopped)
	}{
		{"session", func(h *harness, lp *lifeProv, id string) { lp.failCreate(boom) },
			"creating the inproc session: ", boom, false},
		{"open log", func(h *harness, lp *lifeProv, id string) {
			h.fs.Inject(faultfs.Rule{Kind: faultfs.OpCreate, Path: id + "/events.jsonl", Err: syscall.EIO})
		}, "opening the log of new agent %s: ", syscall.EIO, true},
		{"log with entries", func(h *harness, lp *lifeProv, id string) {
			lg, err := eventlog.Open(h.fs, "/home/agents/"+id+"/events.jsonl", eventlog.Options{})
			if err != nil {
				h.t.Fatal(err)
			}
			for i := 0; i < 3; i++ {
				if _, err := lg.Append("note", map[string]int{"n": i}); err != nil {
					h.t.Fatal(err)
				}
			}
			if err := lg.Close(); err != nil {
				h.t.Fatal(err)
			}
		}, "agent %s already has a log of 3 entries (on a cluster, another daemon may run it)", nil, true},
		{"append", func(h *harness, lp *lifeProv, id string) {
			h.fs.Inject(faultfs.Rule{Kind: faultfs.OpWrite, Path: id + "/events.jsonl", Err: syscall.ENOSPC})
		}, "logging the creation of agent %s: ", syscall.ENOSPC, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			lp := &lifeProv{}
			h := newHarness(t, withLifeProv(lp))
			id := newID()
			tc.setup(h, lp, id)
			logPath := "/home/agents/" + id + "/events.jsonl"
			var before []byte
			if ok, _ := faultfs.Exists(h.fs, logPath); ok {
				before = h.read(logPath)
			}
			created, _ := lp.counts()
			_, err := h.c.CreateAgent(context.Background(), CreateSpec{ID: id, Name: "r"})
			text := tc.text
			if strings.Contains(text, "%s") {
				text = fmt.Sprintf(text, id)
			}
			if err == nil || !strings.HasPrefix(err.Error(), text) || tc.cause != nil && !errors.Is(err, tc.cause) {
				t.Fatalf("err = %v, want %q wrapping %v", err, text, tc.cause)
			}
			if tc.cause == nil && err.Error() != text {
				t.Fatalf("err = %q, want %q", err, text)
			}
			n, _ := lp.counts()
			if tc.session {
				lp.mu.Lock()
				handle := lp.created[len(lp.created)-1]
				lp.mu.Unlock()
				if n != created+1 || !lp.wasStopped(handle) {
					t.Fatalf("the provider session (%d opened) was not abandoned", n-created)
				}
			} else if n != created {
				t.Fatalf("%d sessions opened", n-created)
			}
			if _, ok := h.c.agent(id); ok {
				t.Fatal("a failed creation adopted its agent")
			}
			if h.c.claims.Holds(id) {
				t.Fatal("the failed creation still holds the agent's lease")
			}
			switch tc.name {
			case "log with entries":
				if got := h.read(logPath); string(got) != string(before) {
					t.Fatal("the log that was there was changed")
				}
			case "append":
				if ok, _ := faultfs.Exists(h.fs, "/home/agents/"+id); ok {
					t.Fatal("the directory the failed write left is still there")
				}
			}
			// The name is free again.
			lp.failCreate(nil)
			h.fs.ClearRules()
			if _, err := h.c.CreateAgent(context.Background(), CreateSpec{Name: "r"}); err != nil {
				t.Fatalf("the name is not free after the failed create: %v", err)
			}
		})
	}
}
