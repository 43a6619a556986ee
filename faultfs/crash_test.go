package faultfs

import (
	"errors"
	"io/fs"
	"os"
	"slices"
	"testing"
)

var plOpts = RebootOptions{Mode: PowerLoss}
var pcOpts = RebootOptions{Mode: ProcessCrash}

func TestCreatedFileDisappearsIfDirNotSynced(t *testing.T) {
	m := NewMem()
	mustWrite(t, m, "/f", []byte("data"))
	mustSyncFile(t, m, "/f") // file data synced, directory entry not
	m.Reboot(plOpts)
	wantAbsent(t, m, "/f")
}

func TestCreatedFileSurvivesWithDirSync(t *testing.T) {
	m := NewMem()
	must(t, m.MkdirAll("/d", 0o755))
	must(t, m.SyncDir("/"))
	mustWrite(t, m, "/d/f", []byte("data"))
	mustSyncFile(t, m, "/d/f")
	must(t, m.SyncDir("/d"))
	m.Reboot(plOpts)
	wantContent(t, m, "/d/f", []byte("data"))
}

func TestSyncedEntryWithUnsyncedDataIsEmpty(t *testing.T) {
	m := NewMem()
	mustWrite(t, m, "/f", []byte("data"))
	must(t, m.SyncDir("/"))
	m.Reboot(plOpts)
	wantContent(t, m, "/f", nil)
}

func TestUnsyncedDataLostOnPowerLossKeptOnProcessCrash(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts RebootOptions
		want string
	}{
		{"power loss", plOpts, "synced"},
		{"process crash", pcOpts, "synced+more"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := NewMem()
			f, err := m.OpenFile("/f", os.O_RDWR|os.O_CREATE, 0o644)
			must(t, err)
			must(t, m.SyncDir("/"))
			_, err = f.Write([]byte("synced"))
			must(t, err)
			must(t, f.Sync())
			_, err = f.Write([]byte("+more"))
			must(t, err)
			m.Reboot(tc.opts)
			wantContent(t, m, "/f", []byte(tc.want))
		})
	}
}

func TestUnsyncedDataStillVolatileAfterProcessCrash(t *testing.T) {
	m := NewMem()
	mustWrite(t, m, "/f", []byte("v1"))
	mustSyncFile(t, m, "/f")
	must(t, m.SyncDir("/"))
	mustWrite(t, m, "/f", []byte("version2"))
	m.Reboot(pcOpts)
	wantContent(t, m, "/f", []byte("version2"))
	m.Reboot(plOpts) // the page cache never reached the disk
	wantContent(t, m, "/f", []byte("v1"))
}

func TestUnsyncedTruncateLostOnPowerLoss(t *testing.T) {
	m := NewMem()
	mustWrite(t, m, "/f", []byte("0123456789"))
	mustSyncFile(t, m, "/f")
	must(t, m.SyncDir("/"))
	must(t, m.Truncate("/f", 3))
	m.Reboot(plOpts)
	wantContent(t, m, "/f", []byte("0123456789"))
}

func TestRenameDurableOnlyAfterDirSync(t *testing.T) {
	setup := func(t *testing.T) *Mem {
		m := NewMem()
		mustWrite(t, m, "/old", []byte("old"))
		mustWrite(t, m, "/tmp", []byte("new"))
		mustSyncFile(t, m, "/old")
		mustSyncFile(t, m, "/tmp")
		must(t, m.SyncDir("/"))
		must(t, m.Rename("/tmp", "/old"))
		return m
	}
	t.Run("not synced", func(t *testing.T) {
		m := setup(t)
		m.Reboot(plOpts)
		wantContent(t, m, "/old", []byte("old"))
		wantContent(t, m, "/tmp", []byte("new"))
	})
	t.Run("synced", func(t *testing.T) {
		m := setup(t)
		must(t, m.SyncDir("/"))
		m.Reboot(plOpts)
		wantContent(t, m, "/old", []byte("new"))
		wantAbsent(t, m, "/tmp")
	})
	t.Run("process crash keeps it", func(t *testing.T) {
		m := setup(t)
		m.Reboot(pcOpts)
		wantContent(t, m, "/old", []byte("new"))
		wantAbsent(t, m, "/tmp")
	})
}

func TestRemoveComesBackIfDirNotSynced(t *testing.T) {
	m := NewMem()
	mustWrite(t, m, "/f", []byte("x"))
	mustSyncFile(t, m, "/f")
	must(t, m.SyncDir("/"))
	must(t, m.Remove("/f"))
	m.Reboot(plOpts)
	wantContent(t, m, "/f", []byte("x"))

	must(t, m.Remove("/f"))
	must(t, m.SyncDir("/"))
	m.Reboot(plOpts)
	wantAbsent(t, m, "/f")
}

func TestMkdirDurableOnlyAfterParentSync(t *testing.T) {
	m := NewMem()
	must(t, m.MkdirAll("/a/b", 0o755))
	must(t, m.SyncDir("/a")) // b recorded in a, but a not recorded in /
	m.Reboot(plOpts)
	wantAbsent(t, m, "/a")

	must(t, m.MkdirAll("/a/b", 0o755))
	must(t, m.SyncDir("/"))
	m.Reboot(plOpts)
	wantAbsent(t, m, "/a/b") // a survived, but its entry b was never synced
	if fi, err := m.Stat("/a"); err != nil || !fi.IsDir() {
		t.Fatalf("Stat(/a) = %v, %v; want a directory", fi, err)
	}
}

// crashedCalls runs every FS and File operation and returns their errors.
func crashedCalls(m *Mem, f File) map[string]error {
	buf := make([]byte, 4)
	res := map[string]error{}
	_, res["OpenFile create"] = m.OpenFile("/n", os.O_CREATE|os.O_WRONLY, 0o644)
	_, res["OpenFile read"] = m.OpenFile("/f", os.O_RDONLY, 0)
	res["Rename"] = m.Rename("/f", "/g")
	res["Remove"] = m.Remove("/f")
	res["MkdirAll"] = m.MkdirAll("/d", 0o755)
	_, res["ReadDir"] = m.ReadDir("/")
	_, res["Stat"] = m.Stat("/f")
	res["Truncate"] = m.Truncate("/f", 0)
	res["SyncDir"] = m.SyncDir("/")
	_, res["File.Write"] = f.Write([]byte("x"))
	_, res["File.Read"] = f.Read(buf)
	_, res["File.ReadAt"] = f.ReadAt(buf, 0)
	res["File.Sync"] = f.Sync()
	res["File.Truncate"] = f.Truncate(0)
	_, res["File.Stat"] = f.Stat()
	res["File.Close"] = f.Close()
	return res
}

func TestCrashFailsEveryOpUntilReboot(t *testing.T) {
	m := NewMem()
	mustWrite(t, m, "/f", []byte("data"))
	f, err := m.OpenFile("/f", os.O_RDWR, 0)
	must(t, err)
	m.Crash()
	if !m.Crashed() {
		t.Fatal("Crashed() = false after Crash")
	}
	before := m.MutatingOps()
	for name, err := range crashedCalls(m, f) {
		if !errors.Is(err, ErrCrashed) {
			t.Errorf("%s after crash: %v, want ErrCrashed", name, err)
		}
	}
	if got := m.MutatingOps(); got != before {
		t.Errorf("ops on a crashed FS were counted: %d -> %d", before, got)
	}

	m.Reboot(pcOpts)
	if m.Crashed() {
		t.Fatal("Crashed() = true after Reboot")
	}
	// The FS works again; the old File stays dead.
	wantContent(t, m, "/f", []byte("data"))
	if _, err := f.Write([]byte("x")); !errors.Is(err, ErrCrashed) {
		t.Fatalf("old File after Reboot: %v, want ErrCrashed", err)
	}
}

func TestCrashAtKthOpDoesNotTakeEffect(t *testing.T) {
	m := NewMem()
	must(t, m.MkdirAll("/d", 0o755))
	mustWrite(t, m, "/d/a", []byte("a"))
	m.CrashAt(2)
	must(t, m.Rename("/d/a", "/d/b")) // op 1 of the countdown
	err := m.Remove("/d/b")           // op 2: crashes
	if !errors.Is(err, ErrCrashed) {
		t.Fatalf("k-th op returned %v, want ErrCrashed", err)
	}
	if !m.Crashed() {
		t.Fatal("not crashed after the k-th op")
	}
	m.Reboot(pcOpts)
	wantContent(t, m, "/d/b", []byte("a")) // the remove did not happen
	// The crash is one-shot.
	must(t, m.Remove("/d/b"))
}

func TestCrashAtZeroDisarms(t *testing.T) {
	m := NewMem()
	m.CrashAt(1)
	m.CrashAt(0)
	must(t, m.MkdirAll("/d", 0o755))
	if m.Crashed() {
		t.Fatal("crashed after CrashAt(0)")
	}
}

// workload is a fixed sequence of operations touching every mutating kind.
func workload(fsys FS) error {
	if err := fsys.MkdirAll("/w/x", 0o755); err != nil {
		return err
	}
	f, err := fsys.OpenFile("/w/x/f", os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	defer f.Close()
	steps := []func() error{
		func() error { _, err := f.Write([]byte("hello")); return err },
		f.Sync,
		func() error { return f.Truncate(2) },
		func() error { return fsys.SyncDir("/w/x") },
		func() error { _, err := fsys.Stat("/w/x/f"); return err }, // a read: not counted
		func() error { return fsys.Rename("/w/x/f", "/w/x/g") },
		func() error { return fsys.Truncate("/w/x/g", 1) },
		func() error { return fsys.Remove("/w/x/g") },
		func() error { return fsys.SyncDir("/w") },
	}
	for _, s := range steps {
		if err := s(); err != nil {
			return err
		}
	}
	return nil
}

func TestOpCountingExactAndDeterministic(t *testing.T) {
	want := []Op{
		{Kind: OpMkdir, Path: "/w/x"},
		{Kind: OpCreate, Path: "/w/x/f"},
		{Kind: OpWrite, Path: "/w/x/f"},
		{Kind: OpSync, Path: "/w/x/f"},
		{Kind: OpTruncate, Path: "/w/x/f"},
		{Kind: OpSyncDir, Path: "/w/x"},
		{Kind: OpRename, Path: "/w/x/f", To: "/w/x/g"},
		{Kind: OpTruncate, Path: "/w/x/g"},
		{Kind: OpRemove, Path: "/w/x/g"},
		{Kind: OpSyncDir, Path: "/w"},
	}
	for run := 0; run < 2; run++ {
		m := NewMem()
		must(t, workload(m))
		if got := m.Ops(); !slices.Equal(got, want) {
			t.Fatalf("run %d: trace\n%v\nwant\n%v", run, got, want)
		}
		if m.MutatingOps() != len(want) {
			t.Fatalf("MutatingOps = %d, want %d", m.MutatingOps(), len(want))
		}
	}
	// Crashing at each k stops the workload exactly at op k.
	for k := 1; k <= len(want); k++ {
		m := NewMem()
		m.CrashAt(k)
		if err := workload(m); !errors.Is(err, ErrCrashed) {
			t.Fatalf("k=%d: workload error %v, want ErrCrashed", k, err)
		}
		if got := m.Ops(); !slices.Equal(got, want[:k]) {
			t.Fatalf("k=%d: trace %v, want %v", k, got, want[:k])
		}
	}
	m := NewMem()
	m.CrashAt(len(want) + 1)
	must(t, workload(m))
	if m.Crashed() {
		t.Fatal("crashed beyond the last op")
	}
}

func TestOpenWithoutCreateIsNotMutating(t *testing.T) {
	m := NewMem()
	mustWrite(t, m, "/f", nil)
	n := m.MutatingOps()
	f, err := m.OpenFile("/f", os.O_RDWR, 0)
	must(t, err)
	_, _ = m.ReadDir("/")
	_, _ = m.Stat("/f")
	_, _ = f.Read(make([]byte, 1))
	must(t, f.Close())
	if m.MutatingOps() != n {
		t.Fatalf("reads counted as mutating: %d -> %d", n, m.MutatingOps())
	}
	// O_TRUNC alone is mutating.
	f, err = m.OpenFile("/f", os.O_WRONLY|os.O_TRUNC, 0)
	must(t, err)
	must(t, f.Close())
	if got := m.Ops()[m.MutatingOps()-1]; got != (Op{Kind: OpCreate, Path: "/f"}) {
		t.Fatalf("O_TRUNC traced as %v", got)
	}
}

func TestDirectoryFileSyncSyncsEntries(t *testing.T) {
	m := NewMem()
	mustWrite(t, m, "/f", nil)
	d, err := m.OpenFile("/", os.O_RDONLY, 0)
	must(t, err)
	must(t, d.Sync())
	must(t, d.Close())
	if got := m.Ops()[len(m.Ops())-1]; got.Kind != OpSyncDir {
		t.Fatalf("dir File.Sync traced as %v, want syncdir", got)
	}
	m.Reboot(plOpts)
	if _, err := m.Stat("/f"); err != nil {
		t.Fatalf("entry synced through a directory File lost: %v", err)
	}
	var pe *fs.PathError
	if _, err := d.Read(nil); !errors.As(err, &pe) {
		t.Fatalf("dead dir File Read: %v", err)
	}
}

func TestCrossDirectoryRenameNeedsBothDirSyncs(t *testing.T) {
	setup := func(t *testing.T) *Mem {
		m := NewMem()
		must(t, m.MkdirAll("/a", 0o755))
		must(t, m.MkdirAll("/b", 0o755))
		must(t, m.SyncDir("/"))
		mustWrite(t, m, "/a/f", []byte("x"))
		mustSyncFile(t, m, "/a/f")
		must(t, m.SyncDir("/a"))
		must(t, m.Rename("/a/f", "/b/f"))
		return m
	}
	t.Run("neither synced", func(t *testing.T) {
		m := setup(t)
		m.Reboot(plOpts)
		wantContent(t, m, "/a/f", []byte("x"))
		wantAbsent(t, m, "/b/f")
	})
	t.Run("both synced", func(t *testing.T) {
		m := setup(t)
		must(t, m.SyncDir("/a"))
		must(t, m.SyncDir("/b"))
		m.Reboot(plOpts)
		wantAbsent(t, m, "/a/f")
		wantContent(t, m, "/b/f", []byte("x"))
	})
}

func TestUnsyncedEntriesSurviveWhenAsked(t *testing.T) {
	m := NewMem()
	mustWrite(t, m, "/old", []byte("old"))
	mustSyncFile(t, m, "/old")
	mustWrite(t, m, "/gone", []byte("gone"))
	must(t, m.SyncDir("/"))
	// Unsynced: a create with synced data, a rename of an unsynced temp over
	// /old (the rename-before-fsync bug), and a remove.
	mustWrite(t, m, "/new", []byte("new"))
	mustSyncFile(t, m, "/new")
	mustWrite(t, m, "/tmp", []byte("never synced"))
	must(t, m.Rename("/tmp", "/old"))
	must(t, m.Remove("/gone"))

	m.Reboot(RebootOptions{Mode: PowerLoss, UnsyncedEntries: 1})
	wantContent(t, m, "/new", []byte("new"))
	wantContent(t, m, "/old", nil) // renamed over, but its data never synced
	wantAbsent(t, m, "/tmp")
	wantAbsent(t, m, "/gone")
}
