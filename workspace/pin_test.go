package workspace

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// evilGitDir makes, inside dir (a worktree the agent can write), a
// working copy of repo's git directory (its objects through alternates,
// HEAD at its HEAD commit) whose config runs a command that writes
// marker for every file git reads into an index (a clean filter, given
// to every file by a .gitattributes in dir), and a new file for it; it
// returns the directory. Followed, it would make a snapshot succeed and
// run the command.
func evilGitDir(t *testing.T, repo, dir, marker string) string {
	t.Helper()
	evil := filepath.Join(dir, ".evil")
	git(t, dir, "init", "-q", "--bare", evil)
	write(t, filepath.Join(evil, "objects", "info", "alternates"), filepath.Join(repo, ".git", "objects")+"\n")
	write(t, filepath.Join(evil, "HEAD"), git(t, repo, "rev-parse", "HEAD")+"\n")
	cfg := "[core]\n\tbare = false\n[filter \"x\"]\n\tclean = \"touch " + marker + "; cat\"\n"
	f, err := os.OpenFile(filepath.Join(evil, "config"), os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(cfg); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(dir, ".gitattributes"), "* filter=x\n")
	write(t, filepath.Join(dir, "trap.txt"), "a new file for the filter\n")
	return evil
}

// TestGitIsHeldToTheLoggedRepository: an agent in a sandbox can write its
// worktree, its .git file included, and the directory the repository
// keeps for its worktree. Pointed at a git directory of the agent's
// making, whose config runs a command (a clean filter), the daemon's git
// calls (run outside the sandbox) would run it as the daemon. They never
// follow the worktree's .git file or that directory's commondir: the
// command never runs, the snapshot is of the real repository, and Check
// says the worktree is not the repository's (Repair then moves it aside,
// keeping it). Files the agent replaced by a FIFO or a link to an
// endless file make Check fail, never hang.
func TestGitIsHeldToTheLoggedRepository(t *testing.T) {
	g := Git{}
	ctx := context.Background()
	t.Run(".git file", func(t *testing.T) {
		repo := newRepo(t)
		w := newWorkspace(t, g, repo)
		marker := filepath.Join(t.TempDir(), "ran")
		evil := evilGitDir(t, repo, w.Path, marker)
		write(t, filepath.Join(w.Path, "work.txt"), "the agent's work\n")
		write(t, filepath.Join(w.Path, ".git"), "gitdir: "+evil+"\n")

		snap, err := g.Snapshot(ctx, w, "end", "")
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatal("the agent's git directory ran its command (a clean filter) for the daemon's snapshot")
		}
		if got := git(t, repo, "rev-parse", SnapshotRef(w.AgentID)); got != snap {
			t.Fatalf("the snapshot %s is not on the real repository's ref (%s)", snap, got)
		}
		if got := git(t, repo, "show", snap+":work.txt"); got != "the agent's work" {
			t.Fatalf("the snapshot holds %q", got)
		}
		if err := g.Restore(ctx, w, snap); err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatal("the agent's git directory ran its command for the daemon's restore")
		}
		err = g.Check(ctx, w)
		if !errors.Is(err, errNotWorktree) || !strings.Contains(err.Error(), evil) {
			t.Fatalf("Check of a worktree whose .git names the agent's directory: %v", err)
		}
		what, err := g.Repair(ctx, w, time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC))
		if err != nil || !strings.Contains(what, "moved it to") || g.Check(ctx, w) != nil {
			t.Fatalf("repair: %q %v", what, err)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatal("the agent's git directory ran its command for the daemon's check or repair")
		}
	})
	t.Run("commondir", func(t *testing.T) {
		repo := newRepo(t)
		w := newWorkspace(t, g, repo)
		marker := filepath.Join(t.TempDir(), "ran")
		evil := evilGitDir(t, repo, w.Path, marker)
		admin, err := adminDir(filepath.Join(repo, ".git"), w.Path)
		if err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(admin, "commondir"), evil+"\n")
		write(t, filepath.Join(w.Path, "work.txt"), "more\n")
		// git reads the refs through commondir whatever the environment
		// says, so the calls refuse such a worktree.
		if _, err := g.Snapshot(ctx, w, "end", ""); !errors.Is(err, errNotWorktree) || !strings.Contains(err.Error(), evil) {
			t.Fatalf("a snapshot through a commondir naming the agent's directory: %v", err)
		}
		if err := g.Check(ctx, w); !errors.Is(err, errNotWorktree) {
			t.Fatalf("Check: %v", err)
		}
		what, err := g.Repair(ctx, w, time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC))
		if err != nil || !strings.Contains(what, "moved it to") || g.Check(ctx, w) != nil {
			t.Fatalf("repair: %q %v", what, err)
		}
		if _, err := os.Stat(marker); err == nil {
			t.Fatal("the agent's common directory ran its command")
		}
		if got := read(t, filepath.Join(w.Path+".moved-20261130T000000Z", "work.txt")); got != "more\n" {
			t.Fatalf("the work moved aside: %q", got)
		}
	})
}

// TestAgentMadeFilesNeverHang: the files Check and pin read that an
// agent can replace (its worktree's .git, the gitdir and commondir of the
// repository's directory for it) are read only when they are small
// regular files: a FIFO (no writer ever comes) or a link to /dev/zero
// makes the worktree "not a worktree of the repository", at once.
func TestAgentMadeFilesNeverHang(t *testing.T) {
	g := Git{}
	ctx := context.Background()
	for _, c := range []struct{ name, file string }{
		{"a FIFO for .git", ".git"}, {"a FIFO for gitdir", "gitdir"}, {"a link to /dev/zero for .git", ".git"},
	} {
		t.Run(c.name, func(t *testing.T) {
			repo := newRepo(t)
			w := newWorkspace(t, g, repo)
			path := filepath.Join(w.Path, ".git")
			if c.file == "gitdir" {
				admin, err := adminDir(filepath.Join(repo, ".git"), w.Path)
				if err != nil {
					t.Fatal(err)
				}
				path = filepath.Join(admin, "gitdir")
			}
			if err := os.Remove(path); err != nil {
				t.Fatal(err)
			}
			var err error
			if strings.Contains(c.name, "FIFO") {
				err = syscall.Mkfifo(path, 0o600)
			} else {
				err = os.Symlink("/dev/zero", path)
			}
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- g.Check(ctx, w) }()
			select {
			case err := <-done:
				if !errors.Is(err, errNotWorktree) {
					t.Fatalf("Check: %v, want not a worktree", err)
				}
			case <-time.After(time.Minute):
				t.Fatal("Check did not return within a minute: it reads what the agent put there")
			}
		})
	}
}

// TestRelativeWorktreePaths: a worktree whose repository records its
// paths relative to each other (git's worktree.useRelativePaths) is still
// the repository's worktree.
func TestRelativeWorktreePaths(t *testing.T) {
	g := Git{}
	ctx := context.Background()
	repo := newRepo(t)
	w := newWorkspace(t, g, repo)
	admin, err := adminDir(filepath.Join(repo, ".git"), w.Path)
	if err != nil {
		t.Fatal(err)
	}
	toWorktree, err := filepath.Rel(admin, filepath.Join(w.Path, ".git"))
	if err != nil {
		t.Fatal(err)
	}
	toAdmin, err := filepath.Rel(w.Path, admin)
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(admin, "gitdir"), toWorktree+"\n")
	write(t, filepath.Join(w.Path, ".git"), "gitdir: "+toAdmin+"\n")
	if err := g.Check(ctx, w); err != nil {
		t.Fatalf("Check of a worktree with relative paths: %v", err)
	}
	if _, err := g.Snapshot(ctx, w, "end", ""); err != nil {
		t.Fatal(err)
	}
}
