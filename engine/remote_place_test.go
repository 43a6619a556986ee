package engine

import (
	"path/filepath"
	"testing"
)

// TestMustRunHere: sessions with a workspace stay on the daemon's
// machine; others may go to a worker.
func TestMustRunHere(t *testing.T) {
	c := &Core{opts: CoreOptions{Home: "/h"}}
	ws := filepath.Join(c.workspacesDir(), "a1")
	for _, tc := range []struct {
		cwd   string
		local bool
	}{
		{"/src", false},
		{"", false},
		{ws, true},
		{c.workspacesDir() + "-other", false},
	} {
		if got := c.mustRunHere(tc.cwd); (got != "") != tc.local {
			t.Errorf("mustRunHere(%q) = %q, want local %v", tc.cwd, got, tc.local)
		}
	}
}
