package claims

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/store"
)

// stubLog answers every append with err.
type stubLog struct {
	store.Log
	err error
}

func (l stubLog) Append(string, any) (eventlog.Entry, error) { return eventlog.Entry{Seq: 7}, l.err }
func (l stubLog) AppendBatch(recs []eventlog.Record) ([]eventlog.Entry, error) {
	return make([]eventlog.Entry, len(recs)), l.err
}

func TestFencedReportsOnlyAFencedAppend(t *testing.T) {
	fenced := fmt.Errorf("append to agent x: %w", store.ErrFenced)
	for _, tc := range []struct {
		name     string
		err      error
		wantLost bool
	}{
		{"ok", nil, false},
		{"other failure", errors.New("no space left on device"), false},
		{"fenced", fenced, true},
	} {
		var causes []error
		lg := Fenced(stubLog{err: tc.err}, func(cause error) { causes = append(causes, cause) })
		e, err := lg.Append("x", nil)
		if err != tc.err || e.Seq != 7 {
			t.Errorf("%s: Append = %d, %v; want the log's entry and error unchanged", tc.name, e.Seq, err)
		}
		es, err := lg.AppendBatch([]eventlog.Record{{}, {}})
		if err != tc.err || len(es) != 2 {
			t.Errorf("%s: AppendBatch = %d entries, %v; want the log's unchanged", tc.name, len(es), err)
		}
		if want := map[bool]int{true: 2, false: 0}[tc.wantLost]; len(causes) != want {
			t.Errorf("%s: lost reported %d times, want %d", tc.name, len(causes), want)
		}
		for _, c := range causes {
			if c != fenced {
				t.Errorf("%s: lost told %v, want the append's error", tc.name, c)
			}
		}
	}
}

func TestParentOf(t *testing.T) {
	const parent = "000000000000000000000000000000a1"
	entries := map[string]eventlog.Entry{
		"child":   {Seq: 1, Event: schema.AgentCreated, Data: []byte(`{"name":"w1","parent_id":"` + parent + `"}`)},
		"root":    {Seq: 1, Event: schema.AgentCreated, Data: []byte(`{"name":"lead","parent_id":null}`)},
		"no key":  {Seq: 1, Event: schema.AgentCreated, Data: []byte(`{"name":"lead"}`)},
		"bad":     {Seq: 1, Event: schema.AgentCreated, Data: []byte(`{"parent_id":`)},
		"other":   {Seq: 1, Event: "turn.start", Data: []byte(`{"parent_id":"` + parent + `"}`)},
		"missing": {},
	}
	read := func(_ context.Context, id string, seq uint64, off int64) (eventlog.Entry, error) {
		if seq != 1 || off != 0 {
			t.Errorf("ParentOf read seq %d at %d; want the first entry", seq, off)
		}
		if id == "missing" {
			return eventlog.Entry{}, errors.New("no such log")
		}
		return entries[id], nil
	}
	for id := range entries {
		want := ""
		if id == "child" {
			want = parent
		}
		if got := ParentOf(context.Background(), read, id); got != want {
			t.Errorf("ParentOf(%s) = %q, want %q", id, got, want)
		}
	}
}
