package faultfs

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// innermost returns the deepest error in err's Unwrap chain (the errno).
func innermost(err error) error {
	for err != nil {
		u := errors.Unwrap(err)
		if u == nil {
			return err
		}
		err = u
	}
	return nil
}

// conformStep runs one random operation on fsys below root and describes
// its outcome (errno or result) so two filesystems can be compared.
func conformStep(fsys FS, root string, rng *rand.Rand) (desc, outcome string) {
	names := []string{"a", "b", "d", "d/a", "d/b", "d/e", "d/e/a", "x/y"}
	pick := func() string { return names[rng.IntN(len(names))] }
	p := func(n string) string { return filepath.Join(root, n) }
	res := func(err error, v any) string {
		if err != nil {
			return fmt.Sprintf("err %v", innermost(err))
		}
		return fmt.Sprintf("ok %v", v)
	}
	n := pick()
	switch rng.IntN(12) {
	case 0:
		data := bytes.Repeat([]byte{byte('a' + rng.IntN(26))}, rng.IntN(20))
		return "writefile " + n, res(WriteFile(fsys, p(n), data, 0o644), "")
	case 1:
		flags := []int{os.O_RDONLY, os.O_WRONLY | os.O_APPEND, os.O_RDWR | os.O_CREATE, os.O_WRONLY | os.O_CREATE | os.O_EXCL,
			os.O_RDWR | os.O_TRUNC, os.O_RDONLY | os.O_CREATE, os.O_RDONLY | os.O_TRUNC,
			os.O_RDONLY | O_NOFOLLOW, os.O_RDWR | os.O_CREATE | O_NOFOLLOW, os.O_WRONLY | os.O_CREATE | os.O_EXCL | O_NOFOLLOW}
		flag := flags[rng.IntN(len(flags))]
		f, err := fsys.OpenFile(p(n), flag, 0o644)
		if err != nil {
			return fmt.Sprintf("open %s %#x", n, flag), res(err, nil)
		}
		var wn int
		var werr error
		if flag != os.O_RDONLY {
			wn, werr = f.Write([]byte("w"))
		}
		b, rerr := io.ReadAll(f)
		cerr := f.Close()
		return fmt.Sprintf("open %s %#x", n, flag), fmt.Sprintf("write %d %v read %q %v close %v", wn, innermost(werr), b, innermost(rerr), cerr)
	case 2:
		b, err := ReadFile(fsys, p(n))
		return "readfile " + n, res(err, string(b))
	case 3:
		to := pick()
		return "rename " + n + " " + to, res(fsys.Rename(p(n), p(to)), "")
	case 4:
		return "remove " + n, res(fsys.Remove(p(n)), "")
	case 5:
		return "mkdirall " + n, res(fsys.MkdirAll(p(n), 0o755), "")
	case 6:
		size := int64(rng.IntN(8))
		return fmt.Sprintf("truncate %s %d", n, size), res(fsys.Truncate(p(n), size), "")
	case 7:
		fi, err := fsys.Stat(p(n))
		if err != nil {
			return "stat " + n, res(err, nil)
		}
		size := fi.Size()
		if fi.IsDir() {
			size = 0 // directory sizes are filesystem-specific
		}
		return "stat " + n, res(nil, fmt.Sprintf("%s dir=%v size=%d", fi.Name(), fi.IsDir(), size))
	case 8:
		ents, err := fsys.ReadDir(p(n))
		var got []string
		for _, e := range ents {
			got = append(got, fmt.Sprintf("%s/%v/link=%v", e.Name(), e.IsDir(), e.Type()&fs.ModeSymlink != 0))
		}
		return "readdir " + n, res(err, got)
	case 10, 11:
		// A symbolic link, absolute or relative, to any name (existing or
		// not, a file, a directory, itself or another link).
		to := pick()
		target := p(to)
		if rng.IntN(2) == 0 {
			target, _ = filepath.Rel(filepath.Dir(p(n)), p(to))
		}
		return "symlink " + target + " " + n, res(fsys.(Symlinker).Symlink(target, p(n)), "")
	default:
		if rng.IntN(2) == 0 {
			return "syncdir " + n, res(fsys.SyncDir(p(n)), "")
		}
		return "truncate-neg " + n, res(fsys.Truncate(p(n), -1), "")
	}
}

// TestMemConformsToOS runs the same random operations on OS (in a temp dir)
// and on Mem, and requires identical outcomes: same errnos, same contents,
// same listings. Crash tests on Mem therefore exercise real semantics.
func TestMemConformsToOS(t *testing.T) {
	seeds, steps := 40, 60
	if os.Getenv("WARREN_LONG") == "1" {
		seeds, steps = 1000, 200
	}
	for seed := range seeds {
		// Relative links moved to a shallower directory point up to two
		// levels above the root: keep those levels empty on both.
		root := filepath.Join(t.TempDir(), "r1", "r2", "r3")
		must(t, os.MkdirAll(root, 0o755))
		m := NewMem()
		must(t, m.MkdirAll(root, 0o755))
		osRng := rand.New(rand.NewPCG(uint64(seed), 5))
		memRng := rand.New(rand.NewPCG(uint64(seed), 5))
		for i := range steps {
			d1, o1 := conformStep(OS{}, root, osRng)
			d2, o2 := conformStep(m, root, memRng)
			if d1 != d2 {
				t.Fatalf("seed %d step %d: runs diverged: %s vs %s", seed, i, d1, d2)
			}
			if o1 != o2 {
				t.Fatalf("seed %d step %d %s: OS %s, Mem %s", seed, i, d1, o1, o2)
			}
		}
	}
}
