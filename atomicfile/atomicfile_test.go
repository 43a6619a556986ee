package atomicfile

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"regexp"
	"syscall"
	"testing"

	"github.com/warren-dev/warren/faultfs"
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// durableDir returns a Mem holding a durable /d.
func durableDir(t *testing.T) *faultfs.Mem {
	t.Helper()
	m := faultfs.NewMem()
	must(t, m.MkdirAll("/d", 0o755))
	must(t, m.SyncDir("/"))
	return m
}

func wantContent(t *testing.T, fsys faultfs.FS, name string, want []byte) {
	t.Helper()
	got, err := faultfs.ReadFile(fsys, name)
	if err != nil {
		t.Fatalf("ReadFile(%s): %v", name, err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("%s = %q, want %q", name, got, want)
	}
}

// dirNames lists a directory's entry names.
func dirNames(t *testing.T, fsys faultfs.FS, dir string) []string {
	t.Helper()
	ents, err := fsys.ReadDir(dir)
	must(t, err)
	var out []string
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

func TestWriteCreatesAndReplaces(t *testing.T) {
	m := durableDir(t)
	must(t, Write(m, "/d/s.json", []byte("v1"), 0o600))
	wantContent(t, m, "/d/s.json", []byte("v1"))
	fi, err := m.Stat("/d/s.json")
	must(t, err)
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("perm %v, want 0600", fi.Mode().Perm())
	}
	must(t, Write(m, "/d/s.json", []byte("version 2"), 0o600))
	must(t, Write(m, "/d/empty", nil, 0o600))
	// Durable on return: a power loss right after keeps both.
	m.Reboot(faultfs.RebootOptions{Mode: faultfs.PowerLoss})
	wantContent(t, m, "/d/s.json", []byte("version 2"))
	wantContent(t, m, "/d/empty", nil)
	if names := dirNames(t, m, "/d"); len(names) != 2 {
		t.Fatalf("directory holds %v, want only the two files (no temps)", names)
	}
}

var tempRe = regexp.MustCompile(`^/d/s\.json\.tmp-[0-9a-f]{16}$`)

func TestWriteTraceOrder(t *testing.T) {
	m := durableDir(t)
	start := m.MutatingOps()
	must(t, Write(m, "/d/s.json", []byte("data"), 0o600))
	ops := m.Ops()[start:]
	if len(ops) != 5 {
		t.Fatalf("trace %v, want 5 ops", ops)
	}
	tmp := ops[0].Path
	if !tempRe.MatchString(tmp) {
		t.Fatalf("temp name %q does not match %v", tmp, tempRe)
	}
	want := []faultfs.Op{
		{Kind: faultfs.OpCreate, Path: tmp},
		{Kind: faultfs.OpWrite, Path: tmp},
		{Kind: faultfs.OpSync, Path: tmp},
		{Kind: faultfs.OpRename, Path: tmp, To: "/d/s.json"},
		{Kind: faultfs.OpSyncDir, Path: "/d"},
	}
	for i := range want {
		if ops[i] != want[i] {
			t.Fatalf("op %d = %v, want %v (full trace %v)", i, ops[i], want[i], ops)
		}
	}
}

func TestWriteUsesFreshTempNames(t *testing.T) {
	m := durableDir(t)
	names := map[string]bool{}
	for range 20 {
		start := m.MutatingOps()
		must(t, Write(m, "/d/s.json", []byte("x"), 0o600))
		names[m.Ops()[start].Path] = true
	}
	if len(names) != 20 {
		t.Fatalf("20 writes used %d distinct temp names", len(names))
	}
}

func TestWriteRetriesOnTempCollision(t *testing.T) {
	m := durableDir(t)
	must(t, faultfs.WriteFile(m, "/d/s.json.tmp-aaaa", []byte("stale"), 0o600))
	suffixes := []string{"aaaa", "bbbb"}
	next := func() (string, error) {
		s := suffixes[0]
		suffixes = suffixes[1:]
		return s, nil
	}
	must(t, write(m, "/d/s.json", []byte("new"), 0o600, next))
	wantContent(t, m, "/d/s.json", []byte("new"))
	wantContent(t, m, "/d/s.json.tmp-aaaa", []byte("stale")) // never truncated

	always := func() (string, error) { return "aaaa", nil }
	if err := write(m, "/d/s.json", []byte("x"), 0o600, always); !errors.Is(err, ErrTempNames) {
		t.Fatalf("all names taken: %v, want ErrTempNames", err)
	}
}

func TestWriteFailuresLeaveTargetAndNoTemp(t *testing.T) {
	for _, tc := range []struct {
		name string
		rule faultfs.Rule
		want error
	}{
		{"create ENOSPC", faultfs.Rule{Kind: faultfs.OpCreate, Err: syscall.ENOSPC}, syscall.ENOSPC},
		{"short write", faultfs.Rule{Kind: faultfs.OpWrite, ShortWrite: true}, syscall.ENOSPC},
		{"write EIO", faultfs.Rule{Kind: faultfs.OpWrite, Err: syscall.EIO}, syscall.EIO},
		{"fsync EIO", faultfs.Rule{Kind: faultfs.OpSync, Err: syscall.EIO}, syscall.EIO},
		{"rename EIO", faultfs.Rule{Kind: faultfs.OpRename, Err: syscall.EIO}, syscall.EIO},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := durableDir(t)
			must(t, Write(m, "/d/s.json", []byte("old"), 0o600))
			m.Inject(tc.rule)
			err := Write(m, "/d/s.json", []byte("new content"), 0o600)
			if !errors.Is(err, tc.want) {
				t.Fatalf("Write error %v, want %v", err, tc.want)
			}
			wantContent(t, m, "/d/s.json", []byte("old"))
			if names := dirNames(t, m, "/d"); len(names) != 1 {
				t.Fatalf("directory holds %v after a failed Write, want only s.json", names)
			}
		})
	}
	t.Run("syncdir EIO", func(t *testing.T) {
		m := durableDir(t)
		m.Inject(faultfs.Rule{Kind: faultfs.OpSyncDir, Err: syscall.EIO})
		err := Write(m, "/d/s.json", []byte("new"), 0o600)
		if !errors.Is(err, syscall.EIO) {
			t.Fatalf("Write error %v, want EIO", err)
		}
	})
}

func TestCleanTemps(t *testing.T) {
	m := durableDir(t)
	must(t, Write(m, "/d/s.json", []byte("good"), 0o600))
	for _, n := range []string{"/d/s.json.tmp-0123abcd", "/d/x.tmp-ff"} {
		must(t, faultfs.WriteFile(m, n, []byte("stale"), 0o600))
	}
	keep := []string{"/d/other.tmp-zz", "/d/.tmp-ab", "/d/y.tmp-"}
	for _, n := range keep {
		must(t, faultfs.WriteFile(m, n, nil, 0o600))
	}
	must(t, m.MkdirAll("/d/sub.tmp-ab", 0o755))
	must(t, m.SyncDir("/d"))

	wantContent(t, m, "/d/s.json", []byte("good")) // readers ignore temps
	start := m.MutatingOps()
	must(t, CleanTemps(m, "/d"))
	if last := m.Ops()[m.MutatingOps()-1]; last != (faultfs.Op{Kind: faultfs.OpSyncDir, Path: "/d"}) {
		t.Fatalf("CleanTemps did not end with a directory fsync: %v", m.Ops()[start:])
	}
	m.Reboot(faultfs.RebootOptions{Mode: faultfs.PowerLoss})
	got := dirNames(t, m, "/d")
	want := []string{".tmp-ab", "other.tmp-zz", "s.json", "sub.tmp-ab", "y.tmp-"}
	if len(got) != len(want) {
		t.Fatalf("after CleanTemps and power loss: %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("after CleanTemps and power loss: %v, want %v", got, want)
		}
	}
	// Nothing to remove: no directory fsync.
	start = m.MutatingOps()
	must(t, CleanTemps(m, "/d"))
	if m.MutatingOps() != start {
		t.Fatalf("CleanTemps with no temps did %v", m.Ops()[start:])
	}
	must(t, CleanTemps(m, "/missing"))
}

func TestIsTemp(t *testing.T) {
	for name, want := range map[string]bool{
		"s.json.tmp-0123456789abcdef": true,
		"/a/b/s.json.tmp-00":          true,
		"s.json":                      false,
		"s.json.tmp-":                 false,
		".tmp-ab":                     false,
		"s.json.tmp-XYZ":              false,
		"s.json.tmp-ab/":              true,
	} {
		if got := IsTemp(name); got != want {
			t.Errorf("IsTemp(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestWriteOS(t *testing.T) {
	dir := t.TempDir()
	p := dir + "/s.json"
	var fsys faultfs.FS = faultfs.OS{}
	must(t, Write(fsys, p, []byte("one"), 0o600))
	must(t, Write(fsys, p, []byte("two"), 0o600))
	wantContent(t, fsys, p, []byte("two"))
	ents, err := os.ReadDir(dir)
	must(t, err)
	if len(ents) != 1 {
		t.Fatalf("temps left on disk: %v", ents)
	}
	fi, err := os.Stat(p)
	must(t, err)
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("perm %v", fi.Mode().Perm())
	}
	if err := Write(fsys, dir+"/missing/x", nil, 0o600); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("Write into a missing dir: %v, want ErrNotExist", err)
	}
}
