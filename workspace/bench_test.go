package workspace

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"
)

// benchRepo makes a repository of n small committed files and a
// workspace of it, with a first snapshot taken (the private index warm).
func benchRepo(b testing.TB, n int) (Git, Workspace) {
	b.Helper()
	dir := b.TempDir()
	repo := filepath.Join(dir, "repo")
	for i := 0; i < n; i++ {
		p := filepath.Join(repo, fmt.Sprintf("d%02d", i%100), fmt.Sprintf("f%05d.txt", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(fmt.Sprintf("file %d\n", i)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	gitB(b, repo, "init", "-q", "-b", "main")
	gitB(b, repo, "add", "-A")
	gitB(b, repo, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "files")
	g := Git{}
	ctx := context.Background()
	r, base, err := g.Resolve(ctx, repo, "")
	if err != nil {
		b.Fatal(err)
	}
	id := "0123456789abcdef0123456789abcdef"
	w := Workspace{AgentID: id, Repo: r, Path: filepath.Join(dir, "ws"), Branch: BranchName("bench", id), Base: base}
	if err := g.Create(ctx, w, nil); err != nil {
		b.Fatal(err)
	}
	if _, err := g.Snapshot(ctx, w, "first", ""); err != nil {
		b.Fatal(err)
	}
	return g, w
}

func gitB(b testing.TB, dir string, args ...string) {
	b.Helper()
	if _, err := (Git{}).run(context.Background(), dir, nil, args...); err != nil {
		b.Fatal(err)
	}
}

// selfCPU is the CPU time this process used (user and system), its
// children (git) left out.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// change rewrites 10 of w's files (round k).
func change(b testing.TB, w Workspace, k int) {
	for i := 0; i < 10; i++ {
		j := (k*10 + i) * 97 % 10000
		p := filepath.Join(w.Path, fmt.Sprintf("d%02d", j%100), fmt.Sprintf("f%05d.txt", j))
		if err := os.WriteFile(p, []byte(fmt.Sprintf("changed in round %d\n", k)), 0o644); err != nil {
			b.Fatal(err)
		}
	}
}

// report reports the p50 and p90 of ds, in ms.
func report(b *testing.B, ds []time.Duration) {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	b.ReportMetric(float64(ds[len(ds)/2].Microseconds())/1000, "p50_ms")
	b.ReportMetric(float64(ds[len(ds)*9/10].Microseconds())/1000, "p90_ms")
}

// BenchmarkSnapshot: a snapshot of a 10,000-file workspace in which 10
// files changed since the last one (SPEC 12: the cost a turn pays twice).
// daemon_cpu_ms is the CPU of this process (the daemon's side), git's
// own left out; new_objects counts the objects the snapshot added.
func BenchmarkSnapshot(b *testing.B) {
	g, w := benchRepo(b, 10000)
	ctx := context.Background()
	var ds []time.Duration
	var cpu time.Duration
	objects := func() string {
		out, _ := g.run(ctx, w.Repo, nil, "count-objects")
		return out
	}
	prev := ""
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		change(b, w, i)
		b.StartTimer()
		c0, t0 := selfCPU(), time.Now()
		commit, err := g.Snapshot(ctx, w, "bench", prev)
		if err != nil {
			b.Fatal(err)
		}
		prev = commit
		ds = append(ds, time.Since(t0))
		cpu += selfCPU() - c0
	}
	b.StopTimer()
	report(b, ds)
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "daemon_cpu_ms")
	b.Logf("after %d snapshots: %s", b.N, objects())
}

// BenchmarkRestore: restoring a 10,000-file workspace in which 10 files
// changed to the snapshot before the change.
func BenchmarkRestore(b *testing.B) {
	g, w := benchRepo(b, 10000)
	ctx := context.Background()
	var ds []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		start, err := g.Snapshot(ctx, w, "start", "")
		if err != nil {
			b.Fatal(err)
		}
		change(b, w, i)
		b.StartTimer()
		t0 := time.Now()
		if err := g.Restore(ctx, w, start); err != nil {
			b.Fatal(err)
		}
		ds = append(ds, time.Since(t0))
	}
	b.StopTimer()
	report(b, ds)
}
