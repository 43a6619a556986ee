package tests

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"testing"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/protocol"
)

// tortureAgent is an acknowledged create or spawn.
type tortureAgent struct {
	ID       string
	Name     string
	ParentID string // "" for a root
	Scripted bool
	How      string // "create", "spawn tool.call", "spawn turn"
}

// tortureMsg is an acknowledged message: its enqueue must be in the
// recipient's log.
type tortureMsg struct {
	ID          string
	SenderID    string
	RecipientID string
	How         string
}

// ledger records every acknowledged operation of the torture clients.
// Safe for concurrent use.
type ledger struct {
	mu     sync.Mutex
	agents map[string]*tortureAgent
	order  []string // agent ids in ack order
	msgs   []tortureMsg
	turns  int
	// seen is the last verified content of each log: seq -> line digest.
	// Entries once read back must never change or vanish.
	seen map[string][]string
}

func newLedger() *ledger {
	return &ledger{agents: map[string]*tortureAgent{}, seen: map[string][]string{}}
}

func (l *ledger) addAgent(a tortureAgent) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.agents[a.ID]; !ok {
		l.agents[a.ID] = &a
		l.order = append(l.order, a.ID)
	}
}

func (l *ledger) addMsg(m tortureMsg) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.msgs = append(l.msgs, m)
}

func (l *ledger) addTurn() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.turns++
}

// snapshot copies the acknowledged agents.
func (l *ledger) snapshot() []tortureAgent {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := make([]tortureAgent, 0, len(l.order))
	for _, id := range l.order {
		out = append(out, *l.agents[id])
	}
	return out
}

func (l *ledger) counts() (agents, msgs, turns int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.order), len(l.msgs), l.turns
}

// verifyAfterRestart checks the guarantees against a freshly restarted
// daemon: acked creates, spawns and messages present; every log a valid,
// gap-free prefix that keeps every entry read back before; no message id
// consumed by two completed turns; at most one run.interrupted per run;
// and the daemon serves.
func verifyAfterRestart(t *testing.T, d *testDaemon, l *ledger, round int) {
	t.Helper()
	ctx := procCtx(t)
	list, err := d.Client().Call(ctx, "agent.list", nil)
	if err != nil {
		t.Fatalf("round %d: agent.list after restart: %v\n%s", round, err, d.Output())
	}
	listed := map[string]map[string]any{}
	for _, a := range list["agents"].([]any) {
		m := a.(map[string]any)
		listed[m["agent_id"].(string)] = m
	}
	for _, a := range l.snapshot() {
		m, ok := listed[a.ID]
		if !ok {
			t.Fatalf("round %d: acknowledged %s of %s (%s) is missing after kill -9 and restart", round, a.How, a.Name, a.ID)
		}
		parent, _ := m["parent_id"].(string)
		if m["name"] != a.Name || parent != a.ParentID {
			t.Fatalf("round %d: agent %s came back as %v, want name %s parent %q", round, a.ID, m, a.Name, a.ParentID)
		}
		if m["status"] == "corrupt" {
			t.Fatalf("round %d: agent %s is corrupt after a kill -9: %v", round, a.Name, m)
		}
	}

	var logs map[string][]eventlog.Entry
	if d.readLogs != nil {
		logs = d.readLogs(round)
	} else {
		logs = readAllLogs(t, d.Home, round)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for id, entries := range logs {
		prev := l.seen[id]
		if len(entries) < len(prev) {
			t.Fatalf("round %d: log of %s shrank from %d to %d entries", round, id, len(prev), len(entries))
		}
		cur := make([]string, len(entries))
		for i, e := range entries {
			cur[i] = fmt.Sprintf("%s %s", e.Event, e.Data)
			if i < len(prev) && prev[i] != cur[i] {
				t.Fatalf("round %d: log of %s entry seq %d changed after a restart:\nbefore %s\nafter  %s", round, id, i+1, prev[i], cur[i])
			}
		}
		l.seen[id] = cur
	}
	enqueued := map[string]map[string]bool{} // recipient -> message ids
	consumedBy := map[string]string{}        // message id -> completed turn
	for id, entries := range logs {
		enq := map[string]bool{}
		enqueued[id] = enq
		starts := map[string][]string{}
		completed := map[string]bool{}
		interrupted := map[string]int{}
		for _, e := range entries {
			var data struct {
				RunID      string   `json:"run_id"`
				Turn       int      `json:"turn"`
				MessageID  string   `json:"message_id"`
				MessageIDs []string `json:"message_ids"`
			}
			if err := json.Unmarshal(e.Data, &data); err != nil {
				t.Fatalf("round %d: log of %s seq %d: data %s: %v", round, id, e.Seq, e.Data, err)
			}
			key := fmt.Sprintf("%s/%s#%d", id, data.RunID, data.Turn)
			switch e.Event {
			case "message.enqueued":
				enq[data.MessageID] = true
			case "turn.start":
				starts[key] = append(starts[key], data.MessageIDs...)
			case "turn.complete":
				completed[key] = true
			case "run.interrupted":
				// One per interruption: a re-run (run.resumed) may be
				// interrupted again (SPEC 11.5).
				interrupted[data.RunID]++
				if interrupted[data.RunID] > 1 {
					t.Fatalf("round %d: run %s of %s has %d run.interrupted entries for one interruption, want 1", round, data.RunID, id, interrupted[data.RunID])
				}
			case "run.resumed":
				interrupted[data.RunID] = 0
			}
		}
		keys := make([]string, 0, len(starts))
		for k := range starts {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, key := range keys {
			if !completed[key] {
				continue
			}
			seenHere := map[string]bool{}
			for _, mid := range starts[key] {
				if seenHere[mid] {
					continue // the same turn re-run after a crash
				}
				seenHere[mid] = true
				if other, dup := consumedBy[mid]; dup {
					t.Fatalf("round %d: message %s consumed by two completed turns: %s and %s", round, mid, other, key)
				}
				consumedBy[mid] = key
			}
		}
	}
	for _, m := range l.msgs {
		if !enqueued[m.RecipientID][m.ID] {
			t.Fatalf("round %d: acknowledged message %s (%s, %s -> %s) is not enqueued in the recipient's log", round, m.ID, m.How, m.SenderID, m.RecipientID)
		}
	}
	if _, err := d.Client().Call(ctx, "daemon.status", nil); err != nil {
		t.Fatalf("round %d: daemon.status: %v", round, err)
	}
}

// readAllLogs reads every agent's log under home with eventlog.ReadAll
// (which stops at a torn tail and reports damage in the middle) and checks
// seqs run 1, 2, 3, ...
func readAllLogs(t *testing.T, home string, round int) map[string][]eventlog.Entry {
	t.Helper()
	dirs, err := os.ReadDir(filepath.Join(home, "agents"))
	if err != nil {
		t.Fatalf("round %d: %v", round, err)
	}
	out := map[string][]eventlog.Entry{}
	for _, de := range dirs {
		if !de.IsDir() {
			continue
		}
		path := filepath.Join(home, "agents", de.Name(), "events.jsonl")
		if _, err := os.Stat(path); os.IsNotExist(err) {
			continue // an agent being created (or an orphan to clean up)
		}
		entries, err := eventlog.ReadAll(faultfs.OS{}, path)
		if err != nil {
			t.Fatalf("round %d: log %s is not a valid prefix: %v", round, path, err)
		}
		for i, e := range entries {
			if e.Seq != uint64(i+1) {
				t.Fatalf("round %d: log %s: entry %d has seq %d (gap or repeat)", round, path, i+1, e.Seq)
			}
		}
		out[de.Name()] = entries
	}
	return out
}

// isConnErr reports whether err means the daemon went away (as opposed to
// an error reply).
func isConnErr(err error) bool {
	var pe *protocol.Error
	return err != nil && !errors.As(err, &pe)
}
