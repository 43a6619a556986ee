package tests

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestCLIDaemonStartReportsAnInvalidConfig: with an invalid config.json,
// warren daemon start says so on stderr (the daemon starts on the
// defaults) and warren daemon status shows the error.
func TestCLIDaemonStartReportsAnInvalidConfig(t *testing.T) {
	t.Parallel()
	dir, err := os.MkdirTemp("", "w")
	if err != nil {
		t.Fatal(err)
	}
	home := filepath.Join(dir, "h")
	t.Cleanup(func() {
		if b, err := os.ReadFile(filepath.Join(home, "daemon.pid")); err == nil {
			if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
		_ = os.RemoveAll(dir)
	})
	if err := os.MkdirAll(home, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "config.json"), []byte(`{"max_retries": "many"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, home, "daemon", "start").want(t, 0, "daemon start with an invalid config.json")
	if !strings.Contains(r.stderr, "config.json is invalid") || !strings.Contains(r.stderr, "max_retries") {
		t.Fatalf("daemon start stderr = %q; want the config error", r.stderr)
	}
	out := runCLI(t, home, "daemon", "status").want(t, 0, "daemon status").stdout
	if !strings.Contains(out, "config    INVALID: ") || !strings.Contains(out, "max_retries") {
		t.Fatalf("daemon status = %q; want the config error", out)
	}
	runCLI(t, home, "daemon", "stop").want(t, 0, "daemon stop")
}
