package engine

// The cost of a workspace on a turn (issue 33): the same turn, an inproc
// program that rewrites 10 files of a 10,000-file git repository, run by
// an agent working in the checkout itself ("none") and by one with a
// worktree ("worktree"), whose every turn takes a start and an end
// snapshot, in one run:
//
//	go test -run '^$' -bench 'BenchmarkTurnWorkspace' -benchtime 30x ./engine/
//
// Each reports the p50 and p90 of Send, the daemon's own CPU per turn
// (git's CPU is its children's, reported apart as git_cpu_ms/turn) and the
// git objects a turn adds to the repository.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider/inproc"
)

func BenchmarkTurnWorkspace(b *testing.B) {
	if _, err := exec.LookPath("git"); err != nil {
		b.Fatalf("the workspace benchmark needs git: %v", err)
	}
	for _, mode := range []string{"none", "worktree"} {
		b.Run(mode, func(b *testing.B) { benchWorkspaceTurns(b, mode == "worktree") })
	}
}

func benchWorkspaceTurns(b *testing.B, worktree bool) {
	dir := benchDir(b)
	repo := benchGitRepo(b, filepath.Join(dir, "repo"), 10000)
	prov := inproc.New("inproc", inproc.Options{NativeResume: true})
	round := 0
	prov.Register("edit10", func(_ context.Context, t *inproc.Turn) (string, error) {
		round++
		for i := 0; i < 10; i++ {
			j := (round*10 + i) * 97 % 10000
			p := filepath.Join(t.Cwd, fmt.Sprintf("d%02d", j%100), fmt.Sprintf("f%05d.txt", j))
			if err := os.WriteFile(p, []byte(fmt.Sprintf("changed in round %d\n", round)), 0o644); err != nil {
				return "", err
			}
		}
		return "edited", nil
	})
	c := benchCore(b, filepath.Join(dir, "home"), faultfs.OS{}, prov, 4, true)
	spec := CreateSpec{Name: "coder", Provider: "inproc", Model: "edit10", Cwd: repo}
	if worktree {
		spec.Workspace = &WorkspaceRequest{Repo: repo}
	}
	ctx := context.Background()
	id, err := c.CreateAgent(ctx, spec)
	if err != nil {
		b.Fatalf("creating the agent: %v", err)
	}
	send := func() time.Duration {
		t0 := time.Now()
		res, err := c.Send(ctx, id, "edit", "", "", nil)
		if err != nil || res.Err != nil || res.Response != "edited" {
			b.Fatalf("Send: response %q, turn error %v, error %v", res.Response, res.Err, err)
		}
		return time.Since(t0)
	}
	send() // warm-up: the private index is built on the first snapshot
	objs0 := looseObjects(b, repo)
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	cpu0, git0 := cpuTime(), childCPU()
	for i := 0; i < b.N; i++ {
		lat = append(lat, send())
	}
	cpu, git := cpuTime()-cpu0, childCPU()-git0
	b.StopTimer()
	b.ReportMetric(ms(percentile(lat, 50)), "p50_ms")
	b.ReportMetric(ms(percentile(lat, 90)), "p90_ms")
	b.ReportMetric(ms(cpu)/float64(b.N), "cpu_ms/turn")
	b.ReportMetric(ms(git)/float64(b.N), "git_cpu_ms/turn")
	b.ReportMetric(float64(looseObjects(b, repo)-objs0)/float64(b.N), "objects/turn")
}

// benchGitRepo makes a repository of n small committed files at dir.
func benchGitRepo(b *testing.B, dir string, n int) string {
	b.Helper()
	for i := 0; i < n; i++ {
		p := filepath.Join(dir, fmt.Sprintf("d%02d", i%100), fmt.Sprintf("f%05d.txt", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(fmt.Sprintf("file %d\n", i)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	benchGit(b, dir, "init", "-q", "-b", "main")
	benchGit(b, dir, "add", "-A")
	benchGit(b, dir, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "files")
	return dir
}

func benchGit(b *testing.B, dir string, args ...string) string {
	b.Helper()
	out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput()
	if err != nil {
		b.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// looseObjects is the repository's count of loose objects.
func looseObjects(b *testing.B, repo string) int {
	for _, line := range strings.Split(benchGit(b, repo, "count-objects", "-v"), "\n") {
		if v, ok := strings.CutPrefix(line, "count: "); ok {
			n, _ := strconv.Atoi(v)
			return n
		}
	}
	b.Fatal("git count-objects printed no count")
	return 0
}

// childCPU is the user+system CPU time of this process's waited-for
// children (git).
func childCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
