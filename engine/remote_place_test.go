package engine

import (
	"path/filepath"
	"testing"
)

// TestMustRunHere: sessions with a workspace or an acp agent stay on the
// daemon's machine; others (sandboxed or not) may go to a worker.
func TestMustRunHere(t *testing.T) {
	c := &Core{opts: CoreOptions{Home: "/h"}}
	ws := filepath.Join(c.workspacesDir(), "a1")
	for _, tc := range []struct {
		typ, cwd string
		local    bool
	}{
		{"scripted", "/src", false},
		{"scripted", ws, true},
		{"acp", "", true},
		{"openai", c.workspacesDir() + "-other", false},
	} {
		if got := c.mustRunHere(tc.typ, tc.cwd); (got != "") != tc.local {
			t.Errorf("mustRunHere(%q, %q) = %q, want local %v", tc.typ, tc.cwd, got, tc.local)
		}
	}
}
