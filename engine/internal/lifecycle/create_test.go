package lifecycle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"

	"github.com/warren-dev/warren/engine/internal/domainerr"
	"github.com/warren-dev/warren/session"
	"github.com/warren-dev/warren/tree"
)

func TestCreateOrdersItsSteps(t *testing.T) {
	f := newFake()
	f.add("p1", "boss", "")
	spec := Spec{Name: "kid", ParentID: "p1", Instructions: "work", Provider: "prov", Model: "m", Cwd: "/w"}
	id, err := f.life().Create(context.Background(), spec)
	if err != nil || id != "fresh" {
		t.Fatalf("Create = %q, %v", id, err)
	}
	sameSteps(t, f.took(),
		"provider prov", "model prov m", "served prov m", "text",
		"reserve fresh kid p1",
		"session fresh prov m",
		"open log fresh", "bind fresh", "append agent.created+session.created", "fresh snapshot",
		"adopt fresh", "keep session", "fresh save")
	if f.reads != 2 {
		t.Errorf("clock read %d times, want 2 (agent.created's time, the snapshot's)", f.reads)
	}
	if f.agents["fresh"] == nil {
		t.Error("the new agent was not adopted")
	}
	s := f.snapshot
	if s == nil || s.ID != "fresh" || s.State != session.StateIdle || s.Handle != "h1" || s.Provider != "prov" ||
		s.Model != "m" || !s.CreatedAt.Equal(t0) || !s.UpdatedAt.Equal(t0) {
		t.Errorf("snapshot = %+v", s)
	}
	if got := f.agents["fresh"].saved; len(got) != 1 || !reflect.DeepEqual(got[0], base()) {
		t.Errorf("Save changed the snapshot: %+v", got)
	}
}

func TestCreatedRecordsAreTheFirstTwoEntries(t *testing.T) {
	recs := CreatedRecords("a1", Spec{Name: "kid", ParentID: "p1", Instructions: "i", Provider: "prov", Model: "m", Cwd: "/w"}, "h1", t0)
	b, err := json.Marshal(recs)
	if err != nil {
		t.Fatal(err)
	}
	want := `[{"Event":"agent.created","Data":{"agent_id":"a1","name":"kid","parent_id":"p1","instructions":"i","provider":"prov","model":"m","metadata":{},"created_at":"2026-03-01T12:00:00Z","cwd":"/w"}},` +
		`{"Event":"session.created","Data":{"provider":"prov","model":"m","handle":"h1"}}]`
	if string(b) != want {
		t.Errorf("records:\n %s\nwant\n %s", b, want)
	}
	// A root has a null parent; given metadata is kept.
	recs = CreatedRecords("a2", Spec{Name: "r", Metadata: map[string]string{"k": "v"}}, "", t0)
	d, _ := json.Marshal(recs[0].Data)
	if want := `{"agent_id":"a2","name":"r","parent_id":null,"instructions":"","provider":"","model":"","metadata":{"k":"v"},"created_at":"2026-03-01T12:00:00Z"}`; string(d) != want {
		t.Errorf("root's agent.created = %s, want %s", d, want)
	}
}

func TestCreateFillsTheDefaultsAndKeepsAGivenID(t *testing.T) {
	f := newFake()
	id, err := f.life().Create(context.Background(), Spec{ID: "given", Name: "r"})
	if err != nil || id != "given" {
		t.Fatalf("Create = %q, %v", id, err)
	}
	steps := f.took()
	sameSteps(t, steps[:5], "provider dp", "model dp dm", "served dp dm", "text", "reserve given r ")
	// A named provider without a model gets no default model.
	_, _ = f.life().Create(context.Background(), Spec{Name: "s", Provider: "other"})
	sameSteps(t, f.took()[:2], "provider other", "model other ")
}

func TestARepeatedCreateDoesNothing(t *testing.T) {
	f := newFake()
	f.reserveErr = fmt.Errorf("adding: %w", tree.ErrExists)
	id, err := f.life().Create(context.Background(), Spec{ID: "a1", Name: "r"})
	if err != nil || id != "a1" {
		t.Fatalf("Create = %q, %v", id, err)
	}
	sameSteps(t, f.took(), "provider dp", "model dp dm", "served dp dm", "text", "reserve a1 r ")
}

func TestCreateRefusals(t *testing.T) {
	for _, tc := range []struct {
		name  string
		setup func(f *fake)
		spec  Spec
		kind  error
		text  string
		steps int // steps taken
	}{
		{"unknown provider", func(f *fake) { f.badProvider = true }, Spec{Name: "r"}, domainerr.Invalid, `unknown provider "dp"`, 1},
		{"no default provider", func(f *fake) { f.noDefault = true }, Spec{Name: "r"}, domainerr.Invalid,
			"no provider named and no default provider configured: name one", 0},
		{"bad name", nil, Spec{Name: "a/b"}, domainerr.Invalid, "", 3},
		{"long instructions", nil, Spec{Name: "r", Instructions: "too long"}, domainerr.Invalid, "instructions are too long", 4},
		{"no parent", nil, Spec{Name: "r", ParentID: "nobody"}, domainerr.NotFound, "parent agent nobody not found", 4},
		{"terminated parent", func(f *fake) { f.add("p1", "p", "").look.Terminated = true },
			Spec{Name: "r", ParentID: "p1"}, domainerr.NotFound, "parent agent p1 not found", 4},
		{"closed", func(f *fake) { f.closed = true }, Spec{Name: "r"}, domainerr.ShuttingDown, "daemon is shutting down", 5},
		{"name taken", func(f *fake) { f.reserveErr = errors.New(`name "r" is taken`) }, Spec{Name: "r"}, domainerr.Invalid, `name "r" is taken`, 5},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			if tc.setup != nil {
				tc.setup(f)
			}
			_, err := f.life().Create(context.Background(), tc.spec)
			if kindOf(err) != tc.kind {
				t.Fatalf("err = %v (kind %v), want kind %v", err, kindOf(err), tc.kind)
			}
			if want := tc.text; want == "" {
				want = tree.ValidateName(tc.spec.Name).Error()
				if err.Error() != want {
					t.Errorf("text %q, want %q", err, want)
				}
			} else if err.Error() != want {
				t.Errorf("text %q, want %q", err, want)
			}
			if steps := f.took(); len(steps) != tc.steps {
				t.Errorf("steps %q, want %d of them (nothing reserved, no session)", steps, tc.steps)
			}
		})
	}
}

func TestAFailedCreateUndoesWhatCameBefore(t *testing.T) {
	checks := []string{"provider dp", "model dp dm", "served dp dm", "text", "reserve fresh r "}
	boom := errors.New("boom")
	for _, tc := range []struct {
		name  string
		setup func(f *fake)
		text  string
		steps []string
	}{
		{"session", func(f *fake) { f.sessionErr = boom }, "boom",
			[]string{"session fresh dp dm", "unreserve fresh"}},
		{"open log", func(f *fake) { f.openErr = boom }, "opening the log of new agent fresh: boom",
			[]string{"session fresh dp dm", "open log fresh", "abandon session", "unreserve fresh"}},
		{"log with entries", func(f *fake) { f.lastSeq = 3 },
			"agent fresh already has a log of 3 entries (on a cluster, another daemon may run it)",
			[]string{"session fresh dp dm", "open log fresh", "abandon session", "close log fresh", "drop lease fresh", "unreserve fresh"}},
		{"append", func(f *fake) { f.appendErr = boom }, "logging the creation of agent fresh: boom",
			[]string{"session fresh dp dm", "open log fresh", "bind fresh", "append agent.created+session.created",
				"abandon session", "close log fresh", "remove dir fresh", "unreserve fresh"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			tc.setup(f)
			_, err := f.life().Create(context.Background(), Spec{Name: "r"})
			if err == nil || err.Error() != tc.text || !errors.Is(err, boom) && tc.name != "log with entries" {
				t.Fatalf("err = %v, want %q wrapping the cause", err, tc.text)
			}
			sameSteps(t, f.took(), append(append([]string(nil), checks...), tc.steps...)...)
			if f.agents["fresh"] != nil {
				t.Error("a failed creation adopted its agent")
			}
		})
	}
}
