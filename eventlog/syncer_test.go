package eventlog

import (
	"errors"
	"fmt"
	"io/fs"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/warren-dev/warren/faultfs"
)

// syncerPaths are the logs the Syncer tests share a Syncer between.
func syncerPaths(n int) []string {
	paths := make([]string, n)
	for i := range paths {
		paths[i] = fmt.Sprintf("home/agents/s%d/events.jsonl", i)
	}
	return paths
}

// TestSyncerCrashAcrossLogs cuts power at every mutating op while
// concurrent writers append to four logs sharing a Syncer, and checks each
// log against its own model: acked ⊆ recovered ⊆ acked ∪ in flight, as a
// gap-free prefix, batches all or none. A shared flush (syncfs) standing
// in for the fsyncs of several logs must make each of them durable exactly
// as its own fsync would.
func TestSyncerCrashAcrossLogs(t *testing.T) {
	paths := syncerPaths(4)
	reps := 1
	if longRun() {
		reps = 10
	}
	run := func(m *faultfs.Mem) ([]*model, *Syncer) { return syncerWorkload(m, paths) }
	m := faultfs.NewMem()
	homeExists(t, m)
	base := m.MutatingOps()
	_, sy := run(m)
	total := m.MutatingOps() - base
	shared := 0 // runs in which one flush stood for the fsyncs of several files
	for rep := 0; rep < reps; rep++ {
		for k := 1; k <= total+1; k++ {
			for _, r := range []rebootMode{allReboots[0], allReboots[3], allReboots[4]} {
				m := faultfs.NewMem()
				homeExists(t, m)
				m.CrashAt(k)
				mods, sy := run(m)
				if flushes, asked := sy.Stats(); asked > flushes {
					shared++
				}
				m.Crash()
				m.Reboot(r.opts(uint64(rep*1000 + k)))
				for i, mod := range mods {
					t.Run(fmt.Sprintf("rep=%d/k=%d/%s/log=%d", rep, k, r.name, i), func(t *testing.T) { mod.check(t, m) })
				}
			}
		}
	}
	flushes, asked := sy.Stats()
	t.Logf("uncrashed run: %d ops, %d flushes for %d fsyncs; %d crashed runs shared a flush between files", total, flushes, asked, shared)
	if shared == 0 {
		t.Fatal("no run shared a flush between files: the test did not exercise a shared syncfs")
	}
}

// homeExists makes home/agents and its ancestors, durably, before the
// crash is armed: the daemon's home exists, and every start fsyncs it and
// its ancestors (only a log's own directory and its parent are the log's
// to make durable).
func homeExists(t testing.TB, m *faultfs.Mem) {
	t.Helper()
	if err := m.MkdirAll("home/agents", 0o700); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"home", "/"} {
		if err := m.SyncDir(d); err != nil {
			t.Fatal(err)
		}
	}
}

// syncerWorkload runs two concurrent writers on each of paths (three
// appends each; the first log's first writer as one batch), all logs
// sharing one Syncer, and returns the models and the Syncer. A log whose
// Open fails (a crash, a fault) is left out.
func syncerWorkload(m *faultfs.Mem, paths []string) ([]*model, *Syncer) {
	sy := NewSyncer(m)
	mods := make([]*model, len(paths))
	var wg sync.WaitGroup
	for i, p := range paths {
		mods[i] = newModel()
		mods[i].path = p
		l, err := Open(m, p, Options{PendingIdle: -1, Syncer: sy})
		if err != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer l.Close()
			mods[i].group(l, 2, 3, i == 0)
		}()
	}
	wg.Wait()
	return mods, sy
}

// TestSyncerFaultAcrossLogs fails the n-th syncfs, for every n, while
// concurrent writers append to four logs sharing a Syncer, then cuts power,
// and checks each log against its model: a failed flush loses no
// acknowledged entry of any log, in its round or not.
func TestSyncerFaultAcrossLogs(t *testing.T) {
	paths := syncerPaths(4)
	m := faultfs.NewMem()
	homeExists(t, m)
	_, sy := syncerWorkload(m, paths)
	total, _ := sy.Stats()
	for n := 1; n <= int(total); n++ {
		for _, r := range []rebootMode{allReboots[0], allReboots[3]} {
			m := faultfs.NewMem()
			homeExists(t, m)
			m.Inject(faultfs.Rule{Kind: faultfs.OpSyncFS, Nth: n})
			mods, _ := syncerWorkload(m, paths)
			m.Crash()
			m.Reboot(r.opts(uint64(n)))
			for i, mod := range mods {
				t.Run(fmt.Sprintf("n=%d/%s/log=%d", n, r.name, i), func(t *testing.T) { mod.check(t, m) })
			}
		}
	}
}

// gateFS holds the first flush (a syncfs, or a Sync of a file whose name
// ends in hold) until release is closed, signalling held when it starts
// waiting; it can also refuse OpenFS as an old kernel does. syncfs counts
// the syncfs flushes (or, when unsupported, the OpenFS calls).
type gateFS struct {
	faultfs.FS
	hold        string
	held        chan struct{}
	release     chan struct{}
	once        sync.Once
	unsupported bool
	syncfs      int
	mu          sync.Mutex
}

func (g *gateFS) OpenFile(name string, flag int, perm fs.FileMode) (faultfs.File, error) {
	f, err := g.FS.OpenFile(name, flag, perm)
	if err != nil || g.hold == "" || !strings.HasSuffix(name, g.hold) {
		return f, err
	}
	return &gateFile{File: f, g: g}, nil
}

func (g *gateFS) OpenFS(name string) (faultfs.FileSystem, error) {
	if g.unsupported {
		g.mu.Lock()
		g.syncfs++
		g.mu.Unlock()
		return nil, fmt.Errorf("test: %w", errors.ErrUnsupported)
	}
	h, err := g.FS.OpenFS(name)
	if err != nil {
		return nil, err
	}
	return gateFileSystem{FileSystem: h, g: g}, nil
}

type gateFileSystem struct {
	faultfs.FileSystem
	g *gateFS
}

func (h gateFileSystem) Sync() error {
	h.g.mu.Lock()
	h.g.syncfs++
	h.g.mu.Unlock()
	h.g.gate()
	return h.FileSystem.Sync()
}

type gateFile struct {
	faultfs.File
	g *gateFS
}

func (f *gateFile) Sync() error {
	f.g.gate()
	return f.File.Sync()
}

// gate holds the first caller until release.
func (g *gateFS) gate() {
	if g.held == nil {
		return
	}
	g.once.Do(func() {
		close(g.held)
		<-g.release
	})
}

// queued is the number of fsyncs waiting for the next flush of the lane
// of dev.
func (s *Syncer) queued(dev uint64) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ln := s.lanes[dev]; ln != nil && ln.next != nil {
		return len(ln.next.files)
	}
	return 0
}

// sharedRound holds a flush of the first log's pending file, lets one
// append on each of the other logs queue behind it, then releases it. It
// returns the appends' errors, the logs and the Syncer.
func sharedRound(t *testing.T, g *gateFS, n int) ([]error, []*Log, *Syncer) {
	t.Helper()
	sy := NewSyncer(g)
	paths := syncerPaths(n)
	g.hold, g.held, g.release = "s0/events.pending", make(chan struct{}), make(chan struct{})
	logs := make([]*Log, n)
	for i, p := range paths {
		logs[i] = mustOpenOpts(t, g, p, Options{PendingIdle: -1, HealBackoff: -1, Syncer: sy})
		t.Cleanup(func() { logs[i].Close() })
	}
	errs := make([]error, n)
	var wg sync.WaitGroup
	appendOn := func(i int) {
		defer wg.Done()
		_, errs[i] = logs[i].Append("test.event", map[string]any{"id": i})
	}
	wg.Add(1)
	go appendOn(0)
	<-g.held
	for i := 1; i < n; i++ {
		wg.Add(1)
		go appendOn(i)
	}
	for sy.queued(0) < n-1 {
		<-syncerTick() // the appends are on their way into the round
	}
	close(g.release)
	wg.Wait()
	return errs, logs, sy
}

// syncerTick yields to the goroutines being waited for.
func syncerTick() <-chan struct{} {
	c := make(chan struct{})
	go close(c)
	return c
}

// TestSyncerSharesOneFlush: the fsyncs three logs ask for while a fourth
// log's flush runs are done by one syncfs, and each entry is durable after
// a power loss.
func TestSyncerSharesOneFlush(t *testing.T) {
	m := faultfs.NewMem()
	g := &gateFS{FS: m}
	errs, logs, sy := sharedRound(t, g, 4)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("append on log %d: %v", i, err)
		}
	}
	flushes, asked := sy.Stats()
	if asked != 8 || flushes >= asked {
		t.Fatalf("%d flushes for %d fsyncs; want 8 fsyncs (pending and log of 4 appends) in fewer flushes", flushes, asked)
	}
	cutPower(m, logs...)
	for i, p := range syncerPaths(4) {
		es, err := ReadAll(m, p)
		if err != nil || len(es) != 1 {
			t.Fatalf("log %d after power loss: %d entries, %v; want the acknowledged one", i, len(es), err)
		}
	}
}

// TestSyncerFailedFlushFailsEveryLog: a syncfs that fails fails every
// fsync it stood for; none of those appends is acknowledged, each log is
// poisoned, and a later append reopens it and goes on.
func TestSyncerFailedFlushFailsEveryLog(t *testing.T) {
	m := faultfs.NewMem()
	// The first syncfs is log 0's (held while the others queue); the
	// second stands for the three queued logs.
	m.Inject(faultfs.Rule{Kind: faultfs.OpSyncFS, Nth: 2})
	g := &gateFS{FS: m}
	errs, logs, _ := sharedRound(t, g, 4)
	for i := 1; i < 4; i++ {
		if !errors.Is(errs[i], faultfs.ErrInjected) || !errors.Is(errs[i], ErrPoisoned) {
			t.Fatalf("append on log %d: %v; want the injected syncfs failure, poisoned", i, errs[i])
		}
	}
	for i, l := range logs {
		// The reopen's own fsync may report the dropped write once more
		// (as a new descriptor on Linux does): the heal then fails once,
		// and the next append heals.
		_, err := l.Append("test.event", map[string]any{"id": 10 + i})
		if err != nil {
			_, err = l.Append("test.event", map[string]any{"id": 10 + i})
		}
		if err != nil {
			t.Fatalf("append on log %d after the failed flush: %v", i, err)
		}
	}
	cutPower(m, logs...)
	for i, p := range syncerPaths(4) {
		es, err := ReadAll(m, p)
		if err != nil {
			t.Fatal(err)
		}
		if len(es) == 0 {
			t.Fatalf("log %d is empty after power loss; want the append made after the heal", i)
		}
		last := es[len(es)-1]
		if !strings.Contains(string(last.Data), fmt.Sprint(10+i)) {
			t.Fatalf("log %d after power loss ends with %s; want the append made after the heal", i, last.Data)
		}
	}
}

// TestSyncerFileByFile: where OpenFS is unsupported, a round's files are
// synced one by one, every append succeeds, and OpenFS is not asked again.
func TestSyncerFileByFile(t *testing.T) {
	m := faultfs.NewMem()
	g := &gateFS{FS: m, unsupported: true}
	errs, _, sy := sharedRound(t, g, 4)
	for i, err := range errs {
		if err != nil {
			t.Fatalf("append on log %d: %v", i, err)
		}
	}
	flushes, asked := sy.Stats()
	if flushes != asked {
		t.Fatalf("%d flushes for %d fsyncs; want one per file", flushes, asked)
	}
	if g.syncfs != 1 {
		t.Fatalf("OpenFS asked %d times; want once (the lane then syncs file by file)", g.syncfs)
	}
}

// writeGateFS holds the second write to a file whose name ends in hold,
// after it is done and before the caller can sync it, until release.
type writeGateFS struct {
	faultfs.FS
	hold    string
	held    chan struct{}
	release chan struct{}
	writes  atomic.Int32
}

func (g *writeGateFS) OpenFile(name string, flag int, perm fs.FileMode) (faultfs.File, error) {
	f, err := g.FS.OpenFile(name, flag, perm)
	if err != nil || !strings.HasSuffix(name, g.hold) {
		return f, err
	}
	return &writeGateFile{File: f, g: g}, nil
}

type writeGateFile struct {
	faultfs.File
	g *writeGateFS
}

func (f *writeGateFile) WriteAt(p []byte, off int64) (int, error) {
	n, err := f.File.WriteAt(p, off)
	if f.g.writes.Add(1) == 2 {
		close(f.g.held)
		<-f.g.release
	}
	return n, err
}

// TestSyncerFailedFlushFailsALogOutsideItsRound: log A has written a group
// to its pending file and not yet asked for its fsync when log B's syncfs
// fails, dropping A's unsynced data with B's. A's later fsync must fail too
// (it was not in the failed round, and the kernel reports a syncfs failure
// once): the Syncer's failure count and the file's own report both say so,
// and A acknowledges nothing that a power loss then takes away.
func TestSyncerFailedFlushFailsALogOutsideItsRound(t *testing.T) {
	m := faultfs.NewMem()
	homeExists(t, m)
	g := &writeGateFS{FS: m, hold: "s0/events.pending", held: make(chan struct{}), release: make(chan struct{})}
	sy := NewSyncer(g)
	paths := syncerPaths(2)
	a := mustOpenOpts(t, g, paths[0], Options{PendingIdle: -1, HealBackoff: -1, Syncer: sy})
	defer a.Close()
	if _, err := a.Append("test.event", map[string]any{"id": 1}); err != nil {
		t.Fatal(err)
	}
	errA := make(chan error, 1)
	go func() {
		_, err := a.Append("test.event", map[string]any{"id": 2})
		errA <- err
	}()
	<-g.held // A's second group is written, unsynced
	m.Inject(faultfs.Rule{Kind: faultfs.OpSyncFS})
	b := mustOpenOpts(t, g, paths[1], Options{PendingIdle: -1, HealBackoff: -1, Syncer: sy})
	defer b.Close()
	if _, err := b.Append("test.event", map[string]any{"id": 1}); !errors.Is(err, faultfs.ErrInjected) {
		t.Fatalf("B's append: %v; want the injected syncfs failure", err)
	}
	close(g.release)
	if err := <-errA; err == nil {
		t.Fatal("A acknowledged a group that the failed syncfs dropped")
	}
	cutPower(m)
	es, err := ReadAll(m, paths[0])
	if err != nil || len(es) != 1 {
		t.Fatalf("A after power loss: %d entries, %v; want the one acknowledged", len(es), err)
	}
}

// cutPower closes logs (removing their pending files, as a clean close
// does) and then cuts the power: only what was made durable remains.
func cutPower(m *faultfs.Mem, logs ...*Log) {
	for _, l := range logs {
		l.Close()
	}
	m.Crash()
	m.Reboot(faultfs.RebootOptions{Mode: faultfs.PowerLoss})
}
