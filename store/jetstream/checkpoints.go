package jetstream

import (
	"context"
	"errors"
	"fmt"
	"io/fs"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/eventlog/record"
	"github.com/warren-dev/warren/store"
)

// Checkpoints (bucket warren-checkpoints): the daemon's fold of each
// agent's log at one of its entries, so that a recovery from the cluster
// reads a checkpoint and the entries after it instead of every entry
// (doc.go, "Checkpoints"). A value is package checkpoint's bytes, as
// store/local keeps them in checkpoint.json; one larger than a message
// is not kept (the agent's recovery folds its whole log).

// checkpoints is the store.Checkpoints of a Store.
type checkpoints struct {
	s  *Store
	kv jetstream.KeyValue
}

var _ store.Checkpoints = (*checkpoints)(nil)

// Checkpoints returns the store's checkpoints.
func (s *Store) Checkpoints() store.Checkpoints { return &checkpoints{s: s, kv: s.ckpts} }

func (c *checkpoints) Load(ctx context.Context, id string) ([]byte, error) {
	if err := checkID(id); err != nil {
		return nil, err
	}
	e, err := c.kv.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) || errors.Is(err, jetstream.ErrKeyDeleted) {
		return nil, fmt.Errorf("store/jetstream: checkpoint of %s: %w: %w", id, store.ErrNotFound, fs.ErrNotExist)
	}
	if err != nil {
		return nil, unavailable(fmt.Errorf("store/jetstream: checkpoint of %s: %w", id, err))
	}
	return e.Value(), nil
}

func (c *checkpoints) Save(ctx context.Context, id string, data []byte) error {
	if err := checkID(id); err != nil {
		return err
	}
	if max := int(c.s.nc.MaxPayload()) - 1024; len(data) > max {
		return fmt.Errorf("store/jetstream: the checkpoint of %s is %d bytes, over one message (%d): not kept; its recovery folds the whole log", id, len(data), max)
	}
	if _, err := c.kv.Put(ctx, id, data); err != nil {
		return unavailable(fmt.Errorf("store/jetstream: saving the checkpoint of %s: %w", id, err))
	}
	return nil
}

func (c *checkpoints) Remove(ctx context.Context, id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	if err := c.kv.Delete(ctx, id); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return unavailable(fmt.Errorf("store/jetstream: removing the checkpoint of %s: %w", id, err))
	}
	return nil
}

func (c *checkpoints) ResumeAt(ctx context.Context, id string, seq uint64, off int64) (eventlog.Resume, error) {
	return c.s.resumeAt(ctx, Subject(id), seq, off)
}

// resumeAt reads the message at stream seq off from the stream's leader,
// checks that it is entry seq of subj's log, and returns its resume point
// (a checkpoint's line, or one OpenLog is asked to resume at).
func (s *Store) resumeAt(ctx context.Context, subj string, seq uint64, off int64) (eventlog.Resume, error) {
	if off <= 0 {
		return eventlog.Resume{}, fmt.Errorf("store/jetstream: %s seq %d: no stream position: %w", subj, seq, eventlog.ErrResumeMismatch)
	}
	m, err := s.leaderGet(ctx, msgGetRequest{Seq: uint64(off)})
	if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return eventlog.Resume{}, unavailable(fmt.Errorf("store/jetstream: %s seq %d at stream seq %d: %w", subj, seq, off, err))
	}
	if err != nil {
		m = nil
	}
	return resumeOf(subj, seq, off, m)
}

// resumeOf checks that m (nil: none) is entry seq of subj's log at
// stream seq off, and returns its resume point.
func resumeOf(subj string, seq uint64, off int64, m *jetstream.RawStreamMsg) (eventlog.Resume, error) {
	if m == nil || m.Subject != subj || m.Sequence != uint64(off) {
		return eventlog.Resume{}, fmt.Errorf("store/jetstream: %s seq %d: no entry of the log at stream seq %d: %w", subj, seq, off, eventlog.ErrResumeMismatch)
	}
	e, err := decode(subj, m.Sequence, m.Data)
	if err != nil || e.Seq != seq {
		return eventlog.Resume{}, fmt.Errorf("store/jetstream: %s seq %d: stream seq %d holds another line: %w", subj, seq, off, eventlog.ErrResumeMismatch)
	}
	return eventlog.Resume{Seq: seq, Off: off, CRC: record.LineCRC(m.Data), Len: int64(len(m.Data))}, nil
}
