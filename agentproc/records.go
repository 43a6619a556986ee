package agentproc

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"strings"

	"github.com/warren-dev/warren/atomicfile"
	"github.com/warren-dev/warren/faultfs"
)

// Records stores process records in a directory, one file per process.
type Records struct {
	FS  faultfs.FS
	Dir string
}

// Add writes a record durably (the directory is created if needed).
func (r Records) Add(rec Record) error {
	data, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("encoding the process record: %w", err)
	}
	if err := r.FS.MkdirAll(r.Dir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", r.Dir, err)
	}
	if err := atomicfile.Write(r.FS, filepath.Join(r.Dir, rec.FileName()), data, 0o600); err != nil {
		return fmt.Errorf("recording agent process %d: %w", rec.Pid, err)
	}
	return nil
}

// Remove deletes a record. It need not be durable: a record that comes back
// after a crash names a process that no longer matches, or one to kill.
func (r Records) Remove(rec Record) error {
	return r.removeName(rec.FileName())
}

func (r Records) removeName(name string) error {
	if err := r.FS.Remove(filepath.Join(r.Dir, name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing process record %s: %w", name, err)
	}
	return nil
}

// Bad is a record file that cannot be read.
type Bad struct {
	Name string
	Err  error
}

// List returns the records in the directory (none when it is missing) and
// the files that are not valid records. Temporary files of interrupted
// writes are removed.
func (r Records) List() ([]Record, []Bad, error) {
	entries, err := r.FS.ReadDir(r.Dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("listing %s: %w", r.Dir, err)
	}
	_ = atomicfile.CleanTemps(r.FS, r.Dir)
	var recs []Record
	var bad []Bad
	for _, e := range entries {
		name := e.Name()
		if !strings.HasSuffix(name, ".json") {
			continue
		}
		data, err := faultfs.ReadFile(r.FS, filepath.Join(r.Dir, name))
		if err != nil {
			bad = append(bad, Bad{Name: name, Err: err})
			continue
		}
		var rec Record
		if err := json.Unmarshal(data, &rec); err != nil || rec.FileName() != name {
			if err == nil {
				err = errors.New("its content does not match its name")
			}
			bad = append(bad, Bad{Name: name, Err: err})
			continue
		}
		recs = append(recs, rec)
	}
	return recs, bad, nil
}

// Clear removes the named record files (after recovery has dealt with
// them) and syncs the directory.
func (r Records) Clear(names []string) error {
	var errs []error
	for _, n := range names {
		errs = append(errs, r.removeName(n))
	}
	if len(names) > 0 {
		errs = append(errs, r.FS.SyncDir(r.Dir))
	}
	return errors.Join(errs...)
}
