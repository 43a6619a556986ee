package engine

// Shared helpers of the daemon benchmarks (bench_*_test.go): a directory on
// the real disk, a faultfs.FS that counts fsyncs, a raw fsync latency probe
// and percentile arithmetic. Nothing here runs unless a benchmark does.

import (
	"context"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/config"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/store"
)

// tmpfsMagic is Linux's TMPFS_MAGIC (statfs f_type).
const tmpfsMagic = 0x01021994

// benchDir returns a fresh directory on a real disk, removed when b ends.
// WARREN_BENCH_DIR chooses the parent; otherwise the system temp dir is used
// unless it is a tmpfs (fsync would be free there), in which case the
// package directory is used. The benchmark fails if the chosen place is a
// tmpfs, because the figures would be meaningless.
func benchDir(b testing.TB) string {
	b.Helper()
	parent := os.Getenv("WARREN_BENCH_DIR")
	if parent == "" {
		parent = os.TempDir()
		if isTmpfs(parent) {
			parent = "."
		}
	}
	if isTmpfs(parent) {
		b.Fatalf("benchmark directory %s is on a tmpfs, where fsync costs nothing; set WARREN_BENCH_DIR to a directory on a real disk", parent)
	}
	dir, err := os.MkdirTemp(parent, ".warren-bench-")
	if err != nil {
		b.Fatalf("creating a benchmark directory under %s: %v (set WARREN_BENCH_DIR to a writable directory on a real disk)", parent, err)
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

func isTmpfs(dir string) bool {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return false
	}
	return int64(st.Type) == tmpfsMagic
}

// countingFS wraps a faultfs.FS and counts File.Sync, SyncDir and FileSystem.Sync
// calls.
type countingFS struct {
	faultfs.FS
	syncs    atomic.Int64
	dirSyncs atomic.Int64

	mu     sync.Mutex
	byKind map[string]int64 // sync counts by kind of file ("dir" for SyncDir)
}

func newCountingFS(inner faultfs.FS) *countingFS {
	return &countingFS{FS: inner, byKind: map[string]int64{}}
}

// syncKind names the kind of file a sync was for: its base name without a
// temp suffix ("session.json", "events.jsonl", ...), or "dir".
func syncKind(name string) string {
	base := filepath.Base(name)
	if i := strings.Index(base, ".tmp-"); i >= 0 {
		base = base[:i]
	}
	return base
}

func (c *countingFS) count(kind string) {
	c.mu.Lock()
	c.byKind[kind]++
	c.mu.Unlock()
}

// Kinds returns a copy of the sync counts by kind.
func (c *countingFS) Kinds() map[string]int64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return maps.Clone(c.byKind)
}

// reportKinds reports, per kind, the syncs since before divided by n.
func reportKinds(b *testing.B, before, after map[string]int64, n int, unit string) {
	for k, v := range after {
		if d := v - before[k]; d > 0 {
			b.ReportMetric(float64(d)/float64(n), "sync_"+k+"/"+unit)
		}
	}
}

// Fsyncs is the number of file, directory and filesystem syncs so far.
func (c *countingFS) Fsyncs() int64 { return c.syncs.Load() + c.dirSyncs.Load() }

func (c *countingFS) OpenFile(name string, flag int, perm fs.FileMode) (faultfs.File, error) {
	f, err := c.FS.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &countingFile{File: f, c: c, kind: syncKind(name)}, nil
}

// OpenFS wraps the filesystem handle: each Sync (a syncfs) counts as one
// flush, of kind "syncfs".
func (c *countingFS) OpenFS(name string) (faultfs.FileSystem, error) {
	h, err := c.FS.OpenFS(name)
	if err != nil {
		return nil, err
	}
	return countingFileSystem{FileSystem: h, c: c}, nil
}

type countingFileSystem struct {
	faultfs.FileSystem
	c *countingFS
}

func (h countingFileSystem) Sync() error {
	h.c.dirSyncs.Add(1)
	h.c.count("syncfs")
	return h.FileSystem.Sync()
}

func (c *countingFS) SyncDir(name string) error {
	c.dirSyncs.Add(1)
	c.count("dir")
	return c.FS.SyncDir(name)
}

type countingFile struct {
	faultfs.File
	c    *countingFS
	kind string
}

func (f *countingFile) Sync() error {
	f.c.syncs.Add(1)
	f.c.count(f.kind)
	return f.File.Sync()
}

// fsyncP50 measures the raw latency of appending a small line to a file and
// fsyncing it, n times, in dir; it returns the median and the 99th
// percentile.
func fsyncP50(b testing.TB, dir string, n int) (p50, p99 time.Duration) {
	b.Helper()
	f, err := os.OpenFile(filepath.Join(dir, "fsync-probe.jsonl"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		b.Fatalf("fsync probe: %v", err)
	}
	defer f.Close()
	line := []byte(`{"seq":1,"ts":"2026-01-01T00:00:00.000Z","event":"turn.start","data":{"run_id":"0123456789abcdef0123456789abcdef"},"crc":"00000000"}` + "\n")
	lat := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if _, err := f.Write(line); err != nil {
			b.Fatalf("fsync probe write: %v", err)
		}
		if err := f.Sync(); err != nil {
			b.Fatalf("fsync probe sync: %v", err)
		}
		lat = append(lat, time.Since(t0))
	}
	return percentile(lat, 50), percentile(lat, 99)
}

// percentile returns the p-th percentile (nearest rank) of d; d is sorted in
// place.
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	slices.Sort(d)
	k := int(float64(len(d))*p/100+0.5) - 1
	k = max(0, min(k, len(d)-1))
	return d[k]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// cpuTime is the user+system CPU time this process has used. The machine
// may be shared (other test runs), so benchmarks report CPU time next to
// wall time: CPU time does not grow when other processes take the cores.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// benchCore builds and recovers a Core on the real disk (through counting
// FS) with the inproc provider; pool sets the "default" pool size.
func benchCore(b testing.TB, home string, fsys faultfs.FS, prov *inproc.Provider, pool int, noWake bool) *Core {
	b.Helper()
	return benchCoreOn(b, home, fsys, nil, prov, pool, noWake)
}

// benchCoreOn is benchCore on st (nil: the engine's own local store, whose
// logs fsync file by file).
func benchCoreOn(b testing.TB, home string, fsys faultfs.FS, st store.Store, prov *inproc.Provider, pool int, noWake bool) *Core {
	b.Helper()
	cfg := config.Default()
	if pool > 0 {
		cfg.Pools["default"] = pool
	}
	c, err := NewCore(context.Background(), withDefaults(CoreOptions{
		FS: fsys, Home: home, Store: st, Providers: map[string]provider.Provider{"inproc": prov},
		DefaultProvider: "inproc", DefaultModel: "echo", Config: cfg, NoWake: noWake,
		Logger: hclog.NewNullLogger(),
	}))
	if err != nil {
		b.Fatalf("NewCore: %v", err)
	}
	if _, err := c.Recover(context.Background()); err != nil {
		b.Fatalf("Recover: %v", err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			b.Errorf("Close: %v", err)
		}
	})
	return c
}

// benchAgents creates n agents named prefix0..prefix<n-1> with model, as
// roots or as children of parent.
func benchAgents(b testing.TB, c *Core, n int, prefix, parent, model string) []string {
	b.Helper()
	ids := make([]string, n)
	for i := range ids {
		id, err := c.CreateAgent(context.Background(), CreateSpec{Name: fmt.Sprintf("%s%d", prefix, i), ParentID: parent, Provider: "inproc", Model: model})
		if err != nil {
			b.Fatalf("creating agent %d: %v", i, err)
		}
		ids[i] = id
	}
	return ids
}
