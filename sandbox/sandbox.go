package sandbox

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// ErrSandbox marks a sandbox that cannot be set up (bwrap missing, user
// namespaces off, a bind that is not an absolute path).
var ErrSandbox = errors.New("sandbox")

// Spec is an agent's sandbox as its log records it (agent.created).
type Spec struct {
	// Network: the agent keeps the host's network (agent CLIs must reach
	// their model); false unshares it.
	Network bool `json:"network"`
	// BindRO and BindRW add host paths, read-only and read-write.
	BindRO []string `json:"bind_ro,omitempty"`
	BindRW []string `json:"bind_rw,omitempty"`
}

// Validate checks the spec's paths: absolute, clean, not the root.
func (s Spec) Validate() error {
	for _, list := range [][]string{s.BindRO, s.BindRW} {
		for _, p := range list {
			if !filepath.IsAbs(p) || filepath.Clean(p) != p || p == "/" {
				return fmt.Errorf("%w: bind path %q must be an absolute, clean path other than /", ErrSandbox, p)
			}
		}
	}
	return nil
}

// View is what one process of the agent sees besides the system.
type View struct {
	// Work is the agent's workspace, or its cwd without one (read-write,
	// the process's working directory).
	Work string
	// Home is the agent's private home (read-write; HOME points there).
	Home string
	// Socket is the agent's own socket, bound at its path.
	Socket string
	// ReadOnly lists what the process runs on: its program and runtime
	// (Runtime), warren's helper library and binary.
	ReadOnly []string
	// Git, when Work is a linked worktree of a repository, are that
	// repository's directories (nil: none).
	Git *GitDirs
}

// Command returns argv wrapped in bwrap (the binary at bwrap) for spec
// and view.
func Command(bwrap string, spec Spec, v View, argv []string) ([]string, error) {
	if err := spec.Validate(); err != nil {
		return nil, err
	}
	for _, p := range []string{v.Work, v.Home} {
		if !filepath.IsAbs(p) {
			return nil, fmt.Errorf("%w: %q is not an absolute path", ErrSandbox, p)
		}
	}
	args := append([]string{bwrap}, systemBinds()...)
	args = append(args, "--proc", "/proc", "--dev", "/dev", "--tmpfs", "/tmp")
	for _, p := range append(append([]string(nil), v.ReadOnly...), spec.BindRO...) {
		args = append(args, "--ro-bind-try", p, p)
	}
	args = append(args, gitBinds(v.Git)...)
	for _, p := range append([]string{v.Work, v.Home}, spec.BindRW...) {
		args = append(args, "--bind", p, p)
	}
	if v.Socket != "" {
		args = append(args, "--bind", v.Socket, v.Socket)
	}
	args = append(args, "--chdir", v.Work,
		"--unshare-pid", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup-try")
	if !spec.Network {
		args = append(args, "--unshare-net")
	}
	args = append(args, "--die-with-parent", "--new-session", "--")
	return append(args, argv...), nil
}

// systemBinds are the read-only binds of the system: /usr and /etc, and
// /bin, /sbin, /lib* as the host has them (directories bound, links into
// /usr kept as links).
func systemBinds() []string {
	args := []string{"--ro-bind", "/usr", "/usr", "--ro-bind-try", "/etc", "/etc"}
	for _, p := range []string{"/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		fi, err := os.Lstat(p)
		switch {
		case err != nil:
		case fi.Mode()&os.ModeSymlink != 0:
			if target, err := os.Readlink(p); err == nil {
				args = append(args, "--symlink", target, p)
			}
		case fi.IsDir():
			args = append(args, "--ro-bind", p, p)
		}
	}
	// systemd-resolved's resolv.conf lives under /run: without it there
	// is no DNS inside.
	if target, err := filepath.EvalSymlinks("/etc/resolv.conf"); err == nil && !strings.HasPrefix(target, "/etc/") {
		args = append(args, "--ro-bind-try", filepath.Dir(target), filepath.Dir(target))
	}
	return args
}

// GitDirs are the directories of the repository whose linked worktree an
// agent works in: its common git directory and the directory it keeps
// for the worktree (package workspace's Dirs finds them from the
// repository the log names).
type GitDirs struct {
	Common, Admin string
}

// gitBinds are the binds of a linked worktree's repository: its git
// directory read-only, then what a commit in this worktree writes
// read-write, except objects/info (alternates: another repository's
// objects) and the files of the worktree's own directory that say which
// repository it belongs to (commondir, gitdir) and its own config
// (config.worktree), which stay read-only: the daemon's git calls on the
// worktree run outside the sandbox. The directories come from the
// caller, never from the worktree's .git file, which the agent writes:
// read from there they would bind whatever directory it names. Nothing
// without them (git does not work inside).
func gitBinds(d *GitDirs) []string {
	if d == nil {
		return nil
	}
	common, admin := d.Common, d.Admin
	args := []string{"--ro-bind", common, common}
	for _, sub := range []string{"objects", "refs", "logs"} {
		args = append(args, "--bind-try", filepath.Join(common, sub), filepath.Join(common, sub))
	}
	args = append(args, "--ro-bind-try", filepath.Join(common, "objects", "info"), filepath.Join(common, "objects", "info"))
	args = append(args, "--bind", admin, admin)
	for _, f := range []string{"commondir", "gitdir", "config.worktree"} {
		args = append(args, "--ro-bind-try", filepath.Join(admin, f), filepath.Join(admin, f))
	}
	return args
}
