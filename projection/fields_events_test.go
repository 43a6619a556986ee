package projection

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/warren-dev/warren/schema"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/gen"
	"github.com/leanovate/gopter/prop"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/provider"
)

// FuzzFastDecoders holds each fast decoder to encoding/json: when
// encoding/json refuses the data (into the event's data type), the fast
// decoder refuses it too; when the fast decoder accepts, encoding/json
// decodes the same values.
func FuzzFastDecoders(f *testing.F) {
	for _, s := range []string{
		`{"run_id":"00000000000000010000000000000000","turn":1,"boot_id":"b","prompt":"Message from w:\nStep 0 \"q\" \u00e9","provider":"inproc","model":"echo","message_ids":["0123"]}`,
		`{"run_id":"r","turn":2,"response":"Done. ok ok","usage":{"input_tokens":3,"output_tokens":4}}`,
		`{"run_id":"r","turn":2,"error":"boom","attempts":3}`,
		`{"message_id":"00000063000000000000000200000000"}`,
		`{"call_id":"c","tool":"send_message","args":{"recipient":"w1","text":"t"},"result":{"message_id":"m","status":"sent"},"run_id":"r","turn":1,"messages":[{"kind":"request","message_id":"m","recipient":"b1"}]}`,
		`{"run_id":null,"turn":null,"message_ids":[null,"a"],"messages":null,"tool":null}`,
		`{"run_id":"a","run_id":null,"turn":1.5}`, `{"turn":"1"}`, `{"Run_ID":"x"}`, `{"run_id":"\ud800"}`,
		`{"args":tru}`, `{"messages":"x"}`, `{"usage":[]}`, `{"message_ids":[1]}`, `{"response":3}`, `{"error":{}}`,
		`{"attempts":-0}`, `{"turn":01}`, `{"run_id":"a"} x`,
		`{"message_ids":["x","y"],"message_ids":[null]}`, "{\"message_ids\":[\"x\"],\"message_ids\":[null,\"\xff\"]}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		{
			var fast, want schema.TurnStartData
			ok := fastTurnStart(data, nil, &fast, nil)
			err := json.Unmarshal(data, &want)
			if ok && (err != nil || !reflect.DeepEqual(fast, want)) {
				t.Fatalf("turn.start %q: fast %+v; encoding/json %+v, %v", data, fast, want, err)
			}
		}
		{
			// A replay's turn.start: prompt and message_ids left raw,
			// decoded at the end (values) or walked (eachString).
			var fast, want schema.TurnStartData
			var raw startRaw
			ok := fastTurnStart(data, nil, &fast, &raw)
			err := json.Unmarshal(data, &want)
			if ok {
				var verr error
				fast.Prompt, fast.MessageIDs, verr = raw.values()
				if err != nil || verr != nil || !reflect.DeepEqual(fast, want) {
					t.Fatalf("turn.start %q kept raw: fast %+v (%v); encoding/json %+v, %v", data, fast, verr, want, err)
				}
				var walked []string
				if raw.msgIDs != nil {
					eachString(raw.msgIDs, func(id []byte) { walked = append(walked, string(id)) })
				}
				if len(walked) != len(want.MessageIDs) || (len(walked) > 0 && !reflect.DeepEqual(walked, want.MessageIDs)) {
					t.Fatalf("turn.start %q: message ids walked %q, encoding/json %q", data, walked, want.MessageIDs)
				}
			}
		}
		ends := []struct {
			kind int
			v    any
			get  func() turnEnd
		}{}
		var tc schema.TurnCompleteData
		var tf schema.TurnFailedData
		var tx schema.TurnCancelledData
		ends = append(ends,
			struct {
				kind int
				v    any
				get  func() turnEnd
			}{endComplete, &tc, func() turnEnd {
				return turnEnd{RunID: []byte(tc.RunID), ResponseText: tc.Response, Usage: tc.Usage}
			}},
			struct {
				kind int
				v    any
				get  func() turnEnd
			}{endFailed, &tf, func() turnEnd { return turnEnd{RunID: []byte(tf.RunID), Error: tf.Error} }},
			struct {
				kind int
				v    any
				get  func() turnEnd
			}{endCancelled, &tx, func() turnEnd { return turnEnd{RunID: []byte(tx.RunID)} }})
		for _, end := range ends {
			var fast turnEnd
			ok := fastTurnEnd(data, end.kind, &fast)
			err := json.Unmarshal(data, end.v)
			if !ok {
				continue
			}
			if err != nil {
				t.Fatalf("turn end %d %q: fast decoder accepted what encoding/json refuses: %v", end.kind, data, err)
			}
			want := end.get()
			if fast.Response != nil && !setString(&fast.ResponseText, fast.Response, "") {
				// As the fold does: what jsonfast leaves (invalid UTF-8)
				// encoding/json decodes, with replacements.
				if err := json.Unmarshal(fast.Response, &fast.ResponseText); err != nil {
					t.Fatalf("turn end %q: response %q does not decode: %v", data, fast.Response, err)
				}
			}
			if string(fast.RunID) != string(want.RunID) || fast.Error != want.Error || !reflect.DeepEqual(fast.Usage, want.Usage) ||
				(end.kind == endComplete && fast.ResponseText != want.ResponseText) {
				t.Fatalf("turn end %d %q: fast %+v, encoding/json %+v", end.kind, data, fast, want)
			}
		}
		{
			id, ok := fastMessageID(data)
			var want schema.MessageDeliveredData
			err := json.Unmarshal(data, &want)
			if ok && (err != nil || string(id) != want.MessageID) {
				t.Fatalf("message.delivered %q: fast %q; encoding/json %q, %v", data, id, want.MessageID, err)
			}
		}
		{
			var fast toolCallFields
			ok := fastToolCall(data, &fast)
			var want struct {
				Tool     string            `json:"tool"`
				Args     json.RawMessage   `json:"args"`
				Result   json.RawMessage   `json:"result"`
				Error    string            `json:"error"`
				RunID    string            `json:"run_id"`
				Messages []json.RawMessage `json:"messages"`
			}
			err := json.Unmarshal(data, &want)
			if ok {
				if err != nil {
					t.Fatalf("tool.call %q: fast decoder accepted what encoding/json refuses: %v", data, err)
				}
				fe := sentRefs(eventlog.Entry{}, fast, &lazyInbox{}) // as a replay reads them
				we := sentRefs(eventlog.Entry{}, toolCallFields{MessageList: want.Messages}, nil)
				if string(fast.Tool) != want.Tool || string(fast.Args) != string(want.Args) || string(fast.Result) != string(want.Result) ||
					fast.Error != want.Error || string(fast.RunID) != want.RunID || !reflect.DeepEqual(fe, we) {
					t.Fatalf("tool.call %q: fast %+v (%+v), encoding/json %+v (%+v)", data, fast, fe, want, we)
				}
			}
		}
	})
}

// genText makes strings that exercise the decoders: escapes, quotes,
// non-ASCII, long runs, empty.
func genText() gopter.Gen {
	return gen.OneGenOf(
		gen.AlphaString(),
		gen.Const(""),
		gen.Const("Message from w:\nStep 0: \"quoted\" \\ back\tslash é ✓ 😀 <tag> & </script>"),
		gen.SliceOf(gen.OneConstOf("ab", "\n", "\"", "\\", "é", "\u2028", "x ", "\x01", strings.Repeat("long ", 12))).
			Map(func(parts []string) string { return strings.Join(parts, "") }),
	)
}

// foldEvents folds data entries (event name, data) into a projection in
// replay mode, fast or slow, and returns its state (or the error).
func foldEvents(evs [][2]string, slow bool) string {
	p := New()
	p.slow = slow
	p.BeginReplay(nil)
	var off int64 = 0
	for i, ev := range evs {
		e := eventlog.Entry{Seq: uint64(i + 1), Off: off, Event: ev[0], Data: json.RawMessage(ev[1])}
		off += int64(len(ev[1]) + 100)
		if err := p.Apply(e); err != nil {
			return "error: " + err.Error()
		}
	}
	if err := p.EndReplay(nil); err != nil {
		return "endReplay: " + err.Error()
	}
	st, err := p.EncodeState()
	if err != nil {
		return "encode: " + err.Error()
	}
	var msgs []string
	for _, m := range p.Pending.Peek() {
		msgs = append(msgs, fmtAny(m))
	}
	return fmt.Sprintf("%s pending=%v lastresume=%+v", st, msgs, p.LastResume)
}

// The fold with the fast decoders reaches the same state as with
// encoding/json on every log: random runs of the events a log holds
// most of, with texts full of escapes, some sent messages, some runs
// left open, and now and then a field of the wrong type (both must then
// fail the same way).
func TestFastFoldEqualsJSONFold(t *testing.T) {
	params := gopter.DefaultTestParametersWithSeed(16)
	params.MinSuccessfulTests = 300
	props := gopter.NewProperties(params)
	type step struct {
		Kind int
		Text string
		N    int
	}
	genStep := gopter.CombineGens(gen.IntRange(0, 9), genText(), gen.IntRange(0, 6)).Map(func(v []any) step {
		return step{Kind: v[0].(int), Text: v[1].(string), N: v[2].(int)}
	})
	props.Property("fast fold == encoding/json fold", prop.ForAll(func(steps []step) string {
		evs := [][2]string{{schema.AgentCreated, `{"agent_id":"a","name":"w"}`}}
		mk := func(ev string, v any) {
			b, err := json.Marshal(v)
			if err != nil {
				panic(err)
			}
			evs = append(evs, [2]string{ev, string(b)})
		}
		run, turn := "", 0
		msgID := func(n int) string { return fmt.Sprintf("%032x", n+1) }
		for _, s := range steps {
			switch s.Kind {
			case 0:
				m := inbox.Message{ID: msgID(s.N), Sender: "s", Recipient: "a", Kind: inbox.KindRequest, Payload: s.Text}
				mk(schema.MessageEnqueued, m.EventData())
			case 1, 2:
				turn++
				run = fmt.Sprintf("run%d", turn)
				var ids []string
				if s.Kind == 1 {
					ids = []string{msgID(s.N)}
				}
				mk(schema.TurnStart, schema.TurnStartData{RunID: run, Turn: turn, BootID: "boot", Prompt: s.Text, Provider: "p", Model: "m", MessageIDs: ids})
			case 3:
				m := inbox.Message{ID: msgID(100 + s.N), Sender: "a", Recipient: "b", Kind: inbox.KindRequest, Payload: s.Text}
				mk(schema.ToolCall, schema.ToolCallData{CallID: "c", Tool: "send_message", Args: map[string]any{"text": s.Text},
					Result: map[string]any{"message_id": m.ID}, RunID: run, Turn: turn, Messages: []map[string]any{m.EventData()}})
			case 4:
				mk(schema.ToolCall, schema.ToolCallData{CallID: "c", Tool: "check_inbox", Args: map[string]any{}, Error: s.Text, RunID: run, Turn: turn})
			case 5:
				var u *provider.Usage
				if s.N%2 == 0 {
					u = &provider.Usage{InputTokens: s.N, OutputTokens: 2}
				}
				mk(schema.TurnComplete, schema.TurnCompleteData{RunID: run, Turn: turn, Response: s.Text, Usage: u})
			case 6:
				mk(schema.TurnFailed, schema.TurnFailedData{RunID: run, Turn: turn, Error: s.Text, Attempts: s.N})
			case 7:
				mk(schema.MessageDelivered, schema.MessageDeliveredData{MessageID: msgID(s.N)})
			case 8:
				mk(schema.TurnCancelled, schema.TurnCancelledData{RunID: run, Turn: turn})
			case 9:
				// A member of the wrong type, or an odd but valid shape.
				bad := []string{`{"run_id":"` + run + `","turn":"1"}`, `{"run_id":"` + run + `","turn":1,"response":7}`,
					`{"RUN_ID":"` + run + `"}`, `{"run_id":"` + run + `","run_id":null}`, `{"message_ids":{}}`, `{"message_id":5}`}
				ev := []string{schema.TurnComplete, schema.TurnComplete, schema.TurnCancelled, schema.TurnFailed, schema.TurnStart, schema.MessageDelivered}
				evs = append(evs, [2]string{ev[s.N%len(ev)], bad[s.N%len(bad)]})
			}
		}
		fast, slow := foldEvents(evs, false), foldEvents(evs, true)
		if fast != slow {
			return fmt.Sprintf("fast fold:\n%s\nencoding/json fold:\n%s", fast, slow)
		}
		return ""
	}, gen.SliceOf(genStep)))
	props.TestingRun(t)
}

// FuzzFastMessage holds fastMessage to inbox.FromEventData: what it
// accepts, inbox.FromEventData decodes to the same message.
func FuzzFastMessage(f *testing.F) {
	m := inbox.Message{ID: "00000063000000000000000100000000", Sender: "b1", Recipient: "b2", Kind: inbox.KindRequest,
		Payload: "Step 0: \"check\"\n é", ReplyTo: "r", Metadata: map[string]string{"k": "v", "reminder_id": "x"}}
	b, _ := json.Marshal(m.EventData())
	f.Add(b)
	f.Add([]byte(`{"kind":"request","message_id":"m","metadata":{},"payload":"p","recipient":"r","reply_to":null,"sender":"s","timestamp":"2026-01-01T00:00:00.000Z"}`))
	for _, s := range []string{`{"kind":"bogus","message_id":"m","payload":"","recipient":"r","sender":"s"}`,
		`{"kind":"request","message_id":"","payload":"p","recipient":"r","sender":"s"}`,
		`{"kind":"request","message_id":"m","payload":null,"recipient":"r","sender":"s"}`,
		`{"kind":"request","message_id":"m","payload":"p","recipient":"r","sender":"s","timestamp":"yesterday"}`,
		`{"kind":"request","message_id":"m","payload":"p","recipient":"r","sender":"s","metadata":{"a":1}}`,
		`{"kind":"request","message_id":"m","payload":"p","recipient":"r","sender":"s","metadata":{"a":"1","a":"2"},"Sender":"x"}`,
		`{"kind":"request","message_id":"m","payload":"p","recipient":"r","sender":"s","timestamp":"2026-01-01T00:00:00+02:00"}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		fast, ok := fastMessage(raw)
		if !ok {
			return
		}
		want, err := inbox.FromEventData(raw)
		if err != nil || !reflect.DeepEqual(fast, want) {
			t.Fatalf("fastMessage(%q) = %+v; inbox.FromEventData gives %+v, %v", raw, fast, want, err)
		}
	})
}

// parseID16 takes exactly the ids of 32 lowercase hex digits, as
// strings.ToLower and hex.Decode did.
func FuzzParseID16(f *testing.F) {
	for _, s := range []string{"00000063000000000000000100000000", "0000006300000000000000010000000A", "x", "0000006300000000000000010000000g"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		got, ok := parseID16(id)
		var want [16]byte
		wantOK := len(id) == 32 && strings.ToLower(id) == id
		if wantOK {
			_, err := hex.Decode(want[:], []byte(id))
			wantOK = err == nil
		}
		if ok != wantOK || (ok && got != want) {
			t.Fatalf("parseID16(%q) = %x, %v; want %x, %v", id, got, ok, want, wantOK)
		}
	})
}

// fmtAny is v as JSON, for failure messages.
func fmtAny(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return ""
	}
	return string(b)
}
