package homedir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestPrepare(t *testing.T) {
	base := t.TempDir()
	mk := func(t *testing.T, path string, mode os.FileMode) {
		t.Helper()
		if err := os.MkdirAll(path, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("a missing home is created 0700", func(t *testing.T) {
		home := filepath.Join(base, "new", "deeper", "h")
		if err := Prepare(home); err != nil {
			t.Fatal(err)
		}
		if st, err := os.Stat(home); err != nil || st.Mode().Perm() != 0o700 {
			t.Fatalf("home mode %v, %v", st.Mode(), err)
		}
	})
	t.Run("readable home is tightened to 0700", func(t *testing.T) {
		home := filepath.Join(base, "readable")
		mk(t, home, 0o755)
		if err := Prepare(home); err != nil {
			t.Fatal(err)
		}
		if st, _ := os.Stat(home); st.Mode().Perm() != 0o700 {
			t.Fatalf("home mode %v", st.Mode())
		}
	})
	t.Run("home reached through a link is checked at its target", func(t *testing.T) {
		real := filepath.Join(base, "real")
		mk(t, real, 0o700)
		link := filepath.Join(base, "link")
		if err := os.Symlink(real, link); err != nil {
			t.Fatal(err)
		}
		if err := Prepare(link); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(real, 0o777); err != nil {
			t.Fatal(err)
		}
		if err := Prepare(link); !errors.Is(err, ErrUnsafeHome) {
			t.Fatalf("world-writable target: %v", err)
		}
	})
	t.Run("sticky world-writable parent is accepted", func(t *testing.T) {
		parent := filepath.Join(base, "sticky")
		mk(t, parent, 0o777|os.ModeSticky)
		if err := Prepare(filepath.Join(parent, "h")); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("non-sticky writable parent is refused", func(t *testing.T) {
		parent := filepath.Join(base, "open")
		mk(t, filepath.Join(parent, "h"), 0o700)
		if err := os.Chmod(parent, 0o777); err != nil {
			t.Fatal(err)
		}
		err := Prepare(filepath.Join(parent, "h"))
		if !errors.Is(err, ErrUnsafeHome) || !strings.Contains(err.Error(), "a parent of the home") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("agents as a symbolic link is refused", func(t *testing.T) {
		home := filepath.Join(base, "linkedagents")
		mk(t, home, 0o700)
		elsewhere := filepath.Join(base, "elsewhere")
		mk(t, elsewhere, 0o700)
		if err := os.Symlink(elsewhere, filepath.Join(home, "agents")); err != nil {
			t.Fatal(err)
		}
		if err := Prepare(home); !errors.Is(err, ErrUnsafeHome) || !strings.Contains(err.Error(), "symbolic link") {
			t.Fatalf("err = %v", err)
		}
	})
	t.Run("home that is a file is refused", func(t *testing.T) {
		home := filepath.Join(base, "file")
		if err := os.WriteFile(home, nil, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := Prepare(home); !errors.Is(err, ErrUnsafeHome) {
			t.Fatalf("err = %v", err)
		}
	})
}
