package eventlog

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/warren-dev/warren/eventlog/record"
	"github.com/warren-dev/warren/faultfs"
)

// RepairReport says what Repair found and cut.
type RepairReport struct {
	// Path is the repaired log.
	Path string
	// Backup is the durable copy of the log taken before cutting it, or ""
	// when nothing was cut.
	Backup string
	// KeptEntries and LastSeq describe the log after the repair.
	KeptEntries int
	LastSeq     uint64
	// CutOffset is where the log was cut; CutBytes how many bytes were cut.
	CutOffset int64
	CutBytes  int64
	// FirstBadLine is the 1-based number of the first damaged line (0 when
	// nothing was cut) and Reason what was wrong with it.
	FirstBadLine int
	Reason       string
	// PendingBackup is where an unusable pending file was moved ("" if
	// none): one whose records would leave a gap after the cut.
	PendingBackup string
}

// Repair cuts the log at path back to its last good entry before the first
// damaged line, after copying the whole file durably to
// "<path>.corrupt-<UTC timestamp>". A pending file that no longer continues
// the log is moved aside the same way. A healthy log is left alone. Run it
// only while no process has the log open.
func Repair(fsys faultfs.FS, path string) (RepairReport, error) {
	rep := RepairReport{Path: path}
	if err := checkPath(path); err != nil {
		return rep, err
	}
	f, err := faultfs.OpenNoFollow(fsys, path, os.O_RDWR, 0)
	if err != nil {
		return rep, fmt.Errorf("eventlog: repair %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return rep, fmt.Errorf("eventlog: repair %s: %w", path, err)
	}
	sc := record.NewScanner(f, path, MaxLineBytes)
	err = sc.ScanToEnd()
	var ce *CorruptError
	switch {
	case errors.As(err, &ce):
		rep.FirstBadLine = ce.Line
		rep.Reason = ce.Reason
	case err != nil:
		return rep, err
	case sc.Torn().Bytes > 0:
		rep.FirstBadLine = sc.Lines() + 1
		rep.Reason = "torn tail: " + sc.Torn().Reason
	}
	rep.KeptEntries = sc.Lines()
	rep.LastSeq = sc.LastSeq()
	rep.CutOffset = sc.GoodEnd()
	rep.CutBytes = st.Size() - sc.GoodEnd()
	stamp := time.Now().UTC().Format(stampLayout)
	if rep.CutBytes > 0 {
		backup, err := copyAside(fsys, f, path, ".corrupt-"+stamp, 0, st.Size())
		if err != nil {
			return rep, err
		}
		rep.Backup = backup
		if err := f.Truncate(sc.GoodEnd()); err != nil {
			return rep, fmt.Errorf("eventlog: repair %s: truncate to %d bytes: %w (the copy %s is intact)", path, sc.GoodEnd(), err, backup)
		}
		if err := f.Sync(); err != nil {
			return rep, fmt.Errorf("eventlog: repair %s: fsync after truncating: %w (the copy %s is intact)", path, err, backup)
		}
	}

	// A pending file that would leave a gap can never be replayed.
	pp := PendingPath(path)
	pf, err := faultfs.OpenNoFollow(fsys, pp, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return rep, nil
	}
	if err != nil {
		return rep, fmt.Errorf("eventlog: repair %s: open %s: %w", path, pp, err)
	}
	_, perr := record.ReadGroup(pf, pp, sc.LastSeq())
	_ = pf.Close()
	if !errors.As(perr, &ce) {
		return rep, nil
	}
	aside, err := uniqueName(fsys, pp+".corrupt-"+stamp)
	if err != nil {
		return rep, err
	}
	if err := fsys.Rename(pp, aside); err != nil {
		return rep, fmt.Errorf("eventlog: repair %s: move %s aside: %w", path, pp, err)
	}
	if err := fsys.SyncDir(filepath.Dir(path)); err != nil {
		return rep, fmt.Errorf("eventlog: repair %s: fsync directory: %w", path, err)
	}
	rep.PendingBackup = aside
	return rep, nil
}

// uniqueName returns name, or name-N for the first N that does not exist.
func uniqueName(fsys faultfs.FS, name string) (string, error) {
	cand := name
	for i := 1; ; i++ {
		_, err := fsys.Stat(cand)
		if errors.Is(err, fs.ErrNotExist) {
			return cand, nil
		}
		if err != nil {
			return "", fmt.Errorf("eventlog: stat %s: %w", cand, err)
		}
		cand = fmt.Sprintf("%s-%d", name, i)
	}
}

// stampLayout is the UTC timestamp in the names of copies kept aside.
const stampLayout = "20060102T150405.000Z"

// copyAside copies the bytes of src from off to size durably to a new file
// named path+suffix (made unique) and returns its name.
func copyAside(fsys faultfs.FS, src faultfs.File, path, suffix string, off, size int64) (string, error) {
	name, err := uniqueName(fsys, path+suffix)
	if err != nil {
		return "", err
	}
	dst, err := fsys.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("eventlog: keep a copy of %s: create %s: %w", path, name, err)
	}
	buf := make([]byte, min(1<<20, max(size-off, 1)))
	for off < size {
		chunk := buf
		if rem := size - off; rem < int64(len(chunk)) {
			chunk = chunk[:rem]
		}
		n, rerr := src.ReadAt(chunk, off)
		if n > 0 {
			if w, werr := dst.Write(chunk[:n]); werr != nil || w != n {
				_ = dst.Close()
				return "", fmt.Errorf("eventlog: keep a copy of %s: write %s: %w", path, name, errors.Join(werr, io.ErrShortWrite))
			}
			off += int64(n)
		}
		if n == 0 && rerr == nil {
			rerr = io.ErrNoProgress
		}
		if rerr != nil && !(errors.Is(rerr, io.EOF) && off >= size) {
			_ = dst.Close()
			return "", fmt.Errorf("eventlog: keep a copy of %s: read at %d: %w", path, off, rerr)
		}
	}
	if err := dst.Sync(); err != nil {
		_ = dst.Close()
		return "", fmt.Errorf("eventlog: keep a copy of %s: fsync %s: %w", path, name, err)
	}
	if err := dst.Close(); err != nil {
		return "", fmt.Errorf("eventlog: keep a copy of %s: close %s: %w", path, name, err)
	}
	if err := fsys.SyncDir(filepath.Dir(path)); err != nil {
		return "", fmt.Errorf("eventlog: keep a copy of %s: fsync directory: %w", path, err)
	}
	return name, nil
}
