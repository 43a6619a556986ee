package faultfs

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// ReadFile reads the whole named file.
func ReadFile(fsys FS, name string) ([]byte, error) {
	f, err := fsys.OpenFile(name, os.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	data, err := io.ReadAll(f)
	cerr := f.Close()
	if err != nil {
		return nil, fmt.Errorf("faultfs: read %s: %w", name, err)
	}
	if cerr != nil {
		return nil, fmt.Errorf("faultfs: close %s: %w", name, cerr)
	}
	return data, nil
}

// WriteFile creates or truncates the named file and writes data to it. It
// does not sync the file or its directory: nothing it writes is durable. Use
// atomicfile.Write for durable whole-file replacement.
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
