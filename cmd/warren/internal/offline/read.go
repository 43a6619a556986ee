package offline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path/filepath"

	"github.com/fsnotify/fsnotify"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/stderrlog"
)

// Read calls each for every entry of the log at path, in order, and
// returns how many there were. ref, the reference the user gave, goes into
// the error for a damaged log, with the repair command.
func Read(path, ref string, each func(eventlog.Entry) error) (int, error) {
	r, err := eventlog.NewReader(faultfs.OS{}, path, 0)
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	defer r.Close()
	n := 0
	for {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("read %s after %d entries: %w (if the log is damaged, run: warren repair %s)", path, n, err, ref)
		}
		if err := each(e); err != nil {
			return n, err
		}
		n++
	}
}

// Follow calls each for complete, CRC-valid entries as they are appended,
// until ctx ends (then it returns nil). It waits on fsnotify events for
// the log's directory; the watch is set before the first read, so no
// append between a read and the wait is missed.
func Follow(ctx context.Context, path string, each func(eventlog.Entry) error) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch %s: %w", path, err)
	}
	defer w.Close()
	if err := w.Add(filepath.Dir(path)); err != nil {
		return fmt.Errorf("watch %s: %w", filepath.Dir(path), err)
	}
	base := filepath.Base(path)
	wait := func(ctx context.Context) error {
		for {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case ev, ok := <-w.Events:
				if !ok {
					return errors.New("the file watcher stopped")
				}
				if filepath.Base(ev.Name) == base {
					return nil
				}
			case err, ok := <-w.Errors:
				if !ok {
					return errors.New("the file watcher stopped")
				}
				if errors.Is(err, fsnotify.ErrEventOverflow) {
					return nil // re-read; nothing is lost by reading again
				}
				return fmt.Errorf("watch %s: %w", path, err)
			}
		}
	}
	err = eventlog.Follow(ctx, faultfs.OS{}, path, 0, wait, each)
	if err != nil && ctx.Err() != nil {
		return nil // Ctrl-C
	}
	return err
}

// Stderr reads what the agent's processes wrote to stderr, oldest first,
// from the agent directory of the log at logPath: the files it read
// (none when nothing was kept) and their text. Neither file is followed
// if it is a symbolic link.
func Stderr(logPath string) (files []string, text []byte, err error) {
	dir := filepath.Dir(logPath)
	for _, name := range []string{stderrlog.Old, stderrlog.Name} {
		p := filepath.Join(dir, name)
		data, err := faultfs.ReadFileNoFollow(faultfs.OS{}, p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, nil, fmt.Errorf("read %s: %w", p, err)
		}
		files = append(files, p)
		text = append(text, data...)
	}
	return files, text, nil
}
