package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/warren-dev/warren/checkpoint"
	"github.com/warren-dev/warren/provider/inproc"
)

// reseal replaces the state of a checkpoint file's bytes by body, with
// its sum recomputed: a checkpoint whose own checks all pass.
func reseal(t *testing.T, file, body []byte) []byte {
	t.Helper()
	_, r, err := checkpoint.Decode(file)
	if err != nil {
		t.Fatalf("the checkpoint to edit: %v", err)
	}
	return checkpoint.Encode(body, r)
}

// ckptBody is the state part of a checkpoint file (after its header).
func ckptBody(file []byte) []byte {
	_, body, _ := bytes.Cut(file, []byte{'\n'})
	return body
}

// editState returns body with f applied to its decoded state line.
func editState(t *testing.T, body []byte, f func(doc map[string]any)) []byte {
	t.Helper()
	line, ids, _ := bytes.Cut(body, []byte{'\n'})
	var doc map[string]any
	if err := json.Unmarshal(line, &doc); err != nil {
		t.Fatal(err)
	}
	f(doc)
	b, err := json.Marshal(doc)
	if err != nil {
		t.Fatal(err)
	}
	return append(append(b, '\n'), ids...)
}

// TestLyingCheckpointLosesNothing (issue 31, D2): a checkpoint.json
// whose projection was edited and whose sum was recomputed is never
// trusted over the log. The adversary's four edits (three acknowledged
// pending messages dropped, a live agent marked terminated, an agent
// moved in the tree, its provider switched), and a gate lifted, are
// refused at load: the whole log is folded, with a warning. Edits the
// load's cheap checks cannot see (a subscription or reminder dropped,
// usage, metadata) are found by the scrub, which refolds the agent. Either way
// what recovery serves is what a fold of the log serves.
func TestLyingCheckpointLosesNothing(t *testing.T) {
	h, agents := ckptHome(t)
	child := agents[1].ID()
	ctx := h.c.ctx
	if _, err := h.c.CallTool(ctx, agents[0].ID(), "gate", map[string]any{"agent_name": "child"}); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 3; i++ {
		if _, err := h.c.CallTool(ctx, agents[0].ID(), "send_message", map[string]any{"recipient": "child", "text": fmt.Sprintf("acknowledged %d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := h.c.CallTool(ctx, child, "subscribe", map[string]any{"agent_name": "root", "transition": "busy->idle"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.c.CallTool(ctx, child, "remind_me", map[string]any{"reason": "look again", "timeout": 3600}); err != nil {
		t.Fatal(err)
	}
	h.stop() // writes every checkpoint, at each log's end
	path := filepath.Join(h.c.agentDir(child), checkpoint.Name)
	good := h.read(path)
	body := ckptBody(good)
	if n := pendingLen(agents[1]); n < 3 {
		t.Fatalf("the child has %d pending messages, want at least 3", n)
	}

	edits := []struct {
		name   string
		atLoad bool
		edit   func(doc map[string]any)
	}{
		{"three pending messages dropped", true, func(doc map[string]any) {
			pend := doc["pending"].([]any)
			doc["pending"] = pend[:len(pend)-3]
		}},
		{"marked terminated", true, func(doc map[string]any) { doc["p"].(map[string]any)["Terminated"] = true }},
		{"moved in the tree", true, func(doc map[string]any) { doc["p"].(map[string]any)["ParentID"] = "" }},
		{"provider switched to a script", true, func(doc map[string]any) {
			doc["p"].(map[string]any)["Provider"] = "script"
			doc["p"].(map[string]any)["Model"] = "/tmp/evil.py"
		}},
		{"gate lifted", true, func(doc map[string]any) { doc["p"].(map[string]any)["Gated"] = false }},
		{"subscription dropped", false, func(doc map[string]any) { doc["p"].(map[string]any)["Subs"] = map[string]any{} }},
		{"reminder dropped", false, func(doc map[string]any) { doc["p"].(map[string]any)["Reminders"] = map[string]any{} }},
		{"usage rewritten", false, func(doc map[string]any) {
			doc["p"].(map[string]any)["Usage"] = map[string]any{"input_tokens": 1, "output_tokens": 1}
		}},
		{"metadata rewritten", false, func(doc map[string]any) {
			doc["p"].(map[string]any)["Metadata"] = map[string]any{"k": "forged"}
		}},
	}
	for _, e := range edits {
		t.Run(e.name, func(t *testing.T) {
			edited := editState(t, body, e.edit)
			if bytes.Equal(edited, body) {
				t.Fatal("the edit changed nothing")
			}
			h.rewrite(path, reseal(t, good, edited))
			if _, _, err := checkpoint.Decode(h.read(path)); err != nil {
				t.Fatalf("the edited checkpoint does not pass its own checks: %v", err)
			}
			stats := &ckptStats{}
			h.ckptStats = stats
			h.checkCheckpointRecovery(h.fs) // served after the scrub == a full fold
			if want := map[bool]int{true: 1, false: 2}[e.atLoad]; stats.resumed != want {
				t.Fatalf("%d agents recovered from a checkpoint, want %d (refused at load: %v)", stats.resumed, want, e.atLoad)
			}
		})
	}
}

// TestEverySingleCheckpointEditIsHarmless runs recovery on a checkpoint
// with each single edit of its state line (every value changed, every key
// removed, every array element removed; sampled when there are many) and
// checks that, once the scrub has run, the agents are what a fold of
// their logs makes them. Edits inside Sent and Spawns are left out: what
// recovery does with them reads the log and is idempotent (a message is
// redelivered only to a recipient that lacks it, a child respawned only
// when it does not exist), and recovery prunes them.
func TestEverySingleCheckpointEditIsHarmless(t *testing.T) {
	h, agents := ckptHome(t)
	h.stop()
	child := agents[1].ID()
	path := filepath.Join(h.c.agentDir(child), checkpoint.Name)
	good := h.read(path)
	body := ckptBody(good)
	line, _, _ := bytes.Cut(body, []byte{'\n'})
	var doc any
	if err := json.Unmarshal(line, &doc); err != nil {
		t.Fatal(err)
	}
	var paths []string
	collectPaths("", doc, &paths)
	sort.Strings(paths)
	step := max(1, len(paths)/200)
	if os.Getenv("WARREN_LONG") == "1" {
		step = 1
	}
	tried := 0
	for i := 0; i < len(paths); i += step {
		p := paths[i]
		if strings.Contains(p, ".Sent") || strings.Contains(p, ".Spawns") {
			continue
		}
		for _, how := range []string{"change", "remove"} {
			edited, ok := editAt(body, p, how)
			if !ok {
				continue
			}
			tried++
			h.rewrite(path, reseal(t, good, edited))
			t.Run(p+" "+how, func(t *testing.T) { h.checkCheckpointRecovery(h.fs) })
		}
	}
	if tried < 20 {
		t.Fatalf("only %d edits tried", tried)
	}
}

// collectPaths lists the paths of every value in v (".p.Name",
// ".pending[0].seq").
func collectPaths(path string, v any, out *[]string) {
	switch x := v.(type) {
	case map[string]any:
		for k, el := range x {
			*out = append(*out, path+"."+k)
			collectPaths(path+"."+k, el, out)
		}
	case []any:
		for i, el := range x {
			*out = append(*out, fmt.Sprintf("%s[%d]", path, i))
			collectPaths(fmt.Sprintf("%s[%d]", path, i), el, out)
		}
	}
}

// editAt changes (a number +1, a string changed, a boolean flipped, null
// set) or removes the value at path of the state line of body.
func editAt(body []byte, path, how string) ([]byte, bool) {
	line, ids, _ := bytes.Cut(body, []byte{'\n'})
	var doc any
	if err := json.Unmarshal(line, &doc); err != nil {
		return nil, false
	}
	done := false
	var walk func(cur string, v any, set func(any), del func())
	walk = func(cur string, v any, set func(any), del func()) {
		if done {
			return
		}
		if cur == path {
			done = true
			if how == "remove" {
				del()
				return
			}
			switch x := v.(type) {
			case float64:
				set(x + 1)
			case string:
				set(x + "x")
			case bool:
				set(!x)
			case nil:
				set("x")
			default:
				done = false
			}
			return
		}
		switch x := v.(type) {
		case map[string]any:
			for k, el := range x {
				k := k
				walk(cur+"."+k, el, func(nv any) { x[k] = nv }, func() { delete(x, k) })
			}
		case []any:
			for i, el := range x {
				i := i
				walk(fmt.Sprintf("%s[%d]", cur, i), el, func(nv any) { x[i] = nv }, func() { x[i] = nil })
			}
		}
	}
	walk("", doc, func(any) {}, func() {})
	if !done {
		return nil, false
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, false
	}
	return append(append(b, '\n'), ids...), true
}

// TestRefoldWaitsForTheTurn: a refold (the scrub found a checkpoint
// wrong) never swaps the projection under a running turn; it is deferred
// to the turn's end, and then the projection is the log's.
func TestRefoldWaitsForTheTurn(t *testing.T) {
	h := newHarness(t)
	started, release := make(chan struct{}), make(chan struct{})
	h.prov.Register("slow", func(ctx context.Context, tr *inproc.Turn) (string, error) {
		close(started)
		<-release
		return "done", nil
	})
	id := h.create("lead", "", "slow")
	a := mustAgent(t, h.c, id)
	// What a lying checkpoint left in memory.
	a.View(func(p *projection, _ liveFlags) { p.Metadata["forged"] = "by a checkpoint" })
	done := make(chan struct{})
	go func() { defer close(done); _, _ = h.c.Send(context.Background(), id, "work", "", "", nil) }()
	<-started
	if err := h.c.refold(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	if got := look(a, func(p *projection, _ liveFlags) string { return p.Metadata["forged"] }); got == "" {
		t.Fatal("the projection was replaced while a turn ran")
	}
	close(release)
	<-done
	h.quiet()
	if got := look(a, func(p *projection, _ liveFlags) string { return p.Metadata["forged"] }); got != "" {
		t.Fatalf("after the turn the projection still holds what the log does not (%q)", got)
	}
	if n := look(a, func(p *projection, _ liveFlags) int { return p.TurnNo }); n != 1 {
		t.Fatalf("after the refold the projection has turn %d, want the log's 1", n)
	}
}
