package workspace

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// CopyMax is the largest file CopyFiles copies.
const CopyMax = 5 << 20

// ErrBadCopy marks a copy entry that is refused.
var ErrBadCopy = errors.New("refused copy entry")

// CopyFiles copies into the new worktree dst the files of repo that
// entries list (paths relative to the repository, the gitignored files a
// worktree lacks: ".env", say). "PATH:symlink" links to the file instead
// of copying it. Each path must resolve inside the repository (no "..",
// no absolute path, no link leading out) to a regular file of at most
// CopyMax bytes; a file that is not there is skipped.
func CopyFiles(repo, dst string, entries []string) error {
	for _, e := range entries {
		rel, link := strings.CutSuffix(e, ":symlink")
		src, err := Inside(repo, rel)
		if err != nil {
			return err
		}
		fi, err := os.Stat(src)
		if errors.Is(err, os.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("copy %q: %w", e, err)
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("%w: %q is not a regular file", ErrBadCopy, e)
		}
		if fi.Size() > CopyMax {
			return fmt.Errorf("%w: %q is %d bytes, over the %d-byte limit of a copied file", ErrBadCopy, e, fi.Size(), CopyMax)
		}
		to := filepath.Join(dst, filepath.Clean(rel))
		if err := os.MkdirAll(filepath.Dir(to), 0o700); err != nil {
			return err
		}
		if link {
			if err := os.Symlink(src, to); err != nil && !errors.Is(err, os.ErrExist) {
				return fmt.Errorf("copy %q: %w", e, err)
			}
			continue
		}
		if err := copyFile(src, to, fi.Mode().Perm()); err != nil {
			return fmt.Errorf("copy %q: %w", e, err)
		}
	}
	return nil
}

// Inside resolves rel inside repo and refuses what leads out of it: an
// absolute path, "..", or a link (anywhere on the way) to outside.
func Inside(repo, rel string) (string, error) {
	if rel == "" || filepath.IsAbs(rel) {
		return "", fmt.Errorf("%w: %q must be a path relative to the repository", ErrBadCopy, rel)
	}
	clean := filepath.Clean(rel)
	if clean == ".." || strings.HasPrefix(clean, "../") {
		return "", fmt.Errorf("%w: %q leads out of the repository", ErrBadCopy, rel)
	}
	root, err := filepath.EvalSymlinks(repo)
	if err != nil {
		return "", err
	}
	p := filepath.Join(root, clean)
	real, err := filepath.EvalSymlinks(p)
	if errors.Is(err, os.ErrNotExist) {
		return p, nil
	}
	if err != nil {
		return "", err
	}
	if real != root && !strings.HasPrefix(real, root+string(filepath.Separator)) {
		return "", fmt.Errorf("%w: %q leads out of the repository (to %s)", ErrBadCopy, rel, real)
	}
	return real, nil
}

// copyFile copies src to dst (created with perm, replaced if there).
func copyFile(src, dst string, perm os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, perm)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, io.LimitReader(in, CopyMax+1)); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
