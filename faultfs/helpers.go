package faultfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"syscall"
)

// ErrSymlink is returned (wrapped, naming the path) by OpenNoFollow and
// ReadFileNoFollow when the path is a symbolic link.
var ErrSymlink = errors.New("is a symbolic link, which warren does not follow for its logs and snapshots; replace the link with the file itself")

// OpenNoFollow is OpenFile with O_NOFOLLOW: a symbolic link at name is an
// error wrapping ErrSymlink (and the platform's ELOOP) that names the path,
// and the link's target is never opened, created or changed.
func OpenNoFollow(fsys FS, name string, flag int, perm fs.FileMode) (File, error) {
	f, err := fsys.OpenFile(name, flag|O_NOFOLLOW, perm)
	if err != nil {
		if errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("%s %w: %w", name, ErrSymlink, err)
		}
		return nil, err
	}
	return f, nil
}

// ReadFileNoFollow is ReadFile through OpenNoFollow.
func ReadFileNoFollow(fsys FS, name string) ([]byte, error) {
	f, err := OpenNoFollow(fsys, name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	return readClose(f, name)
}

// ReadFile reads the whole named file.
func ReadFile(fsys FS, name string) ([]byte, error) {
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	return readClose(f, name)
}

func readClose(f File, name string) ([]byte, error) {
	data, err := readAll(f)
	cerr := f.Close()
	if err != nil {
		return nil, fmt.Errorf("faultfs: read %s: %w", name, err)
	}
	if cerr != nil {
		return nil, fmt.Errorf("faultfs: close %s: %w", name, cerr)
	}
	return data, nil
}

// readAll reads f to its end into a buffer sized from its Stat, as
// os.ReadFile does (io.ReadAll would grow a buffer from 512 bytes: recovery
// reads 10,000 checkpoints of about 12 KB).
func readAll(f File) ([]byte, error) {
	size := 512
	if fi, err := f.Stat(); err == nil && fi.Size() > 0 && fi.Size() < 1<<30 {
		size = int(fi.Size()) + 1 // one more: the read that finds the end
	}
	data := make([]byte, 0, size)
	for {
		n, err := f.Read(data[len(data):cap(data)])
		data = data[:len(data)+n]
		if err == io.EOF {
			return data, nil
		}
		if err != nil {
			return data, err
		}
		if len(data) == cap(data) {
			data = append(data, 0)[:len(data)] // the file grew: more room
		}
	}
}

// WriteFile creates or truncates the named file and writes data to it. It
// does not sync the file or its directory: nothing it writes is durable. Use
// atomicfile.Write for durable whole-file replacement. Kept for tests
// (they set up files through it); the daemon writes through atomicfile.
func WriteFile(fsys FS, name string, data []byte, perm fs.FileMode) error {
	f, err := fsys.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	cerr := f.Close()
	if err != nil {
		return fmt.Errorf("faultfs: write %s: %w", name, err)
	}
	if cerr != nil {
		return fmt.Errorf("faultfs: close %s: %w", name, cerr)
	}
	return nil
}

// Exists reports whether the named file or directory exists. A missing path
// is (false, nil); any other Stat failure (a crashed Mem, a permission error)
// is returned so that callers do not mistake it for absence.
func Exists(fsys FS, name string) (bool, error) {
	_, err := fsys.Stat(name)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return false, err
}
