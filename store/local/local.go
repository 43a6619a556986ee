package local

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/session"
	"github.com/warren-dev/warren/store"
)

// Options configures a Store. FS and Home are required.
type Options struct {
	FS   faultfs.FS
	Home string
	// Lock, if set, is the home's flock, released by Close.
	Lock *HomeLock
	// The store-wide eventlog.Options (see there); zero values are
	// eventlog's defaults.
	Logger      hclog.Logger
	Now         func() time.Time
	Files       *eventlog.Files
	PendingIdle time.Duration
	HealBackoff time.Duration
	// Syncer, if set, is shared by every log of the store (see
	// eventlog.Syncer): the daemon sets it, so that the fsyncs of agents
	// writing at the same moment are one flush of the home's filesystem.
	// Nil: each log fsyncs its own files. The caller closes it once the
	// store's logs are closed.
	Syncer *eventlog.Syncer
}

// Store is the file store of one home.
type Store struct {
	o     Options
	snaps *snapshots
}

var _ store.Store = (*Store)(nil)

// New returns the store of opts.Home. It opens nothing: logs are opened
// by OpenLog.
func New(opts Options) *Store {
	if opts.Logger == nil {
		opts.Logger = hclog.NewNullLogger()
	}
	dir := filepath.Join(opts.Home, "agents")
	return &Store{o: opts, snaps: &snapshots{fsys: opts.FS, dir: dir, st: session.NewStore(opts.FS, dir)}}
}

// AgentsDir is <home>/agents.
func (s *Store) AgentsDir() string { return filepath.Join(s.o.Home, "agents") }

// LogPath is the file of id's log (store.UserID: <home>/user.jsonl).
func (s *Store) LogPath(id string) string {
	if id == store.UserID {
		return filepath.Join(s.o.Home, "user.jsonl")
	}
	return filepath.Join(s.o.Home, "agents", id, "events.jsonl")
}

func checkID(id string) error {
	if id == store.UserID || session.ValidID(id) {
		return nil
	}
	return fmt.Errorf("store/local: %q is not an agent id (32 lowercase hex characters) nor %s", id, store.UserID)
}

// Agents lists the directories of <home>/agents named by an agent id that
// hold an events.jsonl.
func (s *Store) Agents(ctx context.Context) ([]string, error) {
	entries, err := s.o.FS.ReadDir(s.AgentsDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("store/local: list %s: %w", s.AgentsDir(), err)
	}
	var ids []string
	for _, e := range entries {
		if !e.IsDir() || !session.ValidID(e.Name()) {
			continue
		}
		if _, err := s.o.FS.Stat(s.LogPath(e.Name())); err == nil {
			ids = append(ids, e.Name())
		}
	}
	return ids, ctx.Err()
}

// OpenLog opens id's log with eventlog.Open.
func (s *Store) OpenLog(ctx context.Context, id string, o store.LogOptions) (store.Log, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	path := s.LogPath(id)
	lg, err := eventlog.Open(s.o.FS, path, eventlog.Options{
		Logger:        s.o.Logger,
		Now:           s.o.Now,
		OnAppend:      o.OnAppend,
		Replay:        o.Replay,
		ReplayBorrows: o.ReplayBorrows,
		ReadBuffer:    o.ReadBuffer,
		Resume:        o.Resume,
		PendingIdle:   s.o.PendingIdle,
		HealBackoff:   s.o.HealBackoff,
		OnHeal:        o.OnHeal,
		Files:         s.o.Files,
		Syncer:        s.o.Syncer,
		MustExist:     o.MustExist,
	})
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: %w", store.ErrNotFound, err)
		}
		return nil, err
	}
	return &Log{Log: lg, fsys: s.o.FS}, nil
}

// OpenLogs counts the logs of this store holding open file handles (0
// without Options.Files, which then caps nothing).
func (s *Store) OpenLogs() int {
	if s.o.Files == nil {
		return 0
	}
	return s.o.Files.Open()
}

// UserLog opens <home>/user.jsonl.
func (s *Store) UserLog(ctx context.Context, o store.LogOptions) (store.Log, error) {
	return s.OpenLog(ctx, store.UserID, o)
}

// Read returns an eventlog.Reader of id's log from the byte offset hint.
func (s *Store) Read(ctx context.Context, id string, fromSeq uint64, hint int64) (store.Reader, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	r, err := eventlog.NewReaderAt(s.o.FS, s.LogPath(id), fromSeq, hint)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %w", store.ErrNotFound, err)
	}
	return r, err
}

// ReadSeq is eventlog.ReadSeq on id's log.
func (s *Store) ReadSeq(ctx context.Context, id string, seq uint64, hint int64) (eventlog.Entry, error) {
	if err := checkID(id); err != nil {
		return eventlog.Entry{}, err
	}
	return eventlog.ReadSeq(s.o.FS, s.LogPath(id), seq, hint)
}

// ReadSeqs is eventlog.ReadSeqs of id's log.
func (s *Store) ReadSeqs(ctx context.Context, id string, at []eventlog.At, fn func(i int, e eventlog.Entry) error) error {
	if err := checkID(id); err != nil {
		return err
	}
	return eventlog.ReadSeqs(s.o.FS, s.LogPath(id), at, fn)
}

// Snapshots stores session.json files.
func (s *Store) Snapshots() store.Snapshots { return s.snaps }

// Own returns the home's lease: epoch 1, never lost.
func (s *Store) Own(ctx context.Context, id string) (store.Lease, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	return homeLease{id: id}, nil
}

// Close releases the home lock if the store holds it.
func (s *Store) Close() error { return s.o.Lock.Unlock() }

// Log is an eventlog.Log with the store's reads.
type Log struct {
	*eventlog.Log
	fsys faultfs.FS
}

// ReadAll is eventlog.ReadAll of the log's file.
func (l *Log) ReadAll(ctx context.Context) ([]eventlog.Entry, error) {
	return eventlog.ReadAll(l.fsys, l.Path())
}

type homeLease struct{ id string }

func (h homeLease) ID() string                      { return h.id }
func (homeLease) Epoch() uint64                     { return 1 }
func (homeLease) Lost() <-chan struct{}             { return nil }
func (homeLease) Expires() time.Time                { return time.Time{} }
func (homeLease) Release(ctx context.Context) error { return nil }

// Options returns the store's options (a restart opens New(Options())).
func (s *Store) Options() Options { return s.o }
