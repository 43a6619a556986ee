package engine

import (
	"path/filepath"
	"testing"
)

// TestMustRunHere: sessions with a sandbox, a workspace or an acp agent
// stay on the daemon's machine; others may go to a worker.
func TestMustRunHere(t *testing.T) {
	c := &Core{opts: CoreOptions{Home: "/h"}}
	ws := filepath.Join(c.workspacesDir(), "a1")
	for _, tc := range []struct {
		typ, cwd  string
		sandboxed bool
		local     bool
	}{
		{"scripted", "/src", false, false},
		{"scripted", "/src", true, true},
		{"scripted", ws, false, true},
		{"acp", "", false, true},
		{"openai", c.workspacesDir() + "-other", false, false},
	} {
		if got := c.mustRunHere(tc.typ, tc.cwd, tc.sandboxed); (got != "") != tc.local {
			t.Errorf("mustRunHere(%q, %q, %v) = %q, want local %v", tc.typ, tc.cwd, tc.sandboxed, got, tc.local)
		}
	}
}
