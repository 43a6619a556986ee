package jetstream

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/warren-dev/warren/session"
	"github.com/warren-dev/warren/store"
)

// snapshots keeps session snapshots in the sessions bucket, with those
// too large for one message in the object store (doc.go).
type snapshots struct {
	kv        jetstream.KeyValue
	obj       jetstream.ObjectStore
	inlineMax int
	timeout   time.Duration
}

// Value tags (doc.go).
const (
	tagInline = 'I'
	tagObject = 'O'
)

type blobRef struct {
	Size   int    `json:"size"`
	SHA256 string `json:"sha256"`
}

func (s *snapshots) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 4*s.timeout)
}

// Save writes the snapshot as session.Store would write session.json
// (one JSON line), inline or as an object.
func (s *snapshots) Save(sn *session.Session) error {
	if err := sn.Validate(); err != nil {
		return fmt.Errorf("store/jetstream: refusing to save a snapshot: %w", err)
	}
	data, err := json.Marshal(sn)
	if err != nil {
		return fmt.Errorf("store/jetstream: encode snapshot %s: %w", sn.ID, err)
	}
	data = append(data, '\n')
	ctx, cancel := s.ctx()
	defer cancel()
	if len(data)+1 <= s.inlineMax {
		if _, err := s.kv.Put(ctx, sn.ID, append([]byte{tagInline}, data...)); err != nil {
			return fmt.Errorf("store/jetstream: save snapshot %s: %w", sn.ID, err)
		}
		if err := s.obj.Delete(ctx, sn.ID); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
			return fmt.Errorf("store/jetstream: drop the old large snapshot of %s: %w", sn.ID, err)
		}
		return nil
	}
	if _, err := s.obj.PutBytes(ctx, sn.ID, data); err != nil {
		return fmt.Errorf("store/jetstream: save snapshot %s (%d bytes) to %s: %w", sn.ID, len(data), BlobBucket, err)
	}
	sum := sha256.Sum256(data)
	ref, _ := json.Marshal(blobRef{Size: len(data), SHA256: hex.EncodeToString(sum[:])})
	if _, err := s.kv.Put(ctx, sn.ID, append([]byte{tagObject}, ref...)); err != nil {
		return fmt.Errorf("store/jetstream: save snapshot %s: %w", sn.ID, err)
	}
	return nil
}

// Load reads and validates id's snapshot.
func (s *snapshots) Load(id string) (*session.Session, error) {
	if !session.ValidID(id) {
		return nil, fmt.Errorf("store/jetstream: load snapshot %q: not an agent id", id)
	}
	ctx, cancel := s.ctx()
	defer cancel()
	var err error
	for attempt := 0; attempt < 3; attempt++ { // a concurrent Save may replace the object under a reference
		var data []byte
		data, err = s.read(ctx, id)
		if err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return nil, err
			}
			continue
		}
		sn, perr := session.Parse(data)
		if perr != nil {
			return nil, fmt.Errorf("store/jetstream: snapshot %s: %w", id, perr)
		}
		if sn.ID != id {
			return nil, fmt.Errorf("store/jetstream: snapshot under %s holds agent %s", id, sn.ID)
		}
		return sn, nil
	}
	return nil, err
}

func (s *snapshots) read(ctx context.Context, id string) ([]byte, error) {
	e, err := s.kv.Get(ctx, id)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, fmt.Errorf("store/jetstream: snapshot %s: %w: %w", id, store.ErrNotFound, session.ErrNotExist)
	}
	if err != nil {
		return nil, fmt.Errorf("store/jetstream: load snapshot %s: %w", id, err)
	}
	v := e.Value()
	if len(v) == 0 {
		return nil, fmt.Errorf("store/jetstream: snapshot %s: empty value", id)
	}
	switch v[0] {
	case tagInline:
		return v[1:], nil
	case tagObject:
		var ref blobRef
		if err := json.Unmarshal(v[1:], &ref); err != nil {
			return nil, fmt.Errorf("store/jetstream: snapshot %s: bad object reference: %w", id, err)
		}
		data, err := s.obj.GetBytes(ctx, id)
		if err != nil {
			return nil, fmt.Errorf("store/jetstream: snapshot %s from %s: %w", id, BlobBucket, err)
		}
		sum := sha256.Sum256(data)
		if len(data) != ref.Size || hex.EncodeToString(sum[:]) != ref.SHA256 {
			return nil, fmt.Errorf("store/jetstream: snapshot %s: the object does not match its reference (%d bytes)", id, len(data))
		}
		return data, nil
	}
	return nil, fmt.Errorf("store/jetstream: snapshot %s: unknown value tag %q", id, v[0])
}

// Remove deletes the snapshot and its object.
func (s *snapshots) Remove(id string) error {
	if !session.ValidID(id) {
		return fmt.Errorf("store/jetstream: remove snapshot %q: not an agent id", id)
	}
	ctx, cancel := s.ctx()
	defer cancel()
	if err := s.kv.Delete(ctx, id); err != nil && !errors.Is(err, jetstream.ErrKeyNotFound) {
		return fmt.Errorf("store/jetstream: remove snapshot %s: %w", id, err)
	}
	if err := s.obj.Delete(ctx, id); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return fmt.Errorf("store/jetstream: remove snapshot object %s: %w", id, err)
	}
	return nil
}
