package faultfs

import (
	"io/fs"
	"path"
	"slices"
	"strings"
	"syscall"
	"time"
)

// MaxMemFileSize is the largest file a Mem holds; a write or truncate past it
// fails with EFBIG instead of allocating without bound.
const MaxMemFileSize = 1 << 30

// node is an inode: a regular file or a directory. Open Files point at nodes,
// so a File keeps writing to its node after a rename or remove.
//
// Files have data (what reads see) and synced (what survives a power loss).
// Directories have children (visible entries) and syncedChildren (entries
// that survive a power loss), as in pebble's crashable MemFS.
type node struct {
	dir   bool
	link  string // a symbolic link's target ("" for files and directories)
	perm  fs.FileMode
	mtime time.Time

	data   []byte
	synced []byte
	// lostWrite: a failed FileSystem.Sync dropped unsynced data; the next
	// File.Sync reports it (once).
	lostWrite bool

	children       map[string]*node
	syncedChildren map[string]*node
}

func newDir(perm fs.FileMode, mtime time.Time) *node {
	return &node{dir: true, perm: perm.Perm(), mtime: mtime,
		children: map[string]*node{}, syncedChildren: map[string]*node{}}
}

func newFile(perm fs.FileMode, mtime time.Time) *node {
	return &node{perm: perm.Perm(), mtime: mtime}
}

func (n *node) info(name string) fs.FileInfo {
	if n.link != "" {
		return n.linkInfo(name)
	}
	fi := memInfo{name: name, mode: n.perm, mtime: n.mtime}
	if n.dir {
		fi.mode |= fs.ModeDir
	} else {
		fi.size = int64(len(n.data))
	}
	return fi
}

// setSize truncates or zero-extends the file's visible data. Truncation caps
// the slice, so a later extension reallocates instead of overwriting bytes
// that synced may share.
func (n *node) setSize(size int64) {
	if size <= int64(len(n.data)) {
		n.data = n.data[:size:size]
		return
	}
	n.data = append(n.data, make([]byte, size-int64(len(n.data)))...)
}

// sync makes the visible data durable. synced shares data's backing array
// (capped at its length, so appends never reach it); writeAt copies before it
// would overwrite a shared byte. So a sync costs O(1), not O(file size).
func (n *node) sync() {
	n.synced = n.data[:len(n.data):len(n.data)]
}

// writeAt writes p at off, zero-filling any gap.
func (n *node) writeAt(p []byte, off int64) {
	if off < int64(len(n.synced)) && len(p) > 0 && len(n.data) > 0 && &n.data[0] == &n.synced[0] {
		n.data = slices.Clone(n.data) // copy on write: keep synced intact
	}
	if off == int64(len(n.data)) {
		n.data = append(n.data, p...) // the common append
		return
	}
	end := off + int64(len(p))
	if end > int64(len(n.data)) {
		n.setSize(end)
	}
	copy(n.data[off:], p)
}

type memInfo struct {
	name  string
	size  int64
	mode  fs.FileMode
	mtime time.Time
}

func (fi memInfo) Name() string       { return fi.name }
func (fi memInfo) Size() int64        { return fi.size }
func (fi memInfo) Mode() fs.FileMode  { return fi.mode }
func (fi memInfo) ModTime() time.Time { return fi.mtime }
func (fi memInfo) IsDir() bool        { return fi.mode.IsDir() }
func (fi memInfo) Sys() any           { return nil }

// components splits a path into its names below the root. "/a/b", "a/b" and
// "./a//b/" all give [a b]; "/" and "." give none. Mem has one root and no
// working directory, so relative and absolute paths name the same file.
func components(name string) []string {
	c := path.Clean("/" + name)
	if c == "/" {
		return nil
	}
	return strings.Split(c[1:], "/")
}

// walk resolves the directory holding the last component of name, returning
// that directory and the base name, following symbolic links in every
// component but the last. The root itself has no parent: walk returns
// (root, "") for it.
func (m *Mem) walk(op OpKind, name string) (*node, string, error) {
	if name == "" {
		return nil, "", pathErr(op, name, syscall.ENOENT)
	}
	hops := 0
	d, _, base, err := m.walkParts(op, name, components(name), &hops)
	return d, base, err
}

// lookup resolves name to its node, following symbolic links (the last
// component's too).
func (m *Mem) lookup(op OpKind, name string) (*node, error) {
	d, base, n, err := m.resolve(op, name, true)
	if err != nil {
		return nil, err
	}
	if base == "" {
		return d, nil
	}
	if n == nil {
		return nil, pathErr(op, name, syscall.ENOENT)
	}
	return n, nil
}

// walkTree calls fn on n and on every node below it, in no fixed order.
// Links are visited, not followed.
func (n *node) walkTree(fn func(*node)) {
	fn(n)
	for _, c := range n.children {
		c.walkTree(fn)
	}
}
