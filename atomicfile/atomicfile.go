package atomicfile

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/warren-dev/warren/faultfs"
)

// tempMarker separates the target's base name from the random suffix.
const tempMarker = ".tmp-"

// maxAttempts bounds the retries on a temp name collision.
const maxAttempts = 16

// ErrTempNames is returned when maxAttempts fresh temp names all existed,
// which means the directory is full of temps or the random source is broken.
var ErrTempNames = errors.New("atomicfile: could not create a unique temp file; run CleanTemps on the directory")

// Write atomically and durably replaces path with data (see the package
// documentation for the protocol). perm applies to a newly created file; the
// replaced file's mode is not copied.
func Write(fsys faultfs.FS, path string, data []byte, perm fs.FileMode) error {
	return write(fsys, path, data, perm, randomHex)
}

// WriteCache replaces path with data atomically but not durably: a temp
// file renamed into place, no fsync. For a file the caller can rebuild
// (a cache): after a power loss it may hold the old content, none, or (on
// a file system without rename ordering) be empty, and the reader must
// treat anything invalid as missing.
func WriteCache(fsys faultfs.FS, path string, data []byte, perm fs.FileMode) error {
	return writeOpts(fsys, path, data, perm, randomHex, false)
}

// write is Write with the temp suffix source injectable for tests.
func write(fsys faultfs.FS, path string, data []byte, perm fs.FileMode, suffix func() (string, error)) error {
	return writeOpts(fsys, path, data, perm, suffix, true)
}

func writeOpts(fsys faultfs.FS, path string, data []byte, perm fs.FileMode, suffix func() (string, error), durable bool) error {
	dir, base := filepath.Dir(path), filepath.Base(path)
	f, tmp, err := createTemp(fsys, dir, base, perm, suffix)
	if err != nil {
		return fmt.Errorf("atomicfile: write %s: %w", path, err)
	}
	fail := func(step string, err error) error {
		_ = f.Close()
		_ = fsys.Remove(tmp) // best effort; CleanTemps removes what stays
		return fmt.Errorf("atomicfile: write %s: %s temp %s: %w", path, step, tmp, err)
	}
	if len(data) > 0 {
		if _, err := f.Write(data); err != nil {
			return fail("write", err)
		}
	}
	if durable {
		if err := f.Sync(); err != nil {
			return fail("fsync", err)
		}
	}
	if err := f.Close(); err != nil {
		_ = fsys.Remove(tmp)
		return fmt.Errorf("atomicfile: write %s: close temp %s: %w", path, tmp, err)
	}
	if err := fsys.Rename(tmp, path); err != nil {
		_ = fsys.Remove(tmp)
		return fmt.Errorf("atomicfile: write %s: rename temp into place: %w", path, err)
	}
	if !durable {
		return nil
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("atomicfile: write %s: new content is in place but may not survive a power loss: fsync directory %s: %w", path, dir, err)
	}
	return nil
}

// createTemp creates a fresh temp file next to the target with O_EXCL.
func createTemp(fsys faultfs.FS, dir, base string, perm fs.FileMode, suffix func() (string, error)) (faultfs.File, string, error) {
	for range maxAttempts {
		s, err := suffix()
		if err != nil {
			return nil, "", fmt.Errorf("temp name: %w", err)
		}
		tmp := filepath.Join(dir, base+tempMarker+s)
		f, err := fsys.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
		if errors.Is(err, fs.ErrExist) {
			continue
		}
		if err != nil {
			return nil, "", fmt.Errorf("create temp: %w", err)
		}
		return f, tmp, nil
	}
	return nil, "", ErrTempNames
}

func randomHex() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", err
	}
	return hex.EncodeToString(b[:]), nil
}

// IsTemp reports whether name (a base name or a path) is a temp file made by
// Write: "<base>.tmp-<hex>" with a non-empty base.
func IsTemp(name string) bool {
	name = filepath.Base(name)
	i := strings.LastIndex(name, tempMarker)
	if i <= 0 {
		return false
	}
	s := name[i+len(tempMarker):]
	if s == "" {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// CleanTemps removes the stale temps Write may leave in dir after a crash
// and, if it removed any, fsyncs dir so the removals are durable. A missing
// dir has no temps. It must not run while a Write into dir is in progress.
func CleanTemps(fsys faultfs.FS, dir string) error {
	ents, err := fsys.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("atomicfile: clean temps in %s: %w", dir, err)
	}
	removed := false
	for _, e := range ents {
		if e.IsDir() || !IsTemp(e.Name()) {
			continue
		}
		p := filepath.Join(dir, e.Name())
		if err := fsys.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("atomicfile: clean temps: remove %s: %w", p, err)
		}
		removed = true
	}
	if !removed {
		return nil
	}
	if err := fsys.SyncDir(dir); err != nil {
		return fmt.Errorf("atomicfile: clean temps: fsync directory %s: %w", dir, err)
	}
	return nil
}
