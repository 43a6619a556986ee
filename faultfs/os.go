package faultfs

import (
	"fmt"
	"io/fs"
	"os"
)

// OS is the real filesystem. File.Sync is the platform's durable fsync
// (os.File.Sync: fsync(2) on Linux, F_FULLFSYNC on macOS) and SyncDir opens
// the directory and fsyncs it, which makes creates, renames and removes in it
// durable on Linux filesystems.
type OS struct{}

var _ FS = OS{}

// OpenFile opens the named file with os.OpenFile.
func (OS) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return f, nil
}

// Rename renames oldpath to newpath, replacing newpath atomically.
func (OS) Rename(oldpath, newpath string) error { return os.Rename(oldpath, newpath) }

// Remove removes a file or an empty directory.
func (OS) Remove(name string) error { return os.Remove(name) }

// MkdirAll creates a directory and any missing parents. It does not sync the
// parents; callers that need the new directories durable call SyncDir on each
// parent.
func (OS) MkdirAll(path string, perm fs.FileMode) error { return os.MkdirAll(path, perm) }

// ReadDir lists a directory sorted by name.
func (OS) ReadDir(name string) ([]fs.DirEntry, error) { return os.ReadDir(name) }

// Stat describes a file or directory.
func (OS) Stat(name string) (fs.FileInfo, error) { return os.Stat(name) }

// Truncate changes the size of the named file.
func (OS) Truncate(name string, size int64) error { return os.Truncate(name, size) }

// SyncDir opens the directory and fsyncs it, making the entries created,
// renamed or removed in it durable. Naming a file is an error (ENOTDIR).
func (OS) SyncDir(name string) (err error) {
	d, err := os.OpenFile(name, os.O_RDONLY|dirOpenFlag, 0)
	if err != nil {
		return fmt.Errorf("faultfs: open directory for sync: %w", err)
	}
	defer func() {
		if cerr := d.Close(); cerr != nil && err == nil {
			err = fmt.Errorf("faultfs: close directory after sync: %w", cerr)
		}
	}()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("faultfs: fsync directory %s: %w", name, err)
	}
	return nil
}

var _ Symlinker = OS{}

// Symlink creates newname as a symbolic link to oldname (tests plant links
// with it; storage code never creates one).
func (OS) Symlink(oldname, newname string) error { return os.Symlink(oldname, newname) }
