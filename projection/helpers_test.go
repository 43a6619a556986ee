package projection

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"time"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/schema"
)

// rec is one event of a test log: its name and data (any value
// encoding/json encodes, as the daemon's log writer does).
type rec struct {
	ev   string
	data any
}

// t0 is the time of a test log's first entry; each next one is a second
// later.
var t0 = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// entries makes log entries of recs as a log would hold them: seq from 1,
// the byte offset of each line, a timestamp a second apart.
func entries(recs []rec) []eventlog.Entry {
	out := make([]eventlog.Entry, 0, len(recs))
	var off int64
	for i, r := range recs {
		b, err := json.Marshal(r.data)
		if err != nil {
			panic(err)
		}
		out = append(out, eventlog.Entry{Seq: uint64(i + 1), Off: off, TS: t0.Add(time.Duration(i) * time.Second), Event: r.ev, Data: b})
		off += int64(len(b) + 100)
	}
	return out
}

// foldLive folds entries one by one, as the daemon does after recovery.
func foldLive(es []eventlog.Entry) (*State, error) {
	p := New()
	for _, e := range es {
		if err := p.Apply(e); err != nil {
			return p, err
		}
	}
	return p, nil
}

// foldReplay folds entries in replay mode, as recovery does; load reads
// back a message.enqueued line's data by its reference.
func foldReplay(p *State, es []eventlog.Entry, load func(inbox.Ref) (json.RawMessage, error)) (*State, error) {
	if p == nil {
		p = New()
		p.BeginReplay(nil)
	}
	for _, e := range es {
		if err := p.Apply(e); err != nil {
			return p, err
		}
	}
	return p, p.EndReplay(load)
}

// loader reads a message.enqueued entry's data back from es by reference.
func loader(es []eventlog.Entry) func(inbox.Ref) (json.RawMessage, error) {
	return func(r inbox.Ref) (json.RawMessage, error) {
		for _, e := range es {
			if e.Seq == r.Seq && e.Off == r.Off {
				if e.Event != schema.MessageEnqueued {
					return nil, fmt.Errorf("seq %d is %s", e.Seq, e.Event)
				}
				return e.Data, nil
			}
		}
		return nil, fmt.Errorf("no line at seq %d off %d", r.Seq, r.Off)
	}
}

// stateOf is the whole of a state as text, for comparing two: every
// exported field, whatever its JSON tag says (dump), the pending messages
// in full, the enqueued ids, and the checkpoint encoding.
func stateOf(p *State) string {
	st, err := p.EncodeState()
	if err != nil {
		return "encode: " + err.Error()
	}
	var b strings.Builder
	dump(&b, reflect.ValueOf(*p))
	ids, others := p.Enqueued.encode()
	return fmt.Sprintf("%s\npending=%s\nenqueued=%s %v\ncheckpoint=%s", b.String(), fmtAny(p.Pending.Peek()), ids, others, st)
}

// dump writes v's exported contents: struct fields by name, pointers
// followed, maps in key order; json.RawMessage as text.
func dump(b *strings.Builder, v reflect.Value) {
	if v.Type() == reflect.TypeOf(json.RawMessage(nil)) || v.Type() == reflect.TypeOf(time.Time{}) {
		fmt.Fprintf(b, "%q", fmt.Sprint(v.Interface()))
		if t, ok := v.Interface().(time.Time); ok {
			fmt.Fprintf(b, "=%s", t.UTC().Format(time.RFC3339Nano))
		}
		return
	}
	switch v.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			b.WriteString("nil")
			return
		}
		dump(b, v.Elem())
	case reflect.Struct:
		b.WriteString("{")
		for i := 0; i < v.NumField(); i++ {
			if f := v.Type().Field(i); f.IsExported() && f.Type != reflect.TypeOf(&inbox.Queue{}) && f.Type != reflect.TypeOf(IDSet{}) {
				b.WriteString(f.Name + ":")
				dump(b, v.Field(i))
				b.WriteString(" ")
			}
		}
		b.WriteString("}")
	case reflect.Map:
		keys := v.MapKeys()
		sort.Slice(keys, func(i, j int) bool { return keys[i].String() < keys[j].String() })
		b.WriteString("map[")
		for _, k := range keys {
			fmt.Fprintf(b, "%q:", k.String())
			dump(b, v.MapIndex(k))
			b.WriteString(" ")
		}
		b.WriteString("]")
	case reflect.Slice, reflect.Array:
		if v.Kind() == reflect.Slice && v.IsNil() {
			b.WriteString("nil")
			return
		}
		b.WriteString("[")
		for i := 0; i < v.Len(); i++ {
			dump(b, v.Index(i))
			b.WriteString(" ")
		}
		b.WriteString("]")
	default:
		fmt.Fprintf(b, "%#v", v.Interface())
	}
}

// msgID is the n-th test message id (32 hex digits, as the daemon makes).
func msgID(n int) string { return fmt.Sprintf("%032x", n+1) }

// msg is a request from s to "a" with the payload text.
func msg(n int, text string) inbox.Message {
	return inbox.Message{ID: msgID(n), Sender: "s", Recipient: "a", Kind: inbox.KindRequest, Payload: text,
		Timestamp: t0, Metadata: map[string]string{}}
}

func strp(s string) *string { return &s }

// created is the agent.created that begins every test log.
var created = rec{schema.AgentCreated, schema.AgentCreatedData{AgentID: "a", Name: "w", Instructions: "be brief",
	Provider: "p1", Model: "m1", Metadata: map[string]string{"team": "x"}, Cwd: "/tmp/w"}}
