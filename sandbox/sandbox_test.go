package sandbox

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// binds returns the sources of args' flag (a flag followed by a source
// and a destination).
func binds(args []string, flag string) []string {
	var out []string
	for i := 0; i+2 < len(args); i++ {
		if args[i] == flag {
			out = append(out, args[i+1])
		}
	}
	return out
}

func TestCommandView(t *testing.T) {
	work, home := t.TempDir(), t.TempDir()
	argv := []string{"/usr/bin/python3", "agent.py"}
	spec := Spec{Network: false, BindRO: []string{"/opt/tools"}, BindRW: []string{"/srv/cache"}}
	args, err := Command("/usr/bin/bwrap", spec, View{Work: work, Home: home, Socket: "/h/agents/a/agent.sock", ReadOnly: []string{"/h/python"}}, argv)
	if err != nil {
		t.Fatal(err)
	}
	if args[0] != "/usr/bin/bwrap" || !slices.Equal(args[len(args)-3:], []string{"--", "/usr/bin/python3", "agent.py"}) {
		t.Fatalf("not wrapped: %v", args)
	}
	rw := binds(args, "--bind")
	for _, p := range []string{work, home, "/srv/cache", "/h/agents/a/agent.sock"} {
		if !slices.Contains(rw, p) {
			t.Errorf("%s is not bound read-write: %v", p, rw)
		}
	}
	ro := binds(args, "--ro-bind-try")
	for _, p := range []string{"/opt/tools", "/h/python"} {
		if !slices.Contains(ro, p) {
			t.Errorf("%s is not bound read-only: %v", p, ro)
		}
	}
	joined := strings.Join(args, " ")
	for _, want := range []string{"--unshare-pid", "--unshare-net", "--die-with-parent", "--new-session", "--tmpfs /tmp", "--chdir " + work} {
		if !strings.Contains(joined, want) {
			t.Errorf("no %s in %v", want, args)
		}
	}
	spec.Network = true
	args, err = Command("bwrap", spec, View{Work: work, Home: home}, argv)
	if err != nil {
		t.Fatal(err)
	}
	if slices.Contains(args, "--unshare-net") {
		t.Error("network true unshares the network")
	}
}

func TestCommandRefusesBadPaths(t *testing.T) {
	for _, spec := range []Spec{{BindRO: []string{"relative"}}, {BindRW: []string{"/"}}, {BindRW: []string{"/a/../b"}}} {
		if _, err := Command("bwrap", spec, View{Work: "/w", Home: "/h"}, []string{"x"}); !errors.Is(err, ErrSandbox) {
			t.Errorf("%+v: %v, want ErrSandbox", spec, err)
		}
	}
	if _, err := Command("bwrap", Spec{}, View{Work: "", Home: "/h"}, []string{"x"}); !errors.Is(err, ErrSandbox) {
		t.Errorf("an empty work directory: %v", err)
	}
}

// TestGitBindsOfALinkedWorktree: the repository whose directories the
// caller gives is bound read-only, its objects, refs and logs and the
// worktree's own admin directory read-write (a commit works; a hook
// cannot be planted), but for objects/info (alternates) and the admin
// directory's files that name the repository or configure the worktree,
// read-only again over them. Nothing is bound without directories: the
// worktree's .git file, which the agent writes, is never read.
func TestGitBindsOfALinkedWorktree(t *testing.T) {
	common, admin := "/r/.git", "/r/.git/worktrees/wt"
	args := gitBinds(&GitDirs{Common: common, Admin: admin})
	if !slices.Equal(binds(args, "--ro-bind"), []string{common}) {
		t.Errorf("read-only: %v, want the git directory", binds(args, "--ro-bind"))
	}
	want := []string{filepath.Join(common, "objects"), filepath.Join(common, "refs"), filepath.Join(common, "logs")}
	if got := binds(args, "--bind-try"); !slices.Equal(got, want) {
		t.Errorf("read-write: %v, want %v", got, want)
	}
	if got := binds(args, "--bind"); !slices.Equal(got, []string{admin}) {
		t.Errorf("the worktree's admin directory: %v", got)
	}
	want = []string{filepath.Join(common, "objects", "info"), filepath.Join(admin, "commondir"), filepath.Join(admin, "gitdir"),
		filepath.Join(admin, "config.worktree")}
	if got := binds(args, "--ro-bind-try"); !slices.Equal(got, want) {
		t.Errorf("read-only again: %v, want %v", got, want)
	}
	// Each read-only bind comes after the read-write one it covers.
	if i, j := slices.Index(args, filepath.Join(common, "objects")), slices.Index(args, want[0]); i < 0 || j < i {
		t.Errorf("objects/info must be bound after objects: %v", args)
	}
	if i, j := slices.Index(args, admin), slices.Index(args, want[1]); i < 0 || j < i {
		t.Errorf("the admin directory's files must be bound after it: %v", args)
	}
	if got := gitBinds(nil); got != nil {
		t.Errorf("no directories, got %v", got)
	}
}

// TestRuntime: a script's interpreter prefix and a node package's
// node_modules are bound; the operator's home and what holds it never.
func TestRuntime(t *testing.T) {
	root := t.TempDir()
	home := filepath.Join(root, "home", "op")
	write := func(p, body string) string {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	// A node installed under /opt-like prefix, an agent CLI in its
	// node_modules, linked from the prefix's bin.
	prefix := filepath.Join(root, "node")
	node := write(filepath.Join(prefix, "bin", "node"), "binary")
	if err := os.MkdirAll(filepath.Join(prefix, "lib"), 0o755); err != nil {
		t.Fatal(err)
	}
	cli := write(filepath.Join(prefix, "lib", "node_modules", "agent-cli", "cli.js"), "#!/usr/bin/env node\n")
	link := filepath.Join(prefix, "bin", "agent-cli")
	if err := os.Symlink(cli, link); err != nil {
		t.Fatal(err)
	}
	got := Runtime([]string{"agent-cli", "--acp"}, filepath.Join(prefix, "bin"), home)
	for _, want := range []string{link, filepath.Join(prefix, "lib", "node_modules"), node, prefix} {
		if !slices.Contains(got, want) {
			t.Errorf("Runtime lacks %s: %v", want, got)
		}
	}
	// A script in the operator's ~/.local/bin: the file only, never
	// ~/.local or the home.
	script := write(filepath.Join(home, ".local", "bin", "tool"), "#!/bin/sh\n")
	if err := os.MkdirAll(filepath.Join(home, ".local", "lib"), 0o755); err != nil {
		t.Fatal(err)
	}
	got = Runtime([]string{script}, "", home)
	if !slices.Equal(got, []string{script}) {
		t.Errorf("Runtime of a script in the home: %v, want the file only", got)
	}
	for _, p := range got {
		if p == home || p == filepath.Dir(home) || p == filepath.Join(home, ".local") {
			t.Errorf("Runtime binds %s", p)
		}
	}
	// A version manager's shim binds the manager's root.
	shim := write(filepath.Join(root, "pyenv", "shims", "python"), "#!/bin/sh\n")
	if got := Runtime([]string{shim}, "", home); !slices.Contains(got, filepath.Join(root, "pyenv")) {
		t.Errorf("Runtime of a shim: %v", got)
	}
}

func TestLookPath(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tool"), []byte("x"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "data"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if p, err := LookPath("tool", "/nonexistent:"+dir); err != nil || p != filepath.Join(dir, "tool") {
		t.Errorf("LookPath(tool) = %q, %v", p, err)
	}
	if _, err := LookPath("data", dir); !errors.Is(err, exec.ErrNotFound) {
		t.Errorf("a file that is not executable: %v", err)
	}
}

// TestCheck: a missing bwrap is an error naming the package; a working
// one is found and kept.
func TestCheck(t *testing.T) {
	c := &Checker{Bin: "/nonexistent/bwrap"}
	if _, err := c.Check(context.Background()); !errors.Is(err, ErrSandbox) || !strings.Contains(err.Error(), "apt-get install bubblewrap") {
		t.Errorf("a missing bwrap: %v", err)
	}
	if c.Path() != "" {
		t.Error("a failed check set a path")
	}
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Fatal("bwrap is not installed (Debian package bubblewrap)")
	}
	c = &Checker{}
	p, err := c.Check(context.Background())
	if err != nil || p == "" || c.Path() != p {
		t.Fatalf("Check() = %q, %v; Path() = %q", p, err, c.Path())
	}
	// A bwrap that cannot make a namespace: a program that fails.
	fake := filepath.Join(t.TempDir(), "bwrap")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho 'No permissions to create new namespace' >&2\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	c = &Checker{Bin: fake}
	if _, err := c.Check(context.Background()); !errors.Is(err, ErrSandbox) || !strings.Contains(err.Error(), "unprivileged_userns_clone") {
		t.Errorf("a bwrap that cannot make a namespace: %v", err)
	}
}
