package faultfs

import (
	"io/fs"
	"path"
	"strings"
	"syscall"
)

// Symbolic links in Mem: a node with a non-empty link is a symlink to that
// path (absolute, or relative to the link's directory). Every operation
// follows links in the directories of a path, as the kernel does; OpenFile
// (unless O_NOFOLLOW), Stat, Truncate, ReadDir, SyncDir and MkdirAll follow
// a link in the last component too, while Rename and Remove act on the link
// itself. O_NOFOLLOW on a link is ELOOP, and more than maxLinkHops links in
// one resolution is ELOOP, as on Linux.

// maxLinkHops is Linux's limit on the symbolic links one lookup follows.
const maxLinkHops = 40

// Symlinker is implemented by filesystems that can create symbolic links
// (OS and Mem). Storage code never creates links; tests use it to plant
// them where a log or snapshot is expected.
type Symlinker interface {
	// Symlink creates newname as a symbolic link to oldname.
	Symlink(oldname, newname string) error
}

var _ Symlinker = (*Mem)(nil)

// Symlink creates newname as a symbolic link to oldname. It is a mutating
// operation traced as OpCreate; the new entry is durable only after SyncDir
// on its parent.
func (m *Mem) Symlink(oldname, newname string) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	p := cleanName(newname)
	r, err := m.begin(Op{Kind: OpCreate, Path: p})
	if err != nil {
		return err
	}
	if r != nil {
		return &linkError{oldname, p, r.err()}
	}
	if oldname == "" {
		return &linkError{oldname, p, syscall.ENOENT}
	}
	d, base, err := m.walk(OpCreate, newname)
	if err != nil {
		return err
	}
	if base == "" {
		return &linkError{oldname, p, syscall.EEXIST}
	}
	if _, ok := d.children[base]; ok {
		return &linkError{oldname, p, syscall.EEXIST}
	}
	d.children[base] = &node{link: oldname, perm: 0o777, mtime: m.now()}
	d.mtime = m.now()
	return nil
}

// linkError is os.LinkError without importing os here (same shape).
type linkError struct {
	old, new string
	err      error
}

func (e *linkError) Error() string { return "symlink " + e.old + " " + e.new + ": " + e.err.Error() }
func (e *linkError) Unwrap() error { return e.err }

// walkParts walks parts from the root, following links in all but the last
// component. It returns the directory holding the last component, that
// directory's canonical components and the last component's name.
func (m *Mem) walkParts(op OpKind, orig string, parts []string, hops *int) (*node, []string, string, error) {
	if len(parts) == 0 {
		return m.root, nil, "", nil
	}
	d := m.root
	// Until a link is followed the directory's canonical components are
	// parts[:i]: no allocation on the common path.
	var dirParts []string
	followed := false
	for i, p := range parts[:len(parts)-1] {
		c, ok := d.children[p]
		if !ok {
			return nil, nil, "", pathErr(op, orig, syscall.ENOENT)
		}
		if c.link != "" {
			cur := dirParts
			if !followed {
				cur = parts[:i:i]
			}
			var err error
			c, dirParts, err = m.followLink(op, orig, cur, c, hops)
			if err != nil {
				return nil, nil, "", err
			}
			if c == nil {
				return nil, nil, "", pathErr(op, orig, syscall.ENOENT)
			}
			followed = true
		} else if followed {
			dirParts = append(dirParts[:len(dirParts):len(dirParts)], p)
		}
		if !c.dir {
			return nil, nil, "", pathErr(op, orig, syscall.ENOTDIR)
		}
		d = c
	}
	if !followed {
		dirParts = parts[: len(parts)-1 : len(parts)-1]
	}
	return d, dirParts, parts[len(parts)-1], nil
}

// followLink resolves the link l found in the directory dirParts to the
// node it finally names (nil if that does not exist) and its canonical
// components.
func (m *Mem) followLink(op OpKind, orig string, dirParts []string, l *node, hops *int) (*node, []string, error) {
	_, dp, base, n, err := m.followLinkEntry(op, orig, dirParts, l, hops)
	if err != nil || base == "" {
		return n, dp, err
	}
	return n, append(dp[:len(dp):len(dp)], base), nil
}

// followLinkEntry resolves the link l found in the directory dirParts and
// returns the directory entry it finally names: the directory, its
// components, the base name and the node (nil if the entry does not
// exist, so that O_CREATE can create it). base is "" for the root.
func (m *Mem) followLinkEntry(op OpKind, orig string, dirParts []string, l *node, hops *int) (*node, []string, string, *node, error) {
	for {
		*hops++
		if *hops > maxLinkHops {
			return nil, nil, "", nil, pathErr(op, orig, syscall.ELOOP)
		}
		target := l.link
		if !path.IsAbs(target) {
			target = path.Join("/"+strings.Join(dirParts, "/"), target)
		}
		d, dp, base, err := m.walkParts(op, orig, components(target), hops)
		if err != nil {
			return nil, nil, "", nil, err
		}
		if base == "" {
			return d, nil, "", d, nil
		}
		n := d.children[base]
		if n == nil || n.link == "" {
			return d, dp, base, n, nil
		}
		l, dirParts = n, dp
	}
}

// resolve finds the entry name names: its directory, base name and node
// (nil if absent). With follow, a link in the last component is followed
// (to an absent entry, for O_CREATE, if it dangles).
func (m *Mem) resolve(op OpKind, name string, follow bool) (*node, string, *node, error) {
	if name == "" {
		return nil, "", nil, pathErr(op, name, syscall.ENOENT)
	}
	hops := 0
	d, dp, base, err := m.walkParts(op, name, components(name), &hops)
	if err != nil || base == "" {
		return d, base, d, err
	}
	n := d.children[base]
	if n == nil || n.link == "" || !follow {
		return d, base, n, nil
	}
	d, _, base, n, err = m.followLinkEntry(op, name, dp, n, &hops)
	return d, base, n, err
}

// linkInfo is the FileInfo of a link itself (ReadDir lists links as such).
func (n *node) linkInfo(name string) fs.FileInfo {
	return memInfo{name: name, mode: fs.ModeSymlink | 0o777, size: int64(len(n.link)), mtime: n.mtime}
}

// onPath reports whether the directory n is d or one of its ancestors, d
// being the directory walk found for name (links resolved).
func (m *Mem) onPath(d *node, name string, n *node) bool {
	hops := 0
	_, dp, _, err := m.walkParts(OpStat, name, components(name), &hops)
	if err != nil {
		return false
	}
	c := m.root
	for _, p := range dp {
		if c == n {
			return true
		}
		c = c.children[p]
	}
	return c == n || d == n
}
