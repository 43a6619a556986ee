package faultfs

import (
	"io"
	"io/fs"
)

// File is an open file. Write-oriented operations (Write, WriteAt, Sync,
// Truncate) must not be called concurrently on one File; reads may be.
type File interface {
	io.Reader
	io.Writer
	// WriteAt overwrites at an offset; a File opened with O_APPEND refuses
	// it, as os.File does.
	io.WriterAt
	io.ReaderAt
	io.Closer
	// Sync makes the file's data durable (the platform's durable fsync).
	Sync() error
	// Truncate changes the file's size.
	Truncate(size int64) error
	// Stat describes the file.
	Stat() (fs.FileInfo, error)
	// Name is the path the file was opened with.
	Name() string
}

// FS is the filesystem every storage path in warren uses. Paths are ordinary
// slash-separated paths; implementations do not interpret "~".
//
// Durability rules (the OS implementation has them, the crashable memory
// implementation enforces them): file data is durable after File.Sync; a
// create, rename, remove or mkdir is durable only after SyncDir on its parent
// directory. FileSystem.Sync (FS.OpenFS) does both for everything on the
// filesystem.
type FS interface {
	// OpenFile opens a file with os.O_* flags (O_RDONLY, O_WRONLY, O_RDWR,
	// O_APPEND, O_CREATE, O_EXCL, O_TRUNC).
	OpenFile(name string, flag int, perm fs.FileMode) (File, error)
	// Rename atomically replaces newpath with oldpath.
	Rename(oldpath, newpath string) error
	// Remove removes a file or an empty directory.
	Remove(name string) error
	// MkdirAll creates a directory and any missing parents.
	MkdirAll(path string, perm fs.FileMode) error
	// ReadDir lists a directory, sorted by name.
	ReadDir(name string) ([]fs.DirEntry, error)
	// Stat describes a file or directory.
	Stat(name string) (fs.FileInfo, error)
	// Truncate changes the size of the named file.
	Truncate(name string, size int64) error
	// SyncDir makes the directory's entries (creates, renames, removes in it)
	// durable.
	SyncDir(name string) error
	// OpenFS opens the filesystem holding name for whole-filesystem
	// flushes (syncfs(2)); see FileSystem. Where a flush could succeed
	// without making everything durable, or without reporting a failed
	// writeback, it returns an error wrapping errors.ErrUnsupported, and
	// callers sync file by file.
	OpenFS(name string) (FileSystem, error)
}

// FileSystem is a filesystem opened by FS.OpenFS. Sync makes every file's
// data and every directory's entries on it durable, as if each were
// synced, and fails if any writeback on the filesystem failed since the
// FileSystem was opened or since the last Sync that reported a failure
// (each failure is reported once, as Linux's errseq does for syncfs).
type FileSystem interface {
	Sync() error
	Close() error
}
