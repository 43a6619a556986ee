package projection

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/gen"
	"github.com/leanovate/gopter/prop"

	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/schema"
)

// step is one generated operation of an agent; genLog turns a list of
// them into a valid log (what the daemon writes: one agent.created first,
// tool calls and waits inside the current run, ids that refer to earlier
// events most of the time, and sometimes to nothing, as a crash can leave).
type step struct {
	Kind int
	N    int
	Text string
}

func genSteps() gopter.Gen {
	return gen.SliceOf(gopter.CombineGens(gen.IntRange(0, 22), gen.IntRange(0, 6), genText()).Map(func(v []any) step {
		return step{Kind: v[0].(int), N: v[1].(int), Text: v[2].(string)}
	}))
}

// genLog builds the log of steps.
func genLog(steps []step) []rec {
	recs := []rec{created}
	add := func(ev string, d any) { recs = append(recs, rec{ev, d}) }
	run, turn, token := "", 0, ""
	for _, s := range steps {
		switch s.Kind {
		case 0, 1:
			m := msg(s.N, s.Text)
			if s.Kind == 1 && s.N%3 == 0 {
				m.Payload = strings.Repeat(s.Text+"y", ResidentPayload/(len(s.Text)+1)+1) // not resident
			}
			add(schema.MessageEnqueued, m.EventData())
		case 2:
			add(schema.MessageDelivered, schema.MessageDeliveredData{MessageID: msgID(s.N)})
		case 3:
			if run == "" || s.N%2 == 0 {
				turn++
				run = fmt.Sprintf("%032x", 1000+turn)
			} // else: the re-run of the same run (after a restart)
			add(schema.TurnStart, schema.TurnStartData{RunID: run, Turn: turn, BootID: "b", Prompt: s.Text,
				Provider: fmt.Sprintf("p%d", s.N%2), Model: "m", MessageIDs: []string{msgID(s.N), msgID(s.N + 1)}})
		case 4:
			var u *provider.Usage
			if s.N%2 == 0 {
				u = &provider.Usage{InputTokens: s.N, OutputTokens: 1}
			}
			add(schema.TurnComplete, schema.TurnCompleteData{RunID: run, Turn: turn, Response: s.Text, Usage: u})
		case 5:
			add(schema.TurnFailed, schema.TurnFailedData{RunID: run, Turn: turn, Error: s.Text, Attempts: s.N})
		case 6:
			add(schema.TurnCancelled, schema.TurnCancelledData{RunID: run, Turn: turn})
		case 7:
			m := msg(100+s.N, s.Text)
			m.Sender, m.Recipient = "a", "b"
			add(schema.ToolCall, schema.ToolCallData{CallID: "c", Tool: "send_message", Args: map[string]any{"text": s.Text},
				Result: map[string]any{"message_id": m.ID}, RunID: run, Turn: turn, Messages: []map[string]any{m.EventData()}})
		case 8:
			add(schema.ToolCall, schema.ToolCallData{CallID: "c", Tool: "spawn_agent", Args: map[string]any{"name": s.Text},
				Result: map[string]any{"agent_id": fmt.Sprintf("kid%d", s.N)}, RunID: run, Turn: turn})
		case 9:
			add(schema.ToolCall, schema.ToolCallData{CallID: "c", Tool: "check_inbox", Error: s.Text, RunID: run, Turn: turn})
		case 10:
			token = fmt.Sprintf("tok%d", s.N)
			add(schema.RunWaiting, schema.RunWaitingData{RunID: run, WaitKind: "input", Prompt: s.Text, TokenID: token,
				Deadline: "2026-01-03T00:00:00Z", SecretHash: "h" + token, Turn: turn})
		case 11:
			ev := []string{schema.TokenConsumed, schema.TokenRevoked, schema.TokenExpired}[s.N%3]
			add(ev, schema.TokenData{TokenID: token, RunID: run})
		case 12:
			add(schema.RunResumed, schema.RunResumedData{RunID: run, TokenID: token, Response: s.Text})
		case 13:
			add(schema.RunInterrupted, schema.RunInterruptedData{RunID: run, Reason: schema.ReasonProcessRestart})
		case 14:
			var v *string
			if s.N%3 != 0 {
				v = strp(s.Text)
			}
			add(schema.MetadataUpdated, schema.MetadataUpdatedData{Key: fmt.Sprintf("k%d", s.N), Value: v})
		case 15:
			add(schema.ToolGate, schema.GateData{Action: []string{"gate", "ungate"}[s.N%2], AgentName: "w"})
		case 16:
			add(schema.ToolSubscribe, schema.SubscribeData{SubscriptionID: fmt.Sprintf("s%d", s.N), TargetID: s.Text, From: "busy", To: "idle", Once: s.N%2 == 0})
		case 17:
			add(schema.ToolUnsubscribe, schema.UnsubscribeData{SubscriptionID: fmt.Sprintf("s%d", s.N)})
		case 18:
			add(schema.ReminderSched, schema.ReminderData{ReminderID: fmt.Sprintf("r%d", s.N), Reason: s.Text,
				Due: "2026-01-02T04:00:00Z", EveryMS: int64(s.N%2) * 60000})
		case 19:
			add(schema.ReminderCancel, schema.ReminderData{ReminderID: fmt.Sprintf("r%d", s.N)})
		case 22:
			// A reminder fires: its message (a repeating one stays).
			m := reminderMsg(200+s.N+10*len(recs), fmt.Sprintf("r%d", s.N))
			m.Timestamp = t0.Add(time.Duration(len(recs)) * time.Second)
			add(schema.MessageEnqueued, m.EventData())
		case 20:
			ev := []rec{{schema.SessionCreated, schema.SessionCreatedData{Provider: "p", Model: "m", Handle: s.Text}},
				{schema.SuspendResult, schema.SuspendResultData{StateSize: s.N}},
				{schema.SessionRestored, schema.SessionRestoredData{Provider: "p", Model: "m", Strategy: "native"}},
				{schema.ContextReset, map[string]any{}}}[s.N%4]
			recs = append(recs, ev)
		case 21:
			add(schema.AgentTerminated, schema.AgentTerminatedData{AgentID: "a"})
		}
	}
	return recs
}

// The fold is a function of the log: on generated valid logs, two folds
// give the same state; replay mode (recovery) gives the state live mode
// (the running daemon) does, in an arena of its own or in one a Scratch
// lends it; and folding a prefix, encoding the state as
// a checkpoint, decoding it and folding the rest gives the state folding
// the whole log does, wherever the log is cut.
func TestFoldProperties(t *testing.T) {
	params := gopter.DefaultTestParametersWithSeed(12)
	params.MinSuccessfulTests = 300
	props := gopter.NewProperties(params)
	scratch := &Scratch{}
	props.Property("deterministic, replay == live (in a scratch too), prefix+checkpoint+rest == whole", prop.ForAll(func(steps []step, cut int) string {
		es := entries(genLog(steps))
		live, err := foldLive(es)
		if err != nil {
			return "live fold: " + err.Error()
		}
		again, err := foldLive(es)
		if err != nil {
			return "second fold: " + err.Error()
		}
		want := stateOf(live)
		if got := stateOf(again); got != want {
			return fmt.Sprintf("two folds differ:\n%s\n%s", want, got)
		}
		replayed, err := foldReplay(nil, es, nil)
		if err != nil {
			return "replay fold: " + err.Error()
		}
		if got := stateOf(replayed); got != want {
			return fmt.Sprintf("replay differs from live:\nlive:   %s\nreplay: %s", want, got)
		}
		// In an arena (and id arrays) borrowed from a scratch earlier
		// replays used, and overwritten once the replay gave them back:
		// nothing the state keeps may be in them.
		borrowed := New()
		borrowed.BeginReplay(scratch)
		if borrowed, err = foldReplay(borrowed, es, nil); err != nil {
			return "replay fold in a scratch: " + err.Error()
		}
		overwrite := func(c []byte) {
			c = c[:cap(c)]
			for i := range c {
				c[i] = '#'
			}
		}
		for _, c := range scratch.chunks {
			overwrite(c)
		}
		if w := scratch.ids; w != nil {
			overwrite(w.bufs[0])
			overwrite(w.bufs[1])
		}
		if got := stateOf(borrowed); got != want {
			return fmt.Sprintf("replay in a scratch differs from live once the scratch is reused:\nlive:   %s\nreplay: %s", want, got)
		}
		k := 1 + cut%len(es) // the prefix holds agent.created, as a checkpoint does
		head, err := foldLive(es[:k])
		if err != nil {
			return "prefix fold: " + err.Error()
		}
		st, err := head.EncodeState()
		if err != nil {
			return "encode: " + err.Error()
		}
		ck, err := DecodeState(st)
		if err != nil {
			return "decode: " + err.Error()
		}
		whole, err := foldReplay(ck, es[k:], loader(es))
		if err != nil {
			return "rest fold: " + err.Error()
		}
		if got := stateOf(whole); got != want {
			return fmt.Sprintf("prefix of %d + checkpoint + rest differs from the whole:\nwhole: %s\nsplit: %s", k, want, got)
		}
		return ""
	}, genSteps(), gen.IntRange(0, 1<<20)))
	props.TestingRun(t)
}
