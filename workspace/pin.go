package workspace

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Held to the logged repository (doc.go): what a git call on a worktree
// is told, and what a sandbox around the worktree's agent binds, comes
// from the repository the log names, never from files in the worktree or
// in the directory the repository keeps for it, which the agent can
// write.

// located is where a worktree is in its repository, found from the
// repository the log names: the repository's common directory and the
// directory it keeps for the worktree (its admin directory).
type located struct {
	common, admin string
}

// locate finds where w's worktree is in its repository; an error wraps
// errNotWorktree when the repository keeps no worktree at w.Path.
func (g Git) locate(ctx context.Context, w Workspace) (located, error) {
	common, err := g.common(ctx, w)
	if err != nil {
		return located{}, fmt.Errorf("the repository %s: %w", w.Repo, err)
	}
	admin, err := adminDir(common, w.Path)
	if err != nil {
		return located{}, err
	}
	return located{common: common, admin: admin}, nil
}

// env is the environment that holds a git call on the worktree at path
// to its repository, whatever the worktree's .git file says. A sandboxed
// agent can rewrite that file, and a git run outside the sandbox on a
// repository the agent made would run what that repository configures
// (core.fsmonitor, say) as the daemon.
func (l located) env(path string) []string {
	return []string{"GIT_DIR=" + l.admin, "GIT_COMMON_DIR=" + l.common, "GIT_WORK_TREE=" + path}
}

// indexFile is agent id's private index: a cache of what its worktree
// held at the last snapshot, in the common directory.
func (l located) indexFile(id string) string {
	return filepath.Join(l.common, "warren", "index-"+id)
}

// index is indexFile, its directory made when missing.
func (l located) index(id string) (string, error) {
	f := l.indexFile(id)
	return f, os.MkdirAll(filepath.Dir(f), 0o700)
}

// pin is the environment that holds a git call on w's worktree to the
// repository its log names (located.env).
func (g Git) pin(ctx context.Context, w Workspace) ([]string, error) {
	l, err := g.locate(ctx, w)
	if err != nil {
		return nil, err
	}
	return l.env(w.Path), nil
}

// adminDir is the directory the repository whose common directory is
// common keeps for its linked worktree at path: the one under worktrees/
// whose gitdir file names path's .git (git names it after the path's
// last element unless that was taken). Its commondir file must name
// common: git reads the refs through it whatever GIT_COMMON_DIR says.
func adminDir(common, path string) (string, error) {
	if dir, found, err := adminNamed(common, path, filepath.Base(path)); found || err != nil {
		return dir, err
	}
	all, _ := os.ReadDir(filepath.Join(common, "worktrees"))
	for _, e := range all {
		if dir, found, err := adminNamed(common, path, e.Name()); found || err != nil {
			return dir, err
		}
	}
	return "", fmt.Errorf("%w: %s (the repository %s keeps no worktree there)", errNotWorktree, path, common)
}

// adminNamed is adminDir for the directory worktrees/<name>: found when
// its gitdir names path's .git.
func adminNamed(common, path, name string) (dir string, found bool, err error) {
	dir = filepath.Join(common, "worktrees", name)
	b, err := readSmall(filepath.Join(dir, "gitdir"))
	if err != nil || !samePath(relativeTo(dir, strings.TrimSpace(b)), filepath.Join(path, ".git")) {
		return "", false, nil
	}
	c, err := readSmall(filepath.Join(dir, "commondir"))
	named := relativeTo(dir, strings.TrimSpace(c))
	if err != nil || !samePath(named, common) {
		return "", true, fmt.Errorf("%w: %s (the repository's directory for it, %s, names %q as its repository, not %s)",
			errNotWorktree, path, dir, named, common)
	}
	return dir, true, nil
}

// relativeTo is p, or, when p is relative (a worktree made with
// worktree.useRelativePaths), p joined to dir.
func relativeTo(dir, p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

// samePath reports whether a and b name the same file (the same string
// once cleaned, or the same file through links).
func samePath(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	fa, err := os.Stat(a)
	if err != nil {
		return false
	}
	fb, err := os.Stat(b)
	return err == nil && os.SameFile(fa, fb)
}

// Dirs are the repository's directories of w's worktree, found as pin
// finds them: its common directory and the directory it keeps for this
// worktree. It makes what a sandbox binds exist: the directories a
// commit writes, and what is bound read-only over them (objects/info, an
// empty config.worktree), so that an agent cannot make them (alternates
// to another repository's objects; a per-worktree config that runs
// commands, read when the repository sets extensions.worktreeConfig).
// package sandbox binds what it returns.
func (g Git) Dirs(ctx context.Context, w Workspace) (common, admin string, err error) {
	l, err := g.locate(ctx, w)
	if err != nil {
		return "", "", err
	}
	common, admin = l.common, l.admin
	// What the sandbox binds read-write (a commit's objects, refs and
	// reflogs: a bare repository has no logs until a worktree writes one)
	// and read-only over it.
	for _, d := range []string{filepath.Join("objects", "info"), "refs", "logs"} {
		if err := os.MkdirAll(filepath.Join(common, d), 0o755); err != nil {
			return "", "", err
		}
	}
	cfg := filepath.Join(admin, "config.worktree")
	held, err := readSmall(cfg)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		f, err := os.OpenFile(cfg, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0o644)
		if err != nil {
			return "", "", fmt.Errorf("the worktree's config.worktree in %s: %w", admin, err)
		}
		return common, admin, f.Close()
	case err != nil || strings.TrimSpace(held) != "" || links(cfg) != 1:
		return "", "", fmt.Errorf("%s holds settings for the worktree %s, or is not a plain file of its own; a sandboxed agent's "+
			"worktree may have none (git runs them outside the sandbox): remove the file, then start the agent again", cfg, w.Path)
	}
	return common, admin, nil
}

// links is the number of names path's file has (0: none, or unknown).
func links(path string) uint64 {
	fi, err := os.Lstat(path)
	if err != nil {
		return 0
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return uint64(st.Nlink)
	}
	return 0
}

// maxSmall bounds what readSmall reads: a .git file, a gitdir or a
// commondir holds one path.
const maxSmall = 4096

// readSmall reads a small regular file that an agent may have replaced:
// never through a link, never blocking on a FIFO, never more than
// maxSmall bytes.
func readSmall(path string) (string, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", path)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return "", err
	}
	defer f.Close()
	// What was opened is checked again: it may have been replaced since.
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", path)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxSmall+1))
	if err == nil && len(b) > maxSmall {
		err = errors.New(path + " is larger than a path")
	}
	return string(b), err
}
