package faultfs

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// eachFS runs f on OS (in a temp dir) and on Mem, with a root directory.
func eachFS(t *testing.T, f func(t *testing.T, fsys FS, root string)) {
	t.Run("OS", func(t *testing.T) { f(t, OS{}, t.TempDir()) })
	t.Run("Mem", func(t *testing.T) {
		m := NewMem()
		must(t, m.MkdirAll("/root", 0o755))
		f(t, m, "/root")
	})
}

func TestNoFollowRefusesALinkAndLeavesItsTargetAlone(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys FS, root string) {
		target := filepath.Join(root, "target")
		link := filepath.Join(root, "link")
		mustWrite(t, fsys, target, []byte("precious"))
		must(t, fsys.(Symlinker).Symlink(target, link))
		for _, flag := range []int{os.O_RDONLY, os.O_RDWR | os.O_APPEND | os.O_CREATE, os.O_RDWR | os.O_TRUNC} {
			if f, err := fsys.OpenFile(link, flag|O_NOFOLLOW, 0o600); !errors.Is(err, syscall.ELOOP) {
				if f != nil {
					f.Close()
				}
				t.Fatalf("OpenFile(link, %#x|O_NOFOLLOW) = %v, want ELOOP", flag, err)
			}
		}
		wantContent(t, fsys, target, []byte("precious"))
		// Without the flag the link is followed (the kernel's default).
		wantContent(t, fsys, link, []byte("precious"))
		// A dangling link is not followed to create its target either.
		dangling := filepath.Join(root, "dangling")
		must(t, fsys.(Symlinker).Symlink(filepath.Join(root, "nowhere"), dangling))
		if _, err := fsys.OpenFile(dangling, os.O_RDWR|os.O_CREATE|O_NOFOLLOW, 0o600); !errors.Is(err, syscall.ELOOP) {
			t.Fatalf("O_CREATE|O_NOFOLLOW on a dangling link = %v, want ELOOP", err)
		}
		wantAbsent(t, fsys, filepath.Join(root, "nowhere"))
		// A regular file opens normally with the flag.
		f, err := fsys.OpenFile(target, os.O_RDONLY|O_NOFOLLOW, 0)
		must(t, err)
		must(t, f.Close())
		// ReadDir lists the link as a link; Stat follows it.
		ents, err := fsys.ReadDir(root)
		must(t, err)
		for _, e := range ents {
			if e.Name() == "link" && e.Type()&fs.ModeSymlink == 0 {
				t.Fatalf("ReadDir lists the link as %v", e.Type())
			}
		}
		st, err := fsys.Stat(link)
		must(t, err)
		if st.Size() != int64(len("precious")) {
			t.Fatalf("Stat(link) size %d: Stat must follow the link", st.Size())
		}
		// Remove removes the link, not its target.
		must(t, fsys.Remove(link))
		wantContent(t, fsys, target, []byte("precious"))
	})
}

func TestMemLinksSurvivePowerLossOnlyWhenSynced(t *testing.T) {
	m := NewMem()
	must(t, m.MkdirAll("/d", 0o755))
	must(t, m.SyncDir("/"))
	must(t, m.Symlink("/d/t", "/d/synced"))
	must(t, m.SyncDir("/d"))
	must(t, m.Symlink("/d/t", "/d/unsynced"))
	m.Reboot(RebootOptions{Mode: PowerLoss})
	ents, err := m.ReadDir("/d")
	must(t, err)
	if len(ents) != 1 || ents[0].Name() != "synced" || ents[0].Type()&fs.ModeSymlink == 0 {
		t.Fatalf("after power loss: %v, want only the synced link", ents)
	}
}

func TestMemLinkLoopIsELOOP(t *testing.T) {
	m := NewMem()
	must(t, m.Symlink("/b", "/a"))
	must(t, m.Symlink("/a", "/b"))
	if _, err := m.Stat("/a"); !errors.Is(err, syscall.ELOOP) {
		t.Fatalf("Stat of a link loop = %v, want ELOOP", err)
	}
	if _, err := m.OpenFile("/a/x", os.O_RDONLY, 0); !errors.Is(err, syscall.ELOOP) {
		t.Fatalf("open below a link loop = %v, want ELOOP", err)
	}
}

func TestOpenNoFollowNamesThePath(t *testing.T) {
	eachFS(t, func(t *testing.T, fsys FS, root string) {
		link := filepath.Join(root, "session.json")
		mustWrite(t, fsys, filepath.Join(root, "t"), []byte("x"))
		must(t, fsys.(Symlinker).Symlink(filepath.Join(root, "t"), link))
		_, err := ReadFileNoFollow(fsys, link)
		if !errors.Is(err, ErrSymlink) || !errors.Is(err, syscall.ELOOP) || !strings.Contains(err.Error(), link) {
			t.Fatalf("ReadFileNoFollow(link) = %v, want ErrSymlink naming %s", err, link)
		}
		if b, err := ReadFileNoFollow(fsys, filepath.Join(root, "t")); err != nil || string(b) != "x" {
			t.Fatalf("ReadFileNoFollow(file) = %q, %v", b, err)
		}
	})
}
