package engine

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path/filepath"

	"github.com/warren-dev/warren/checkpoint"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/store"
)

// Where checkpoints live. On the local store they are files beside each
// log, written by the daemon through faultfs (fileCheckpoints); a cluster
// store that keeps its own (store/jetstream's bucket) is used instead, so
// that a daemon taking over reads the checkpoints another one wrote. The
// format (package checkpoint) and the checks before use (ckptcheck.go)
// are the same for both.

// checkpointer is a store with checkpoints of its own.
type checkpointer interface {
	Checkpoints() store.Checkpoints
}

// checkpointsOf returns where the Core keeps checkpoints.
func (c *Core) checkpointsOf(st store.Store) store.Checkpoints {
	if cp, ok := st.(checkpointer); ok {
		return cp.Checkpoints()
	}
	return fileCheckpoints{fs: c.fs, dir: c.agentDir, logPath: c.logPath}
}

// fileCheckpoints are checkpoint.json files in the agents' directories.
type fileCheckpoints struct {
	fs           faultfs.FS
	dir, logPath func(id string) string
}

func (f fileCheckpoints) Load(_ context.Context, id string) ([]byte, error) {
	b, err := faultfs.ReadFile(f.fs, filepath.Join(f.dir(id), checkpoint.Name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("%w: %w", store.ErrNotFound, err)
	}
	return b, err
}

func (f fileCheckpoints) Save(_ context.Context, id string, data []byte) error {
	return checkpoint.WriteData(f.fs, f.dir(id), data)
}

func (f fileCheckpoints) Remove(_ context.Context, id string) error {
	err := f.fs.Remove(filepath.Join(f.dir(id), checkpoint.Name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

func (f fileCheckpoints) ResumeAt(_ context.Context, id string, seq uint64, off int64) (eventlog.Resume, error) {
	return eventlog.ResumeAt(f.fs, f.logPath(id), seq, off)
}
