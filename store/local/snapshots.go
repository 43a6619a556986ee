package local

import (
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/session"
	"github.com/warren-dev/warren/store"
)

// snapshots is session.Store (atomicfile under agents/<id>/session.json).
type snapshots struct {
	fsys faultfs.FS
	dir  string
	st   *session.Store
}

func (s *snapshots) Save(sn *session.Session) error { return s.st.Save(sn) }

func (s *snapshots) Load(id string) (*session.Session, error) {
	sn, err := s.st.Load(id)
	if errors.Is(err, session.ErrNotExist) {
		return nil, fmt.Errorf("%w: %w", store.ErrNotFound, err)
	}
	return sn, err
}

// Remove deletes session.json and makes the removal durable.
func (s *snapshots) Remove(id string) error {
	if !session.ValidID(id) {
		return fmt.Errorf("store/local: remove snapshot of %q: not an agent id", id)
	}
	p := s.st.Path(id)
	err := s.fsys.Remove(p)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("store/local: remove %s: %w", p, err)
	}
	if err := s.fsys.SyncDir(filepath.Dir(p)); err != nil {
		return fmt.Errorf("store/local: fsync %s after removing %s: %w", filepath.Dir(p), p, err)
	}
	return nil
}
