package engine

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warren-dev/warren/protocol"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/scripted"
)

// A model the provider can know is invalid at create time (an unknown
// inproc program, a missing script) is refused at create, code 2 naming the
// model, and by spawn_agent as a tool error (SPEC 7; issue 14).
func TestCreateRefusesAModelTheProviderDoesNotServe(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		h.noWake = true
		h.extra = map[string]provider.Provider{"scripted": scripted.New(scripted.Options{})}
	})
	missing := filepath.Join(t.TempDir(), "nobot.py")
	cases := []struct{ prov, model string }{
		{"inproc", "no-such-program"},
		{"scripted", missing},
	}
	for _, tc := range cases {
		_, err := h.c.CreateAgent(context.Background(), CreateSpec{Name: "x", Provider: tc.prov, Model: tc.model})
		if codeOf(err) != protocol.CodeInvalid || !strings.Contains(err.Error(), tc.model) {
			t.Errorf("create %s/%s: err = %v (code %d), want code 2 naming the model", tc.prov, tc.model, err, codeOf(err))
		}
	}
	if n := len(h.c.List()); n != 0 {
		t.Fatalf("%d agents exist after refused creates, want 0", n)
	}
	root := h.create("root", "", "echo")
	for _, tc := range cases {
		r := h.tool(root, "spawn_agent", map[string]any{"name": "kid", "instructions": "x", "provider": tc.prov, "model": tc.model})
		msg, _ := r["error"].(string)
		if !strings.Contains(msg, tc.model) {
			t.Errorf("spawn_agent %s/%s: result %v, want an error naming the model", tc.prov, tc.model, r)
		}
	}
	if n := len(h.c.List()); n != 1 {
		t.Fatalf("%d agents exist after refused spawns, want only the root", n)
	}
}
