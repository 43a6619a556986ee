package session

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"

	"github.com/warren-dev/warren/atomicfile"
	"github.com/warren-dev/warren/faultfs"
)

// FileName is the snapshot's name inside an agent directory.
const FileName = "session.json"

// Store reads and writes session.json files under an agents directory
// (<home>/agents). Safe for concurrent use on different ids; callers
// serialise saves of one id (the daemon does so per agent).
type Store struct {
	fsys faultfs.FS
	dir  string
}

// NewStore returns a store for <agentsDir>/<id>/session.json.
func NewStore(fsys faultfs.FS, agentsDir string) *Store {
	return &Store{fsys: fsys, dir: agentsDir}
}

// Path returns the session.json path of id.
func (st *Store) Path(id string) string {
	return path.Join(st.dir, id, FileName)
}

// Save validates s and atomically replaces its session.json (mode 0600):
// durably when it holds a provider's state blob, else as a cache (no
// fsync: the log can rebuild it). The agent directory (and any missing
// parent) is created durably if missing.
func (st *Store) Save(s *Session) error {
	if err := s.Validate(); err != nil {
		return fmt.Errorf("session: refusing to save: %w", err)
	}
	// One line: indenting would rescan a multi-megabyte provider blob.
	data, err := json.Marshal(s)
	if err != nil {
		return fmt.Errorf("session: encode %s: %w", s.ID, err)
	}
	data = append(data, '\n')
	if err := st.ensureDir(s.ID); err != nil {
		return err
	}
	p := st.Path(s.ID)
	write := atomicfile.Write
	if len(s.ProviderState) == 0 {
		// Everything in it is in the log too (recovery rebuilds an
		// unreadable or missing session.json from it): not worth two
		// fsyncs per save (issue 38). A provider's state blob is not in
		// the log, so a snapshot with one is written durably.
		write = atomicfile.WriteCache
	}
	if err := write(st.fsys, p, data, 0o600); err != nil {
		return fmt.Errorf("session: save %s: %w", p, err)
	}
	return nil
}

func (st *Store) ensureDir(id string) error {
	dir := path.Join(st.dir, id)
	// Find the missing components, deepest first.
	var missing []string
	for d := dir; ; d = path.Dir(d) {
		_, err := st.fsys.Stat(d)
		if err == nil {
			break
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("session: stat %s: %w", d, err)
		}
		missing = append(missing, d)
		if parent := path.Dir(d); parent == d {
			break
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if err := st.fsys.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("session: create agent directory %s: %w", dir, err)
	}
	// Make each new entry durable: sync the parent of every created
	// directory, top first.
	for i := len(missing) - 1; i >= 0; i-- {
		parent := path.Dir(missing[i])
		if err := st.fsys.SyncDir(parent); err != nil {
			return fmt.Errorf("session: sync %s after creating %s: %w", parent, missing[i], err)
		}
	}
	return nil
}

// Load reads and validates id's session.json. A missing file is an error
// wrapping ErrNotExist; a malformed one wraps ErrInvalid and names the file
// and the field; a symbolic link is not followed (faultfs.ErrSymlink).
func (st *Store) Load(id string) (*Session, error) {
	if !ValidID(id) {
		return nil, fmt.Errorf("session: load %q: %w", id, &FieldError{Field: "id", Reason: "not 32 lowercase hex characters"})
	}
	p := st.Path(id)
	// Never through a symbolic link: a link at the snapshot's path is an
	// error naming it (faultfs.ErrSymlink).
	data, err := faultfs.ReadFileNoFollow(st.fsys, p)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("session: %s: %w", p, ErrNotExist)
		}
		return nil, fmt.Errorf("session: read %s: %w", p, err)
	}
	s, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("session: %s: %w", p, err)
	}
	if s.ID != id {
		return nil, fmt.Errorf("session: %s: %w", p, &FieldError{Field: "id", Reason: fmt.Sprintf("%q does not match the agent directory %q", s.ID, id)})
	}
	return s, nil
}

// Parse decodes and validates session.json content (see Load).
func Parse(data []byte) (*Session, error) {
	var s Session
	if err := json.Unmarshal(data, &s); err != nil {
		var fe *FieldError
		if errors.As(err, &fe) {
			return nil, fe
		}
		return nil, &FieldError{Field: "(document)", Reason: "not valid session JSON", Err: err}
	}
	if err := s.Validate(); err != nil {
		return nil, err
	}
	return &s, nil
}
