package tests

import (
	"bufio"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// needRoot skips a test that must act as a second uid; CI runs as root, so
// there it always runs.
func needRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: the test chowns files to uid 65534 and runs a process as that uid to act as a second user")
	}
}

// chownNobody gives path to uid/gid 65534.
func chownNobody(t *testing.T, path string) {
	t.Helper()
	if err := os.Chown(path, nobodyUID, nobodyUID); err != nil {
		t.Fatal(err)
	}
}

// startForegroundRefused runs `warren daemon start --foreground` on home
// and requires that it exits with an error before it serves, saying every
// string of want.
func startForegroundRefused(t *testing.T, home string, want ...string) string {
	t.Helper()
	if procBuildErr != nil {
		t.Fatal(procBuildErr)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, procBinary, "daemon", "start", "--foreground", "--home", home)
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waited := make(chan error, 1)
	go func() {
		err := cmd.Wait()
		pw.Close()
		waited <- err
	}()
	var out strings.Builder
	sc := bufio.NewScanner(pr)
	served := false
	for sc.Scan() {
		out.WriteString(sc.Text() + "\n")
		if strings.Contains(sc.Text(), "serving") && !served {
			served = true
			_ = cmd.Process.Kill()
		}
	}
	err := <-waited
	if served {
		t.Fatalf("the daemon started and served on %s; want a refusal:\n%s", home, out.String())
	}
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() == 0 {
		t.Fatalf("daemon start on %s: %v, want a non-zero exit:\n%s", home, err, out.String())
	}
	for _, w := range want {
		if !strings.Contains(out.String(), w) {
			t.Fatalf("the refusal does not say %q:\n%s", w, out.String())
		}
	}
	if _, err := os.Lstat(filepath.Join(home, "daemon.pid")); err == nil {
		t.Fatalf("a refused start wrote daemon.pid in %s", home)
	}
	return out.String()
}

// newHomeDir makes a fresh short directory holding a home path (not created).
func newHomeDir(t *testing.T) (dir, home string) {
	t.Helper()
	dir, err := os.MkdirTemp("", "w")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir, filepath.Join(dir, "h")
}

// TestHomeOfAnotherUserRefused: a home, an agents/ directory or a parent
// that another uid owns is refused at start, with how to fix it, before
// anything in it is read.
func TestHomeOfAnotherUserRefused(t *testing.T) {
	needRoot(t)
	t.Parallel()
	t.Run("home owned by another uid", func(t *testing.T) {
		_, home := newHomeDir(t)
		if err := os.Mkdir(home, 0o700); err != nil {
			t.Fatal(err)
		}
		chownNobody(t, home)
		startForegroundRefused(t, home, "owned by uid 65534", "chown")
		// The background start refuses too, and writes no daemon.log in
		// the other user's home.
		r := runCLI(t, home, "daemon", "start")
		r.want(t, 1, "daemon start on another user's home")
		if !strings.Contains(r.stderr, "owned by uid 65534") {
			t.Fatalf("stderr %q", r.stderr)
		}
		if _, err := os.Lstat(filepath.Join(home, "daemon.log")); err == nil {
			t.Fatal("the CLI wrote daemon.log in a home another user owns")
		}
	})
	t.Run("agents directory owned by another uid", func(t *testing.T) {
		_, home := newHomeDir(t)
		agents := filepath.Join(home, "agents")
		if err := os.MkdirAll(agents, 0o700); err != nil {
			t.Fatal(err)
		}
		chownNobody(t, agents)
		startForegroundRefused(t, home, "agents directory", "owned by uid 65534")
	})
	t.Run("parent owned by another uid", func(t *testing.T) {
		dir, _ := newHomeDir(t)
		parent := filepath.Join(dir, "p")
		home := filepath.Join(parent, "h")
		if err := os.MkdirAll(home, 0o700); err != nil {
			t.Fatal(err)
		}
		chownNobody(t, parent)
		startForegroundRefused(t, home, "a parent of the home", "owned by uid 65534")
	})
}

// TestHomeWritableByOthersRefused: a home or agents/ directory that group
// or others can write is refused with the chmod that fixes it (as
// OpenSSH's StrictModes); a home the daemon creates is 0700.
func TestHomeWritableByOthersRefused(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name string
		dir  string // relative to home
		mode os.FileMode
	}{
		{"home group-writable", "", 0o770},
		{"home world-writable", "", 0o777},
		{"agents world-writable", "agents", 0o777},
		{"agents group-writable", "agents", 0o730},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, home := newHomeDir(t)
			target := filepath.Join(home, c.dir)
			if err := os.MkdirAll(target, 0o700); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(target, c.mode); err != nil {
				t.Fatal(err)
			}
			startForegroundRefused(t, home, "chmod go-w "+target)
			st, err := os.Stat(target)
			if err != nil || st.Mode().Perm() != c.mode {
				t.Fatalf("the refused start changed %s: %v %v", target, st.Mode(), err)
			}
		})
	}
}

// TestSocketPathNotASocketRefused: a regular file or a symbolic link at
// daemon.sock is an error at start and is left as it is (only a stale
// socket is replaced).
func TestSocketPathNotASocketRefused(t *testing.T) {
	t.Parallel()
	t.Run("regular file", func(t *testing.T) {
		_, home := newHomeDir(t)
		if err := os.Mkdir(home, 0o700); err != nil {
			t.Fatal(err)
		}
		sock := filepath.Join(home, "daemon.sock")
		if err := os.WriteFile(sock, []byte("keep me"), 0o600); err != nil {
			t.Fatal(err)
		}
		startForegroundRefused(t, home, "is a regular file", "move it away")
		if b, err := os.ReadFile(sock); err != nil || string(b) != "keep me" {
			t.Fatalf("the file at daemon.sock was changed: %q %v", b, err)
		}
	})
	t.Run("symbolic link", func(t *testing.T) {
		dir, home := newHomeDir(t)
		if err := os.Mkdir(home, 0o700); err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(dir, "target")
		if err := os.WriteFile(target, []byte("keep me"), 0o600); err != nil {
			t.Fatal(err)
		}
		sock := filepath.Join(home, "daemon.sock")
		if err := os.Symlink(target, sock); err != nil {
			t.Fatal(err)
		}
		startForegroundRefused(t, home, "is a symbolic link")
		if l, err := os.Readlink(sock); err != nil || l != target {
			t.Fatalf("the link at daemon.sock was changed: %q %v", l, err)
		}
		if b, err := os.ReadFile(target); err != nil || string(b) != "keep me" {
			t.Fatalf("the link's target was changed: %q %v", b, err)
		}
	})
	t.Run("stale socket is replaced", func(t *testing.T) {
		d := newTestDaemon(t, modeBinary)
		d.Start()
		d.Kill() // leaves a stale socket behind
		if st, err := os.Lstat(d.Sock); err != nil || st.Mode()&os.ModeSocket == 0 {
			t.Fatalf("no stale socket after kill -9: %v", err)
		}
		d.Start()
	})
}

// TestEACCESOnHomeIsNotNotRunning: a user who cannot enter the home is
// told about the permission problem, not that the daemon is not running.
func TestEACCESOnHomeIsNotNotRunning(t *testing.T) {
	needRoot(t)
	t.Parallel()
	d := startTestDaemon(t, modeBinary)
	bin := nobodyBinary(t)
	cmd := exec.Command(bin, "--home", d.Home, "daemon", "status")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobodyUID, Gid: nobodyUID}}
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != 1 {
		t.Fatalf("status by uid %d on root's home: %v, want exit 1:\n%s", nobodyUID, err, out)
	}
	if !strings.Contains(string(out), "permission denied") || strings.Contains(string(out), "not running") {
		t.Fatalf("the message does not report the permission problem:\n%s", out)
	}
}

// nobodyBinary copies the warren binary where uid 65534 can run it.
func nobodyBinary(t *testing.T) string {
	t.Helper()
	if procBuildErr != nil {
		t.Fatal(procBuildErr)
	}
	dir, err := os.MkdirTemp("", "wb")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(procBinary)
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "warren")
	if err := os.WriteFile(bin, data, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}
