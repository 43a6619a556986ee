package workspace

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// newRepo makes a git repository with a committed file, an ignored .env
// and a .gitignore, and returns its directory.
func newRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	repo := filepath.Join(dir, "repo")
	if err := os.Mkdir(repo, 0o755); err != nil {
		t.Fatal(err)
	}
	git(t, repo, "init", "-q", "-b", "main")
	write(t, filepath.Join(repo, "README.md"), "hello\n")
	write(t, filepath.Join(repo, "src", "a.go"), "package a\n")
	write(t, filepath.Join(repo, ".gitignore"), ".env\nbuild/\n")
	git(t, repo, "add", "-A")
	git(t, repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "first")
	write(t, filepath.Join(repo, ".env"), "SECRET=1\n")
	return repo
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_SYSTEM=/dev/null")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

func write(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		return "<" + err.Error() + ">"
	}
	return string(b)
}

// newWorkspace creates a workspace of repo for agent "lead/w1".
func newWorkspace(t *testing.T, g Git, repo string) Workspace {
	t.Helper()
	ctx := context.Background()
	r, base, err := g.Resolve(ctx, filepath.Join(repo, "src"), "")
	if err != nil {
		t.Fatal(err)
	}
	id := "0123456789abcdef0123456789abcdef"
	w := Workspace{AgentID: id, Repo: r, Path: filepath.Join(filepath.Dir(repo), "home", "workspaces", id),
		Branch: BranchName("lead/w1", id), Base: base}
	if err := g.Create(ctx, w, []string{".env"}); err != nil {
		t.Fatal(err)
	}
	return w
}

func TestVersionCheck(t *testing.T) {
	v, err := Git{}.CheckVersion(context.Background())
	if err != nil {
		t.Fatalf("CheckVersion: %v (%s)", err, v)
	}
	if _, err := (Git{Bin: "/nonexistent/git"}).CheckVersion(context.Background()); err == nil || !strings.Contains(err.Error(), "2.36") {
		t.Fatalf("a missing git: %v", err)
	}
}

// TestGitThatCannotStartSaysWhy: a missing directory and a missing git
// are told apart (exec reports both as "no such file or directory").
func TestGitThatCannotStartSaysWhy(t *testing.T) {
	ctx := context.Background()
	missing := filepath.Join(t.TempDir(), "nowhere")
	if _, _, err := (Git{}).Resolve(ctx, missing, ""); err == nil || !strings.Contains(err.Error(), "the directory "+missing+" does not exist") {
		t.Fatalf("a missing directory: %v", err)
	}
	if _, _, err := (Git{Bin: "/nonexistent/git"}).Resolve(ctx, t.TempDir(), ""); err == nil || !strings.Contains(err.Error(), "is git installed") {
		t.Fatalf("a missing git: %v", err)
	}
}

func TestBranchName(t *testing.T) {
	for in, want := range map[string]string{"lead/w1": "warren/lead-w1-01234567", "a b/c..d": "warren/a_b-c..d-01234567", "": "warren/agent-01234567"} {
		if got := BranchName(in, "0123456789abcdef"); got != want {
			t.Errorf("BranchName(%q) = %q, want %q", in, got, want)
		}
	}
}

// TestCreateSnapshotRestore: the worktree is on its branch with the
// ignored file copied; a snapshot holds tracked and untracked files but
// not ignored ones, and does not move the branch; a restore puts a
// changed file back, removes a file created since and leaves ignored
// files alone; restoring twice changes nothing more.
func TestCreateSnapshotRestore(t *testing.T) {
	g := Git{}
	repo := newRepo(t)
	w := newWorkspace(t, g, repo)
	ctx := context.Background()
	if err := g.Check(ctx, w); err != nil {
		t.Fatal(err)
	}
	if read(t, filepath.Join(w.Path, ".env")) != "SECRET=1\n" {
		t.Fatal(".env was not copied")
	}
	head := git(t, w.Path, "rev-parse", "HEAD")
	write(t, filepath.Join(w.Path, "notes.txt"), "untracked\n")
	start, err := g.Snapshot(ctx, w, "start", "")
	if err != nil {
		t.Fatal(err)
	}
	if files := git(t, repo, "ls-tree", "-r", "--name-only", start); !strings.Contains(files, "notes.txt") || strings.Contains(files, ".env") {
		t.Fatalf("snapshot files:\n%s", files)
	}
	if got := git(t, w.Path, "rev-parse", "HEAD"); got != head || git(t, w.Path, "status", "--porcelain") != "?? notes.txt" {
		t.Fatal("the snapshot moved HEAD or touched the index")
	}
	// The interrupted attempt's edits.
	write(t, filepath.Join(w.Path, "README.md"), "hello\nedited twice\n")
	write(t, filepath.Join(w.Path, "src", "new.go"), "package a // new\n")
	write(t, filepath.Join(w.Path, "build", "out.bin"), "ignored output\n")
	os.Remove(filepath.Join(w.Path, "notes.txt"))
	for i := 0; i < 2; i++ {
		if err := g.Restore(ctx, w, start); err != nil {
			t.Fatal(err)
		}
		if read(t, filepath.Join(w.Path, "README.md")) != "hello\n" || read(t, filepath.Join(w.Path, "notes.txt")) != "untracked\n" {
			t.Fatal("the restore did not put the files back")
		}
		if _, err := os.Stat(filepath.Join(w.Path, "src", "new.go")); !errors.Is(err, os.ErrNotExist) {
			t.Fatal("the restore left a file created since the snapshot")
		}
		if read(t, filepath.Join(w.Path, "build", "out.bin")) != "ignored output\n" || read(t, filepath.Join(w.Path, ".env")) != "SECRET=1\n" {
			t.Fatal("the restore touched ignored files")
		}
	}
	second, err := g.Snapshot(ctx, w, "end", start)
	if err != nil {
		t.Fatal(err)
	}
	if parent := git(t, repo, "rev-parse", second+"^2"); parent != start {
		t.Fatalf("snapshots are not chained: %s's second parent is %s", second, parent)
	}
	if parent := git(t, repo, "rev-parse", second+"^1"); parent != head {
		t.Fatalf("a snapshot's first parent is %s, not the branch head %s", parent, head)
	}
	if got := git(t, repo, "rev-parse", SnapshotRef(w.AgentID)); got != second {
		t.Fatal("the snapshot ref does not name the latest snapshot")
	}
}

// TestCloseKeepsTheWork: uncommitted work is committed to the branch,
// the directory removed, the branch kept.
func TestCloseKeepsTheWork(t *testing.T) {
	g := Git{}
	repo := newRepo(t)
	w := newWorkspace(t, g, repo)
	write(t, filepath.Join(w.Path, "work.txt"), "unfinished\n")
	head, err := g.Close(context.Background(), w, "lead/w1")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(w.Path); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("the worktree directory is still there")
	}
	if got := git(t, repo, "show", head+":work.txt"); got != "unfinished" {
		t.Fatalf("the branch head holds %q", got)
	}
	if msg := git(t, repo, "log", "-1", "--format=%s", w.Branch); msg != "warren: work left by lead/w1" {
		t.Fatalf("commit message %q", msg)
	}
}

// TestMergeAndConflict: a child's work merges into the parent (--no-ff);
// a conflicting one is aborted, the parent as it was, the paths named.
func TestMergeAndConflict(t *testing.T) {
	g := Git{}
	repo := newRepo(t)
	ctx := context.Background()
	parent := newWorkspace(t, g, repo)
	child := parent
	child.AgentID = "fedcba9876543210fedcba9876543210"
	child.Path = filepath.Join(filepath.Dir(parent.Path), child.AgentID)
	child.Branch = BranchName("lead/w1/kid", child.AgentID)
	if err := g.Create(ctx, child, nil); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(child.Path, "kid.txt"), "from the kid\n")
	commit, conflicts, err := g.Merge(ctx, parent, child, "lead/w1/kid")
	if err != nil || len(conflicts) != 0 || read(t, filepath.Join(parent.Path, "kid.txt")) != "from the kid\n" {
		t.Fatalf("merge: %s %v %v", commit, conflicts, err)
	}
	if parents := git(t, repo, "rev-list", "--parents", "-n1", commit); len(strings.Fields(parents)) != 3 {
		t.Fatalf("not a merge commit: %s", parents)
	}
	write(t, filepath.Join(child.Path, "README.md"), "child's\n")
	write(t, filepath.Join(parent.Path, "README.md"), "parent's\n")
	git(t, parent.Path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-am", "parent edit")
	before := git(t, parent.Path, "rev-parse", "HEAD")
	_, conflicts, err = g.Merge(ctx, parent, child, "lead/w1/kid")
	if !errors.Is(err, ErrConflict) || len(conflicts) != 1 || conflicts[0] != "README.md" {
		t.Fatalf("conflicting merge: %v %v", conflicts, err)
	}
	if git(t, parent.Path, "rev-parse", "HEAD") != before || read(t, filepath.Join(parent.Path, "README.md")) != "parent's\n" ||
		git(t, parent.Path, "status", "--porcelain") != "" {
		t.Fatal("the aborted merge changed the parent's worktree")
	}
}

// TestRepair: a deleted worktree directory, a plain directory in its
// place and a branch renamed inside it are each repaired from the
// branch; nothing committed or uncommitted is lost.
func TestRepair(t *testing.T) {
	g := Git{}
	ctx := context.Background()
	now := time.Date(2026, 11, 29, 0, 0, 0, 0, time.UTC)
	t.Run("deleted directory", func(t *testing.T) {
		repo := newRepo(t)
		w := newWorkspace(t, g, repo)
		write(t, filepath.Join(w.Path, "kept.txt"), "committed\n")
		git(t, w.Path, "add", "kept.txt")
		git(t, w.Path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "kept")
		if err := os.RemoveAll(w.Path); err != nil {
			t.Fatal(err)
		}
		what, err := g.Repair(ctx, w, now)
		if err != nil || !strings.Contains(what, "made again") || read(t, filepath.Join(w.Path, "kept.txt")) != "committed\n" || g.Check(ctx, w) != nil {
			t.Fatalf("repair: %q %v", what, err)
		}
	})
	t.Run("plain directory", func(t *testing.T) {
		repo := newRepo(t)
		w := newWorkspace(t, g, repo)
		if _, err := g.Close(ctx, w, "lead/w1"); err != nil {
			t.Fatal(err)
		}
		write(t, filepath.Join(w.Path, "stray.txt"), "written by someone\n")
		what, err := g.Repair(ctx, w, now)
		if err != nil || !strings.Contains(what, "moved it to") || g.Check(ctx, w) != nil {
			t.Fatalf("repair: %q %v", what, err)
		}
		if read(t, w.Path+".moved-20261129T000000Z/stray.txt") != "written by someone\n" {
			t.Fatal("the stray directory was not kept aside")
		}
	})
	t.Run("renamed branch", func(t *testing.T) {
		repo := newRepo(t)
		w := newWorkspace(t, g, repo)
		write(t, filepath.Join(w.Path, "wip.txt"), "uncommitted\n")
		git(t, w.Path, "branch", "-m", "my-feature")
		what, err := g.Repair(ctx, w, now)
		if err != nil || !strings.Contains(what, "renamed branch my-feature back") || g.Check(ctx, w) != nil ||
			read(t, filepath.Join(w.Path, "wip.txt")) != "uncommitted\n" {
			t.Fatalf("repair: %q %v", what, err)
		}
	})
	t.Run("branch gone", func(t *testing.T) {
		repo := newRepo(t)
		w := newWorkspace(t, g, repo)
		if _, err := g.Close(ctx, w, "lead/w1"); err != nil {
			t.Fatal(err)
		}
		git(t, repo, "branch", "-D", w.Branch)
		if _, err := g.Repair(ctx, w, now); err == nil || !strings.Contains(err.Error(), "branch "+w.Branch+" is gone") {
			t.Fatalf("repair without a branch: %v", err)
		}
	})
}

// TestCreateAdoptsWhatACrashLeft: a create cut off after git made the
// worktree (its files partly checked out) is finished by creating again;
// one cut off after the branch but before the directory too.
func TestCreateAdoptsWhatACrashLeft(t *testing.T) {
	g := Git{}
	ctx := context.Background()
	repo := newRepo(t)
	w := newWorkspace(t, g, repo)
	os.Remove(filepath.Join(w.Path, "README.md")) // a checkout cut short
	if err := g.Create(ctx, w, nil); err != nil {
		t.Fatal(err)
	}
	if read(t, filepath.Join(w.Path, "README.md")) != "hello\n" {
		t.Fatal("the adopted worktree was not checked out again")
	}
	if err := os.RemoveAll(w.Path); err != nil {
		t.Fatal(err)
	}
	if err := g.Create(ctx, w, nil); err != nil || g.Check(ctx, w) != nil {
		t.Fatalf("create with the branch left alone: %v", err)
	}
}

// TestCopyStaysInside: copy entries must resolve inside the repository
// and be small regular files.
func TestCopyStaysInside(t *testing.T) {
	repo := newRepo(t)
	outside := filepath.Join(filepath.Dir(repo), "outside.txt")
	write(t, outside, "secret\n")
	if err := os.Symlink(outside, filepath.Join(repo, "link.txt")); err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(repo, "big.bin"), strings.Repeat("x", CopyMax+1))
	dst := t.TempDir()
	for _, bad := range []string{"../outside.txt", "/etc/passwd", "link.txt", "big.bin"} {
		if err := CopyFiles(repo, dst, []string{bad}); !errors.Is(err, ErrBadCopy) {
			t.Errorf("copy %q: %v", bad, err)
		}
	}
	if err := CopyFiles(repo, dst, []string{".env", "missing.txt", ".env:symlink"}); err != nil {
		t.Fatal(err)
	}
	if read(t, filepath.Join(dst, ".env")) != "SECRET=1\n" {
		t.Fatal(".env was not copied")
	}
}

// TestRestoreMovesTheBranchBack: an attempt that committed in its
// worktree is rolled back to the head of the snapshot; its commit is kept
// under InterruptedRef, and the index follows the head.
func TestRestoreMovesTheBranchBack(t *testing.T) {
	g := Git{}
	repo := newRepo(t)
	w := newWorkspace(t, g, repo)
	ctx := context.Background()
	head := git(t, w.Path, "rev-parse", "HEAD")
	start, err := g.Snapshot(ctx, w, "start", "")
	if err != nil {
		t.Fatal(err)
	}
	write(t, filepath.Join(w.Path, "feature.go"), "package a // feature\n")
	git(t, w.Path, "add", "feature.go")
	git(t, w.Path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "the interrupted attempt's commit")
	attempt := git(t, w.Path, "rev-parse", "HEAD")
	if err := g.Restore(ctx, w, start); err != nil {
		t.Fatal(err)
	}
	if got := git(t, w.Path, "rev-parse", "HEAD"); got != head {
		t.Fatalf("the branch is at %s after the restore, want %s", got, head)
	}
	if got := git(t, repo, "rev-parse", InterruptedRef(w.AgentID)); got != attempt {
		t.Fatal("the interrupted attempt's commit is not kept")
	}
	if st := git(t, w.Path, "status", "--porcelain"); st != "" {
		t.Fatalf("the worktree after the restore: %q, want clean", st)
	}
	if _, err := os.Stat(filepath.Join(w.Path, "feature.go")); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("the attempt's file is still there")
	}
}
