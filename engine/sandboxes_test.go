package engine

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestSeedHome: seed_home copies files and directories of the operator's
// home into the private home; a path out of the home is refused, a link
// is not followed, and the copy is bounded.
func TestSeedHome(t *testing.T) {
	from, to := t.TempDir(), t.TempDir()
	outside := filepath.Join(t.TempDir(), "secret")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(from, ".config", "agent"), 0o700))
	must(os.WriteFile(filepath.Join(from, ".config", "agent", "settings.json"), []byte(`{"theme":"dark"}`), 0o600))
	must(os.WriteFile(filepath.Join(from, ".agentrc"), []byte("login"), 0o600))
	must(os.WriteFile(outside, []byte("not yours"), 0o600))
	must(os.Symlink(outside, filepath.Join(from, ".config", "agent", "link")))
	must(os.Symlink(filepath.Dir(outside), filepath.Join(from, "dirlink")))

	must(seedHome(from, to, []string{".config/agent", ".agentrc"}))
	if b, err := os.ReadFile(filepath.Join(to, ".config", "agent", "settings.json")); err != nil || string(b) != `{"theme":"dark"}` {
		t.Errorf("settings.json: %q, %v", b, err)
	}
	if b, err := os.ReadFile(filepath.Join(to, ".agentrc")); err != nil || string(b) != "login" {
		t.Errorf(".agentrc: %q, %v", b, err)
	}
	if _, err := os.Lstat(filepath.Join(to, ".config", "agent", "link")); !os.IsNotExist(err) {
		t.Errorf("a link was copied: %v", err)
	}
	for _, bad := range []string{"../secret", "/etc/passwd", "dirlink/secret"} {
		err := seedHome(from, to, []string{bad})
		if !errors.Is(err, ErrInvalid) {
			t.Errorf("seed_home %q: %v, want refused", bad, err)
		}
	}
	if _, err := os.Stat(filepath.Join(to, "secret")); !os.IsNotExist(err) {
		t.Error("a file outside the home was copied")
	}
	big := make([]byte, seedMax/2+1)
	must(os.WriteFile(filepath.Join(from, "a"), big, 0o600))
	must(os.WriteFile(filepath.Join(from, "b"), big, 0o600))
	if err := seedHome(from, t.TempDir(), []string{"a", "b"}); err == nil || !strings.Contains(err.Error(), "MiB in all") {
		t.Errorf("more than the cap: %v", err)
	}
}

// TestSandboxedCreateNeedsAgentSockets: a core that serves no agent
// sockets (CoreOptions.AgentSocket nil) refuses a sandboxed agent and
// creates nothing.
func TestSandboxedCreateNeedsAgentSockets(t *testing.T) {
	h := newHarness(t)
	_, err := h.c.CreateAgent(t.Context(), CreateSpec{Name: "boxed", Provider: "inproc", Model: "echo", Sandbox: true})
	if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), "agent sockets") {
		t.Fatalf("Create: %v", err)
	}
	if n := len(h.c.agentList()); n != 0 {
		t.Fatalf("%d agents after a refused create", n)
	}
}
