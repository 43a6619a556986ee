package faultfs

import (
	"io"
	"io/fs"
	"maps"
	"slices"
	"syscall"
)

// memFile is an open File of a Mem. It points at its node, so it follows the
// file across renames and keeps an unlinked file alive.
type memFile struct {
	m      *Mem
	n      *node
	name   string // as opened
	trace  string // cleaned, for the trace and errors
	gen    uint64
	read   bool
	write  bool
	append bool
	off    int64
	closed bool
}

var _ File = (*memFile)(nil)

// check fails if the Mem crashed (or rebooted since the open) or the File is
// closed. m.mu must be held.
func (f *memFile) check(op OpKind) error {
	if f.m.crashed || f.gen != f.m.gen {
		return pathErr(op, f.trace, ErrCrashed)
	}
	if f.closed {
		return pathErr(op, f.trace, fs.ErrClosed)
	}
	return nil
}

// Write writes at the file offset (at the end with O_APPEND).
func (f *memFile) Write(p []byte) (int, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.check(OpWrite); err != nil {
		return 0, err
	}
	off := f.off
	if f.append {
		off = int64(len(f.n.data))
	}
	n, err := f.writeAt(p, off)
	if n > 0 || err == nil {
		f.off = off + int64(n)
	}
	return n, err
}

// WriteAt writes at off without moving the file offset. As with os.File,
// a File opened with O_APPEND refuses it.
func (f *memFile) WriteAt(p []byte, off int64) (int, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.check(OpWrite); err != nil {
		return 0, err
	}
	if f.append || off < 0 {
		return 0, pathErr(OpWrite, f.trace, syscall.EINVAL)
	}
	return f.writeAt(p, off)
}

// writeAt is one counted write of p at off. m.mu must be held and check
// must have passed.
func (f *memFile) writeAt(p []byte, off int64) (int, error) {
	if !f.write {
		return 0, pathErr(OpWrite, f.trace, syscall.EBADF)
	}
	r, err := f.m.begin(Op{Kind: OpWrite, Path: f.trace})
	if err != nil {
		// check passed, so this op crashed the filesystem: remember the
		// write so Reboot can decide how much of it landed.
		f.m.inflight = &inflightWrite{n: f.n, off: off, data: slices.Clone(p)}
		return 0, err
	}
	if off+int64(len(p)) > MaxMemFileSize {
		return 0, pathErr(OpWrite, f.trace, syscall.EFBIG)
	}
	if r != nil {
		if !r.ShortWrite {
			return 0, pathErr(OpWrite, f.trace, r.err())
		}
		k := len(p) / 2
		f.n.writeAt(p[:k], off)
		f.n.mtime = f.m.now()
		return k, pathErr(OpWrite, f.trace, r.err())
	}
	f.n.writeAt(p, off)
	f.n.mtime = f.m.now()
	return len(p), nil
}

// Read reads from the file offset.
func (f *memFile) Read(p []byte) (int, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.readable(); err != nil {
		return 0, err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if f.off >= int64(len(f.n.data)) {
		return 0, io.EOF
	}
	k := copy(p, f.n.data[f.off:])
	f.off += int64(k)
	return k, nil
}

// ReadAt reads at off without moving the file offset.
func (f *memFile) ReadAt(p []byte, off int64) (int, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.readable(); err != nil {
		return 0, err
	}
	if off < 0 {
		return 0, pathErr(OpRead, f.trace, syscall.EINVAL)
	}
	if off >= int64(len(f.n.data)) {
		if len(p) == 0 {
			return 0, nil
		}
		return 0, io.EOF
	}
	k := copy(p, f.n.data[off:])
	if k < len(p) {
		return k, io.EOF
	}
	return k, nil
}

func (f *memFile) readable() error {
	if err := f.check(OpRead); err != nil {
		return err
	}
	if !f.read {
		return pathErr(OpRead, f.trace, syscall.EBADF)
	}
	if err := f.m.beginRead(Op{Kind: OpRead, Path: f.trace}); err != nil {
		return err
	}
	if f.n.dir {
		return pathErr(OpRead, f.trace, syscall.EISDIR)
	}
	return nil
}

// Sync makes the file's data durable; on a directory it makes the
// directory's entries durable. An injected sync error follows fsyncgate.
func (f *memFile) Sync() error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	kind := OpSync
	if f.n.dir {
		kind = OpSyncDir
	}
	if err := f.check(kind); err != nil {
		return err
	}
	r, err := f.m.begin(Op{Kind: kind, Path: f.trace})
	if err != nil {
		return err
	}
	if r != nil {
		if !f.n.dir {
			// fsyncgate: the kernel dropped the dirty pages; they will
			// never reach the disk, and the next fsync reports success.
			f.n.data = slices.Clone(f.n.synced)
			f.n.mtime = f.m.now()
			f.m.wbFailures++
		}
		return pathErr(kind, f.trace, r.err())
	}
	if f.n.lostWrite {
		// A failed FileSystem.Sync dropped this file's unsynced data.
		f.n.lostWrite = false
		return pathErr(kind, f.trace, syscall.EIO)
	}
	if f.n.dir {
		f.n.syncedChildren = maps.Clone(f.n.children)
	} else {
		f.n.sync()
	}
	return nil
}

// Truncate changes the file's size; the file offset is unchanged.
func (f *memFile) Truncate(size int64) error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.check(OpTruncate); err != nil {
		return err
	}
	if !f.write {
		return pathErr(OpTruncate, f.trace, syscall.EINVAL)
	}
	r, err := f.m.begin(Op{Kind: OpTruncate, Path: f.trace})
	if err != nil {
		return err
	}
	if r != nil {
		return pathErr(OpTruncate, f.trace, r.err())
	}
	if size < 0 {
		return pathErr(OpTruncate, f.trace, syscall.EINVAL)
	}
	if size > MaxMemFileSize {
		return pathErr(OpTruncate, f.trace, syscall.EFBIG)
	}
	f.n.setSize(size)
	f.n.mtime = f.m.now()
	return nil
}

// Stat describes the open file (its node, wherever it now lives).
func (f *memFile) Stat() (fs.FileInfo, error) {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	if err := f.check(OpStat); err != nil {
		return nil, err
	}
	if err := f.m.beginRead(Op{Kind: OpStat, Path: f.trace}); err != nil {
		return nil, err
	}
	return f.n.info(baseName(f.name)), nil
}

// Name returns the name the file was opened with.
func (f *memFile) Name() string { return f.name }

// Close closes the file. It is not an op: never counted or injected.
func (f *memFile) Close() error {
	f.m.mu.Lock()
	defer f.m.mu.Unlock()
	err := f.check(OpOpen)
	f.closed = true
	if err != nil {
		return &fs.PathError{Op: "close", Path: f.trace, Err: unwrapPath(err)}
	}
	return nil
}

func unwrapPath(err error) error {
	if pe, ok := err.(*fs.PathError); ok {
		return pe.Err
	}
	return err
}
