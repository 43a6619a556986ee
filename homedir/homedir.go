// Package homedir is the home directory of a warren installation (SPEC 2):
// where its files are (SocketPath, LockPath, PidPath), and the check that
// makes a home safe to run from (Prepare), which the daemon and the CLI
// both run.
package homedir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// ErrUnsafeHome is returned (wrapped) by Prepare for a home directory,
// an agents/ directory or a parent of the home that another user controls:
// the daemon runs the programs named in the agents it finds there, so a
// home that someone else can write is a home someone else commands.
var ErrUnsafeHome = errors.New("unsafe home directory")

// ErrUnsafeSocketPath is returned (wrapped) when something other than a
// socket sits at daemon.sock: it is never removed or replaced.
var ErrUnsafeSocketPath = errors.New("daemon.sock is not a socket")

// Prepare creates home (mode 0700, with any missing parents) when it is
// missing, and then checks it the way OpenSSH's StrictModes checks ~/.ssh:
// the home and its agents/ directory (when present) must be directories
// owned by the daemon's effective uid and not writable by group or others,
// and every parent of the home must be owned by that uid or by root and not
// writable by group or others unless it has the sticky bit (like /tmp). A
// home it owns with looser read or search bits is tightened to 0700, as
// SPEC 2 asks. The error wraps ErrUnsafeHome and says how to fix it.
func Prepare(home string) error {
	home, err := filepath.Abs(home)
	if err != nil {
		return fmt.Errorf("home %q: %w", home, err)
	}
	if _, err := os.Lstat(home); errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(home, 0o700); err != nil {
			return fmt.Errorf("creating home %s: %w", home, err)
		}
	}
	uid := os.Geteuid()
	st, err := os.Stat(home)
	if err != nil {
		return homeStatErr(home, err)
	}
	if err := checkOwnDir(home, "home", st, uid); err != nil {
		return err
	}
	if err := checkParents(home, uid); err != nil {
		return err
	}
	if real, err := filepath.EvalSymlinks(home); err == nil && real != home {
		if err := checkParents(real, uid); err != nil {
			return err
		}
	}
	if st.Mode().Perm() != 0o700 {
		if err := os.Chmod(home, 0o700); err != nil {
			return fmt.Errorf("securing home %s (chmod 0700): %w", home, err)
		}
	}
	agents := filepath.Join(home, "agents")
	ast, err := os.Lstat(agents)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil // recovery creates it, 0700
	case err != nil:
		return homeStatErr(agents, err)
	case ast.Mode()&fs.ModeSymlink != 0:
		return fmt.Errorf("%w: %s is a symbolic link; warren keeps its agents in a real directory inside the home: "+
			"replace the link by the directory it points to (mv), or choose another --home", ErrUnsafeHome, agents)
	}
	return checkOwnDir(agents, "agents directory", ast, uid)
}

// checkOwnDir checks that st (of path) is a directory owned by uid and not
// writable by group or others.
func checkOwnDir(path, what string, st fs.FileInfo, uid int) error {
	if !st.IsDir() {
		return fmt.Errorf("%w: the %s %s is not a directory (%s); move it away or choose another --home",
			ErrUnsafeHome, what, path, st.Mode().Type())
	}
	if owner := fileOwner(st); owner != uid {
		return fmt.Errorf("%w: the %s %s is owned by uid %d, but the daemon runs as uid %d: that user could plant agents "+
			"whose programs the daemon would run, or answer in its place. Use a home you own (--home or WARREN_HOME), "+
			"or if this one is really yours: chown -R %d %s",
			ErrUnsafeHome, what, path, owner, uid, uid, path)
	}
	if st.Mode().Perm()&0o022 != 0 {
		return fmt.Errorf("%w: the %s %s has mode %04o: group or others can write it, and could plant agents whose "+
			"programs the daemon would run. Fix it with: chmod go-w %s (warren makes its directories 0700)",
			ErrUnsafeHome, what, path, st.Mode().Perm(), path)
	}
	return nil
}

// checkParents checks every parent directory of path: owned by uid or root,
// and not writable by group or others unless sticky (whoever can write a
// parent can rename the home away and put their own in its place).
func checkParents(path string, uid int) error {
	for dir := filepath.Dir(path); ; dir = filepath.Dir(dir) {
		st, err := os.Stat(dir)
		if err != nil {
			return homeStatErr(dir, err)
		}
		owner := fileOwner(st)
		switch {
		case owner != uid && owner != 0:
			return fmt.Errorf("%w: %s, a parent of the home %s, is owned by uid %d (the daemon runs as uid %d): "+
				"that user could replace the home with their own. Choose a home under a directory that only you or root control",
				ErrUnsafeHome, dir, path, owner, uid)
		case st.Mode().Perm()&0o022 != 0 && st.Mode()&fs.ModeSticky == 0:
			return fmt.Errorf("%w: %s, a parent of the home %s, has mode %04o: group or others can write it and could "+
				"replace the home with their own. Fix it with: chmod go-w %s, or choose another home",
				ErrUnsafeHome, dir, path, st.Mode().Perm(), dir)
		}
		if dir == filepath.Dir(dir) {
			return nil
		}
	}
}

// homeStatErr explains a failed look at a home path.
func homeStatErr(path string, err error) error {
	if errors.Is(err, fs.ErrPermission) {
		return fmt.Errorf("%w: cannot look at %s: %w; the home must be a directory you own: "+
			"run warren as its owner, or choose your own home with --home or WARREN_HOME", ErrUnsafeHome, path, err)
	}
	return fmt.Errorf("checking %s: %w", path, err)
}

// fileOwner is the uid that owns the file st describes (-1 if unknown).
func fileOwner(st fs.FileInfo) int {
	if s, ok := st.Sys().(*syscall.Stat_t); ok {
		return int(s.Uid)
	}
	return -1
}

// CheckSocketFile refuses anything but a socket (or nothing) at path:
// a regular file, directory or symbolic link there is never removed.
func CheckSocketFile(path string) error {
	st, err := os.Lstat(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("checking %s: %w", path, err)
	case st.Mode()&fs.ModeSocket != 0:
		return nil
	}
	kind := "a regular file"
	switch {
	case st.Mode()&fs.ModeSymlink != 0:
		kind = "a symbolic link"
	case st.IsDir():
		kind = "a directory"
	case !st.Mode().IsRegular():
		kind = "a " + st.Mode().Type().String() + " file"
	}
	return fmt.Errorf("%w: %s is %s; warren only removes a stale socket it finds there. "+
		"Look at it, move it away (mv), then start the daemon again", ErrUnsafeSocketPath, path, kind)
}

// Same reports whether the paths a and b name the same home directory
// (the same file, whatever symbolic links lead to it).
func Same(a, b string) bool {
	sa, err := os.Stat(a)
	if err != nil {
		return false
	}
	sb, err := os.Stat(b)
	if err != nil {
		return false
	}
	return os.SameFile(sa, sb)
}

// SocketPath is the daemon's socket in home.
func SocketPath(home string) string { return filepath.Join(home, "daemon.sock") }

// LockPath is the lock file the running daemon holds.
func LockPath(home string) string { return filepath.Join(home, "daemon.lock") }

// PidPath is the running daemon's pid file.
func PidPath(home string) string { return filepath.Join(home, "daemon.pid") }
