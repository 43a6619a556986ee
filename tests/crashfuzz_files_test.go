package tests

// Filesystem helpers of the crash fuzzer: copying a crashed Mem for the
// reference instance, dumping and comparing files.

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/warren-dev/warren/atomicfile"
	"github.com/warren-dev/warren/faultfs"
)

// cloneMem copies every visible file and directory of src into a fresh Mem,
// with everything synced.
func cloneMem(src *faultfs.Mem) (*faultfs.Mem, error) {
	dst := faultfs.NewMem()
	var walk func(dir string) error
	walk = func(dir string) error {
		if err := dst.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		entries, err := src.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			p := path.Join(dir, e.Name())
			if e.IsDir() {
				if err := walk(p); err != nil {
					return err
				}
				continue
			}
			data, err := faultfs.ReadFile(src, p)
			if errors.Is(err, fs.ErrNotExist) {
				continue // a background session.json write renamed it away
			}
			if err != nil {
				return err
			}
			if err := faultfs.WriteFile(dst, p, data, 0o600); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk("/"); err != nil {
		return nil, err
	}
	// Make the copy durable: a power-loss reboot of a Mem keeps only
	// synced state, so sync every file and directory.
	var syncAll func(dir string) error
	syncAll = func(dir string) error {
		entries, err := dst.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			p := path.Join(dir, e.Name())
			if e.IsDir() {
				if err := syncAll(p); err != nil {
					return err
				}
				continue
			}
			f, err := dst.OpenFile(p, 0, 0)
			if err != nil {
				return err
			}
			serr := f.Sync()
			cerr := f.Close()
			if err := errors.Join(serr, cerr); err != nil {
				return err
			}
		}
		return dst.SyncDir(dir)
	}
	if err := syncAll("/"); err != nil {
		return nil, err
	}
	return dst, nil
}

func dumpDurable(fsys faultfs.FS) (map[string]string, error) {
	f, err := dumpFiles(fsys)
	return durableFiles(f), err
}

// dumpFiles returns every file's bytes by path.
func dumpFiles(fsys faultfs.FS) (map[string]string, error) {
	out := map[string]string{}
	var walk func(dir string) error
	walk = func(dir string) error {
		entries, err := fsys.ReadDir(dir)
		if err != nil {
			return err
		}
		for _, e := range entries {
			p := path.Join(dir, e.Name())
			if e.IsDir() {
				out[p+"/"] = ""
				if err := walk(p); err != nil {
					return err
				}
				continue
			}
			if atomicfile.IsTemp(e.Name()) {
				continue // a session.json being replaced by the background writer
			}
			data, err := faultfs.ReadFile(fsys, p)
			if errors.Is(err, fs.ErrNotExist) {
				continue // renamed or removed since the listing
			}
			if err != nil {
				return err
			}
			out[p] = string(data)
		}
		return nil
	}
	return out, walk("/")
}

func withoutPending(files map[string]string) map[string]string {
	out := make(map[string]string, len(files))
	for p, d := range files {
		if !strings.HasSuffix(p, ".pending") {
			out[p] = d
		}
	}
	return out
}

// durableFiles keeps the files recovery must reproduce byte for byte: the
// logs, WAL files and directories. session.json is a snapshot the daemon
// writes in the background (its content is rebuilt from the log), so its
// presence right after Recover returns is timing-dependent.
func durableFiles(files map[string]string) map[string]string {
	out := make(map[string]string, len(files))
	for p, d := range files {
		base := path.Base(p)
		if strings.HasSuffix(p, "/") || strings.HasSuffix(base, ".jsonl") || strings.HasSuffix(base, ".pending") {
			out[p] = d
		}
	}
	return out
}

func diffFiles(a, b map[string]string) string {
	var lines []string
	for p, da := range a {
		db, ok := b[p]
		switch {
		case !ok:
			lines = append(lines, "  only before: "+p)
		case da != db:
			lines = append(lines, fmt.Sprintf("  changed: %s\n    before: %q\n    after:  %q", p, clip(da), clip(db)))
		}
	}
	for p := range b {
		if _, ok := a[p]; !ok {
			lines = append(lines, "  only after: "+p)
		}
	}
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

func clip(s string) string {
	if len(s) > 600 {
		return "..." + s[len(s)-600:]
	}
	return s
}
