package agentload

import (
	"fmt"

	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/tree"
)

// IDs lists the agents a recovery reads back: the directories of dir
// (<home>/agents) named by a normalized agent id, as always (a directory
// without a log is settled by recovery), then, when more is not nil (a
// store other than the local one), the store's agents not listed yet.
func IDs(fsys faultfs.FS, dir string, more func() ([]string, error)) ([]string, error) {
	entries, err := fsys.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("listing %s: %w", dir, err)
	}
	var ids []string
	seen := map[string]bool{}
	for _, e := range entries {
		if id, ok := tree.NormalizeID(e.Name()); ok && id == e.Name() && e.IsDir() {
			ids = append(ids, id)
			seen[id] = true
		}
	}
	if more == nil {
		return ids, nil
	}
	stored, err := more()
	if err != nil {
		return nil, fmt.Errorf("listing the agents of the store: %w", err)
	}
	for _, id := range stored {
		if !seen[id] {
			ids = append(ids, id)
		}
	}
	return ids, nil
}

// RemoveOrphanDir removes dir/id, the directory of an agent whose
// creation failed before its agent.created was durable, with what it
// holds (one level: a log, a WAL, a session.json), and syncs dir. It is
// best effort: what cannot be removed is settled by the next recovery.
func RemoveOrphanDir(fsys faultfs.FS, dir, id string) {
	d := dir + "/" + id
	entries, err := fsys.ReadDir(d)
	if err != nil {
		return
	}
	for _, e := range entries {
		_ = fsys.Remove(d + "/" + e.Name())
	}
	_ = fsys.Remove(d)
	_ = fsys.SyncDir(dir)
}
