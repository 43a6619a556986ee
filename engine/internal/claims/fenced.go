package claims

import (
	"context"
	"encoding/json"
	"errors"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/store"
)

// Fenced wraps an agent's log so that an append the store fences
// (store.ErrFenced: another daemon claimed the agent) reports the claim
// lost to lost, with the append's error, as a lease watch reports a lapse.
// The append's error is returned all the same.
func Fenced(lg store.Log, lost func(cause error)) store.Log {
	return &fencedLog{Log: lg, lost: lost}
}

type fencedLog struct {
	store.Log
	lost func(error)
}

func (l *fencedLog) Append(event string, data any) (eventlog.Entry, error) {
	e, err := l.Log.Append(event, data)
	if err != nil && errors.Is(err, store.ErrFenced) {
		l.lost(err)
	}
	return e, err
}

func (l *fencedLog) AppendBatch(recs []eventlog.Record) ([]eventlog.Entry, error) {
	es, err := l.Log.AppendBatch(recs)
	if err != nil && errors.Is(err, store.ErrFenced) {
		l.lost(err)
	}
	return es, err
}

// ReadSeq reads one entry of an agent's log (store.Store has it).
type ReadSeq func(ctx context.Context, id string, seq uint64, off int64) (eventlog.Entry, error)

// ParentOf reads the parent named by id's agent.created, for Claimable
// ("" for a root, or when the first entry cannot be read or says nothing).
func ParentOf(ctx context.Context, read ReadSeq, id string) string {
	e, err := read(ctx, id, 1, 0)
	if err != nil || e.Event != schema.AgentCreated {
		return ""
	}
	var d schema.AgentCreatedData
	if json.Unmarshal(e.Data, &d) != nil || d.ParentID == nil {
		return ""
	}
	return *d.ParentID
}
