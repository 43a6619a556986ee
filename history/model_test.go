package history

import (
	"fmt"
	"math/rand"
	"os"
	"reflect"
	"strings"
	"testing"

	"github.com/warren-dev/warren/provider"
)

// TestBuildAgainstModel generates random logs of turns that complete, fail,
// are cancelled, are interrupted and re-run, or are abandoned, and checks
// Build against a direct model of what the history must be.
func TestBuildAgainstModel(t *testing.T) {
	iterations := 300
	if os.Getenv("WARREN_LONG") == "1" {
		iterations = 30000
	}
	for seed := int64(1); seed <= int64(iterations); seed++ {
		rng := rand.New(rand.NewSource(seed))
		l := newLog(t)
		var want []provider.Turn
		var wantOpen *OpenTurn
		turnNo := 0
		for run := 0; run < 1+rng.Intn(6); run++ {
			turnNo++
			runID := fmt.Sprintf("r%d", run)
			prompt := fmt.Sprintf("prompt %d", run)
			l.start(runID, turnNo, prompt)
			var calls []provider.ToolCall
			addCalls := func(n int) {
				for i := 0; i < n; i++ {
					id := fmt.Sprintf("c%d-%d", run, len(calls))
					c := provider.ToolCall{ID: id, Tool: fmt.Sprintf("tool%d", rng.Intn(3)), Args: map[string]any{"i": float64(i)}}
					if rng.Intn(4) == 0 {
						c.Error = "failed"
						l.add(EventToolCall, map[string]any{"run_id": runID, "turn": turnNo, "call_id": id, "tool": c.Tool, "args": c.Args, "error": c.Error})
					} else {
						c.Result = map[string]any{"ok": float64(i)}
						l.call(runID, turnNo, id, c.Tool, c.Args, c.Result)
					}
					calls = append(calls, c)
				}
			}
			addCalls(rng.Intn(3))
			// Interruptions and re-runs keep the recorded calls.
			for rng.Intn(3) == 0 {
				l.add(EventRunInterrupted, map[string]any{"run_id": runID, "reason": "process_restart"})
				l.add(EventRunResumed, map[string]any{"run_id": runID, "token_id": ""})
				prompt = prompt + " (re-run)"
				l.start(runID, turnNo, prompt)
				addCalls(rng.Intn(2))
			}
			if calls == nil {
				calls = []provider.ToolCall{}
			}
			switch rng.Intn(5) {
			case 0, 1:
				resp := fmt.Sprintf("response %d", run)
				l.complete(runID, turnNo, resp)
				want = append(want, provider.Turn{Message: prompt, Calls: calls, Response: resp})
				wantOpen = nil
			case 2:
				l.add(EventTurnFailed, map[string]any{"run_id": runID, "turn": turnNo, "error": "x"})
				wantOpen = nil
			case 3:
				l.add(EventTurnCancelled, map[string]any{"run_id": runID, "turn": turnNo})
				wantOpen = nil
			case 4: // left open; abandoned if another run follows
				wantOpen = &OpenTurn{RunID: runID, Turn: turnNo, Prompt: prompt, Calls: calls}
			}
		}
		h, err := Build(l.entries)
		if err != nil {
			t.Fatalf("seed %d: %v", seed, err)
		}
		if len(want) == 0 {
			want = nil
		}
		if !reflect.DeepEqual(h.Turns, want) {
			t.Fatalf("seed %d: turns\n got %+v\nwant %+v", seed, h.Turns, want)
		}
		if (h.Open == nil) != (wantOpen == nil) {
			t.Fatalf("seed %d: open %+v, want %+v", seed, h.Open, wantOpen)
		}
		if wantOpen != nil {
			o := h.Open
			wc := wantOpen.Calls
			if len(wc) == 0 && len(o.Calls) == 0 {
				wc = o.Calls
			}
			if o.RunID != wantOpen.RunID || o.Turn != wantOpen.Turn || o.Prompt != wantOpen.Prompt || !reflect.DeepEqual(o.Calls, wc) {
				t.Fatalf("seed %d: open %+v, want %+v", seed, o, wantOpen)
			}
			if got := RecordedCalls(l.entries, o.RunID); !reflect.DeepEqual(got, o.Calls) && (len(got) != 0 || len(o.Calls) != 0) {
				t.Fatalf("seed %d: RecordedCalls %+v, open calls %+v", seed, got, o.Calls)
			}
		}
		block := Block(h, "now", BlockOptions{})
		if strings.Count(block, "[ASSISTANT]: ") != len(want) {
			t.Fatalf("seed %d: block has the wrong number of turns:\n%s", seed, block)
		}
	}
}
