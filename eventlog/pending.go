package eventlog

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"

	"github.com/warren-dev/warren/eventlog/record"
	"github.com/warren-dev/warren/faultfs"
)

// replayPending appends the records of a complete pending group that the
// log lacks and removes the pending file. Before touching the log it makes
// the pending file and its directory entry durable (a crash may have hit
// before either was), so a crash during the replay finds it again. Running
// it again after a crash at any point gives the same log.
func (l *Log) replayPending(f faultfs.File, size int64) error {
	pf, err := faultfs.OpenNoFollow(l.fsys, l.pendingPath, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("eventlog: open pending file %s: %w", l.pendingPath, err)
	}
	pc, err := record.ReadGroup(pf, l.pendingPath, l.lastSeq)
	if err == nil && len(pc.Add) > 0 {
		if err = pf.Sync(); err != nil {
			err = fmt.Errorf("eventlog: fsync pending file %s before replay: %w", l.pendingPath, err)
		} else if err = l.fsys.SyncDir(l.dir); err != nil {
			err = fmt.Errorf("eventlog: fsync directory %s before replay: %w", l.dir, err)
		}
	}
	_ = pf.Close()
	if err != nil {
		return err
	}
	if pc.Discarded != "" {
		l.logger.Warn("discarding incomplete pending file (its group was never acknowledged)",
			"path", l.pendingPath, "reason", pc.Discarded)
	} else {
		l.logger.Info("replaying pending file", "path", l.pendingPath,
			"append", len(pc.Seqs), "already_in_log", pc.Skipped)
	}
	if len(pc.Add) > 0 {
		n, err := f.Write(pc.Add)
		if err == nil && n != len(pc.Add) {
			err = fmt.Errorf("wrote %d of %d bytes: %w", n, len(pc.Add), io.ErrShortWrite)
		}
		if err != nil {
			return fmt.Errorf("eventlog: replay %s into %s: %w", l.pendingPath, l.path, err)
		}
		if err := f.Sync(); err != nil {
			return fmt.Errorf("eventlog: fsync %s after replaying %s: %w", l.path, l.pendingPath, err)
		}
		l.lastSeq = pc.Seqs[len(pc.Seqs)-1]
		if l.replay != nil {
			if err := record.EachLine(pc.Add, size, l.replay); err != nil {
				return fmt.Errorf("eventlog: replaying the pending records of %s: %w", l.path, err)
			}
		}
	}
	if err := l.fsys.Remove(l.pendingPath); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("eventlog: remove pending file %s: %w", l.pendingPath, err)
	}
	if err := l.fsys.SyncDir(l.dir); err != nil {
		return fmt.Errorf("eventlog: fsync directory %s after removing %s: %w", l.dir, l.pendingPath, err)
	}
	return nil
}
