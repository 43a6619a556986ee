package faultfs

import (
	"bytes"
	"io/fs"
	"maps"
	"os"
	"path"
	"slices"
	"syscall"
)

// cleanName is the path recorded in the trace and in errors.
func cleanName(name string) string {
	if name == "" {
		return ""
	}
	return path.Clean(name)
}

// OpenFile opens or creates a file. With O_CREATE or O_TRUNC it is a mutating
// operation (OpCreate); otherwise a read (OpOpen). A directory may be opened
// read-only; Sync on such a File syncs the directory (OpSyncDir).
func (m *Mem) OpenFile(name string, flag int, perm fs.FileMode) (File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := cleanName(name)
	kind, err := m.beginOpen(p, flag)
	if err != nil {
		return nil, err
	}
	d, base, n, err := m.resolveOpen(kind, name, p, flag)
	if err != nil {
		return nil, err
	}
	if n, err = m.openNode(kind, p, flag, perm, d, base, n); err != nil {
		return nil, err
	}
	acc := flag & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR)
	return &memFile{
		m: m, n: n, name: name, trace: p, gen: m.gen,
		read:   acc == os.O_RDONLY || acc == os.O_RDWR,
		write:  acc == os.O_WRONLY || acc == os.O_RDWR,
		append: flag&os.O_APPEND != 0,
	}, nil
}

// beginOpen starts an open of p: a mutating OpCreate with O_CREATE or
// O_TRUNC (rules and crashes apply), else a read OpOpen.
func (m *Mem) beginOpen(p string, flag int) (OpKind, error) {
	if flag&(os.O_CREATE|os.O_TRUNC) == 0 {
		return OpOpen, m.beginRead(Op{Kind: OpOpen, Path: p})
	}
	r, err := m.begin(Op{Kind: OpCreate, Path: p})
	if err != nil {
		return OpCreate, err
	}
	if r != nil {
		return OpCreate, pathErr(OpCreate, p, r.err())
	}
	return OpCreate, nil
}

// resolveOpen finds name's parent d, last component base and node n (nil:
// none), following a link in the last component unless O_NOFOLLOW (ELOOP)
// or O_CREATE|O_EXCL (which never follows one: EEXIST in openNode).
func (m *Mem) resolveOpen(kind OpKind, name, p string, flag int) (d *node, base string, n *node, err error) {
	d, base, n, err = m.resolve(kind, name, false)
	if err != nil || n == nil || n.link == "" || isExcl(flag) {
		return d, base, n, err
	}
	if flag&O_NOFOLLOW != 0 {
		return nil, "", nil, pathErr(kind, p, syscall.ELOOP)
	}
	return m.resolve(kind, name, true)
}

// isExcl: O_CREATE|O_EXCL.
func isExcl(flag int) bool { return flag&os.O_CREATE != 0 && flag&os.O_EXCL != 0 }

// openNode is the node an open of base in d opens (n: the existing one,
// or nil), created or truncated as flag says; EEXIST, ENOENT or EISDIR
// where the open is refused.
func (m *Mem) openNode(kind OpKind, p string, flag int, perm fs.FileMode, d *node, base string, n *node) (*node, error) {
	excl := isExcl(flag)
	switch {
	case base == "":
		n = d // the root directory
		if excl {
			return nil, pathErr(kind, p, syscall.EEXIST)
		}
	case n != nil && excl:
		return nil, pathErr(kind, p, syscall.EEXIST)
	case n == nil && flag&os.O_CREATE == 0:
		return nil, pathErr(kind, p, syscall.ENOENT)
	case n == nil:
		n = newFile(perm, m.now())
		d.children[base] = n
		d.mtime = m.now()
	}
	acc := flag & (os.O_RDONLY | os.O_WRONLY | os.O_RDWR)
	if n.dir {
		if acc != os.O_RDONLY || flag&(os.O_TRUNC|os.O_CREATE) != 0 {
			return nil, pathErr(kind, p, syscall.EISDIR)
		}
	} else if flag&os.O_TRUNC != 0 && len(n.data) > 0 {
		n.data = nil
		n.mtime = m.now()
	}
	return n, nil
}

// Rename atomically moves oldpath to newpath, replacing a file at newpath
// (like os.Rename, it never replaces a directory: EEXIST). Durable only after SyncDir
// on both parents.
func (m *Mem) Rename(oldpath, newpath string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	o := Op{Kind: OpRename, Path: cleanName(oldpath), To: cleanName(newpath)}
	r, err := m.begin(o)
	if err != nil {
		return err
	}
	if r != nil {
		return &os.LinkError{Op: "rename", Old: o.Path, New: o.To, Err: r.err()}
	}
	linkErr := func(e error) error { return &os.LinkError{Op: "rename", Old: o.Path, New: o.To, Err: e} }
	od, ob, err := m.walk(OpRename, oldpath)
	if err != nil {
		return err
	}
	nd, nb, err := m.walk(OpRename, newpath)
	if err != nil {
		return err
	}
	if ob == "" || nb == "" {
		return linkErr(syscall.EBUSY)
	}
	n, ok := od.children[ob]
	if !ok {
		return linkErr(syscall.ENOENT)
	}
	ex, exists := nd.children[nb]
	if exists && ex.dir && (ex != n || oldpath == newpath) {
		return linkErr(syscall.EEXIST) // like os.Rename: never replace a directory
	}
	if od == nd && ob == nb {
		return nil
	}
	if n.dir && m.onPath(nd, newpath, n) {
		return linkErr(syscall.EINVAL) // a directory cannot move below itself
	}
	if exists && n.dir {
		return linkErr(syscall.ENOTDIR)
	}
	delete(od.children, ob)
	nd.children[nb] = n
	od.mtime, nd.mtime = m.now(), m.now()
	return nil
}

// Remove removes a file or an empty directory. Durable only after SyncDir on
// the parent. Open Files on a removed file keep working on the unlinked file.
func (m *Mem) Remove(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := cleanName(name)
	r, err := m.begin(Op{Kind: OpRemove, Path: p})
	if err != nil {
		return err
	}
	if r != nil {
		return pathErr(OpRemove, p, r.err())
	}
	d, base, err := m.walk(OpRemove, name)
	if err != nil {
		return err
	}
	if base == "" {
		return pathErr(OpRemove, p, syscall.EBUSY)
	}
	n, ok := d.children[base]
	if !ok {
		return pathErr(OpRemove, p, syscall.ENOENT)
	}
	if n.dir && len(n.children) > 0 {
		return pathErr(OpRemove, p, syscall.ENOTEMPTY)
	}
	delete(d.children, base)
	d.mtime = m.now()
	return nil
}

// MkdirAll creates a directory and any missing parents; one call is one
// mutating op (OpMkdir). The new entries are durable only after SyncDir on
// each new directory's parent.
func (m *Mem) MkdirAll(name string, perm fs.FileMode) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := cleanName(name)
	r, err := m.begin(Op{Kind: OpMkdir, Path: p})
	if err != nil {
		return err
	}
	if r != nil {
		return pathErr(OpMkdir, p, r.err())
	}
	if name == "" {
		return pathErr(OpMkdir, p, syscall.ENOENT)
	}
	d := m.root
	var dp []string
	hops := 0
	for _, c := range components(name) {
		n, ok := d.children[c]
		np := append(dp[:len(dp):len(dp)], c)
		if ok && n.link != "" {
			// Like os.MkdirAll: a link to a directory is used, a link to
			// a file is ENOTDIR, one that cannot be followed is EEXIST.
			t, tp, err := m.followLink(OpMkdir, p, dp, n, &hops)
			if err != nil || t == nil {
				return pathErr(OpMkdir, p, syscall.EEXIST)
			}
			n, np = t, tp
		}
		if !ok {
			n = newDir(perm, m.now())
			d.children[c] = n
			d.mtime = m.now()
		} else if !n.dir {
			return pathErr(OpMkdir, p, syscall.ENOTDIR)
		}
		d, dp = n, np
	}
	return nil
}

// ReadDir lists a directory sorted by name.
func (m *Mem) ReadDir(name string) ([]fs.DirEntry, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := cleanName(name)
	if err := m.beginRead(Op{Kind: OpReadDir, Path: p}); err != nil {
		return nil, err
	}
	d, err := m.lookup(OpReadDir, name)
	if err != nil {
		return nil, err
	}
	if !d.dir {
		return nil, pathErr(OpReadDir, p, syscall.ENOTDIR)
	}
	names := slices.Sorted(maps.Keys(d.children))
	out := make([]fs.DirEntry, 0, len(names))
	for _, n := range names {
		out = append(out, fs.FileInfoToDirEntry(d.children[n].info(n)))
	}
	return out, nil
}

// Stat describes a file or directory.
func (m *Mem) Stat(name string) (fs.FileInfo, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := cleanName(name)
	if err := m.beginRead(Op{Kind: OpStat, Path: p}); err != nil {
		return nil, err
	}
	n, err := m.lookup(OpStat, name)
	if err != nil {
		return nil, err
	}
	return n.info(baseName(name)), nil
}

// Truncate changes the size of the named file (zero-extending it if larger).
// Durable only after a Sync of the file.
func (m *Mem) Truncate(name string, size int64) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := cleanName(name)
	r, err := m.begin(Op{Kind: OpTruncate, Path: p})
	if err != nil {
		return err
	}
	if r != nil {
		return pathErr(OpTruncate, p, r.err())
	}
	if size < 0 {
		return pathErr(OpTruncate, p, syscall.EINVAL)
	}
	if size > MaxMemFileSize {
		return pathErr(OpTruncate, p, syscall.EFBIG)
	}
	n, err := m.lookup(OpTruncate, name)
	if err != nil {
		return err
	}
	if n.dir {
		return pathErr(OpTruncate, p, syscall.EISDIR)
	}
	n.setSize(size)
	n.mtime = m.now()
	return nil
}

// SyncDir makes the directory's current entries durable.
func (m *Mem) SyncDir(name string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := cleanName(name)
	r, err := m.begin(Op{Kind: OpSyncDir, Path: p})
	if err != nil {
		return err
	}
	if r != nil {
		return pathErr(OpSyncDir, p, r.err())
	}
	d, err := m.lookup(OpSyncDir, name)
	if err != nil {
		return err
	}
	if !d.dir {
		return pathErr(OpSyncDir, p, syscall.ENOTDIR)
	}
	d.syncedChildren = maps.Clone(d.children)
	return nil
}

// OpenFS opens the Mem (it is one filesystem) for whole-filesystem
// flushes; name must exist. See memFileSystem.
func (m *Mem) OpenFS(name string) (FileSystem, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.crashed {
		return nil, pathErr(OpOpen, cleanName(name), ErrCrashed)
	}
	if _, err := m.lookup(OpOpen, name); err != nil {
		return nil, err
	}
	return &memFileSystem{m: m, name: cleanName(name), gen: m.gen, seen: m.wbFailures}, nil
}

// memFileSystem is a Mem opened by OpenFS. Its Sync makes everything in
// the Mem durable, as syncfs(2) does: every file's data and every
// directory's entries. It reports, once, a writeback failure anywhere in
// the Mem since it was opened or last reported one (a failed File.Sync or
// another handle's failed Sync), as Linux's errseq does. A failing Sync
// (a Rule on OpSyncFS) follows fsyncgate for every file: data not yet
// synced is dropped, and the next File.Sync of each such file reports the
// loss once; directories are left as they were.
type memFileSystem struct {
	m    *Mem
	name string
	gen  uint64
	seen int // m.wbFailures when last reported
}

func (h *memFileSystem) Sync() error {
	m := h.m
	m.mu.Lock()
	defer m.mu.Unlock()
	if h.gen != m.gen && !m.crashed {
		return pathErr(OpSyncFS, h.name, ErrCrashed) // opened before a Reboot
	}
	r, err := m.begin(Op{Kind: OpSyncFS, Path: h.name})
	if err != nil {
		return err
	}
	if r != nil {
		m.root.walkTree(func(n *node) {
			if !n.dir && n.link == "" && !bytes.Equal(n.data, n.synced) {
				n.data = slices.Clone(n.synced)
				n.mtime = m.now()
				n.lostWrite = true
			}
		})
		m.wbFailures++
		h.seen = m.wbFailures
		return pathErr(OpSyncFS, h.name, r.err())
	}
	if h.seen != m.wbFailures {
		h.seen = m.wbFailures
		return pathErr(OpSyncFS, h.name, syscall.EIO)
	}
	m.root.walkTree(func(n *node) {
		switch {
		case n.dir:
			n.syncedChildren = maps.Clone(n.children)
		case n.link == "":
			n.sync()
		}
	})
	return nil
}

func (h *memFileSystem) Close() error { return nil }
