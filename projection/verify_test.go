package projection

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"testing"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/gen"
	"github.com/leanovate/gopter/prop"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/schema"
)

// checkAll runs every check recovery makes of a decoded checkpoint state
// against the log es (verify.go), then ends its replay as recovery does,
// and returns the first error.
func checkAll(ck *State, es []eventlog.Entry) error {
	if err := ck.CheckShape(); err != nil {
		return err
	}
	read := func(r inbox.Ref) (eventlog.Entry, error) {
		if r.Seq == 0 || r.Seq > uint64(len(es)) {
			return eventlog.Entry{}, fmt.Errorf("seq %d: %w", r.Seq, eventlog.ErrNoSuchSeq)
		}
		return es[r.Seq-1], nil
	}
	if err := ck.CheckWitnesses(read, false); err != nil {
		return err
	}
	if from, _, open := ck.OpenRunSpan(); open {
		i := int(from.Seq) - 1
		if err := ck.CheckRun(func() (eventlog.Entry, error) {
			if i >= len(es) {
				return eventlog.Entry{}, io.EOF
			}
			i++
			return es[i-1], nil
		}); err != nil {
			return err
		}
	}
	return nil
}

// realistic reports whether the prefix es could be a daemon's: no
// agent.terminated (a checkpoint is never written after one), and no run
// ended whose turn.start the prefix lacks.
func realistic(es []eventlog.Entry) bool {
	for _, e := range es {
		if e.Event == schema.AgentTerminated {
			return false
		}
	}
	return true
}

// TestCheckpointChecksPassOnTheTruth: a checkpoint written from a fold of
// any prefix of a generated log passes every check recovery makes, and
// its fingerprint is the fingerprint of a fold of the same lines, live or
// replayed (the scrub's comparison).
func TestCheckpointChecksPassOnTheTruth(t *testing.T) {
	params := gopter.DefaultTestParametersWithSeed(31)
	params.MinSuccessfulTests = 300
	props := gopter.NewProperties(params)
	props.Property("the truth checks out", prop.ForAll(func(steps []step, cut int) string {
		es := entries(genLog(steps))
		k := 1 + cut%len(es)
		if !realistic(es[:k]) {
			return ""
		}
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
		if err := checkAll(ck, es); err != nil {
			return "the checks refuse a true checkpoint: " + err.Error()
		}
		replayed := New()
		replayed.BeginReplay(nil)
		for _, e := range es[:k] {
			if err := replayed.Apply(e); err != nil {
				return "replay: " + err.Error()
			}
		}
		fps := map[string][32]byte{}
		for name, p := range map[string]*State{"checkpoint": ck, "live": head, "replay": replayed} {
			fp, err := p.Fingerprint()
			if err != nil {
				return name + ": " + err.Error()
			}
			fps[name] = fp
		}
		if fps["checkpoint"] != fps["live"] || fps["live"] != fps["replay"] {
			return fmt.Sprintf("fingerprints differ: %x", fps)
		}
		return ""
	}, genSteps(), gen.IntRange(0, 1<<20)))
	props.TestingRun(t)
}

// TestCheckpointEditsAreCaught is the property of issue 31 (D2): any
// single edit of a checkpoint's state (a value of its projection, a
// pending reference, an enqueued id), its sum recomputed, either changes
// nothing recovery serves, or is refused at load (the log is folded
// instead), or leaves a fingerprint the scrub finds different from the
// fold of the log (the agent is then refolded). Sent and Spawns are left
// out of the fingerprint on purpose (recovery prunes them): an edit of
// theirs must leave the served state as it is.
func TestCheckpointEditsAreCaught(t *testing.T) {
	params := gopter.DefaultTestParametersWithSeed(32)
	params.MinSuccessfulTests = 150
	props := gopter.NewProperties(params)
	var tried, atLoad, byScrub, harmless int
	props.Property("no edit goes unseen", prop.ForAll(func(steps []step, cut int) string {
		es := entries(genLog(steps))
		k := 1 + cut%len(es)
		if !realistic(es[:k]) {
			return ""
		}
		head, err := foldLive(es[:k])
		if err != nil {
			return "prefix fold: " + err.Error()
		}
		truth, err := head.Fingerprint()
		if err != nil {
			return err.Error()
		}
		st, err := head.EncodeState()
		if err != nil {
			return "encode: " + err.Error()
		}
		for _, edited := range singleEdits(st) {
			tried++
			ck, err := DecodeState(edited.body)
			if err != nil {
				atLoad++
				continue
			}
			if err := checkAll(ck, es); err != nil {
				atLoad++
				continue
			}
			fp, err := ck.Fingerprint()
			if err != nil {
				return edited.what + ": " + err.Error()
			}
			if fp != truth {
				byScrub++
				continue
			}
			// Unseen: it must change nothing served, the pending messages
			// (read back by reference) included.
			if err := ck.EndReplay(loader(es)); err != nil {
				atLoad++
				continue
			}
			if !edited.notServed {
				if got, want := servedOf(ck), servedOf(head); got != want {
					return fmt.Sprintf("edit %s (prefix %d) is unseen and changes what is served:\nwant %s\ngot  %s", edited.what, k, want, got)
				}
			}
			harmless++
		}
		return ""
	}, genSteps(), gen.IntRange(0, 1<<20)))
	props.TestingRun(t)
	t.Logf("%d single edits: %d refused at load, %d found by the scrub, %d harmless", tried, atLoad, byScrub, harmless)
	if atLoad == 0 || byScrub == 0 {
		t.Fatalf("the edits never exercised both checks (load %d, scrub %d)", atLoad, byScrub)
	}
}

// servedOf is what recovery serves of a state: every field but Sent and
// Spawns and the offsets (hints), with the pending messages in full.
func servedOf(p *State) string {
	c := *p
	c.Sent, c.Spawns = nil, nil
	c.LastOff, c.PrefRef.Off, c.SessRef.Off = 0, 0, 0
	if p.Run != nil {
		r := *p.Run
		r.StartRef.Off, r.EndRef.Off = 0, 0
		c.Run = &r
	}
	b, _ := json.Marshal(&c)
	ids, others := p.Enqueued.encode()
	var pend []string
	for _, m := range p.Pending.Peek() {
		m.Ref.Off = 0
		pend = append(pend, fmt.Sprintf("%+v", m))
	}
	return fmt.Sprintf("%s\n%s %v\n%s", b, ids, others, strings.Join(pend, "\n"))
}

// edit is one single edit of a checkpoint state's encoding.
type edit struct {
	what string
	body []byte
	// notServed: the edit is inside Sent, Spawns or an offset.
	notServed bool
}

// singleEdits returns every single edit of the encoded state body (the
// state line and the ids line): each JSON value of the state line
// changed (a number +1, a string changed, a boolean flipped, a null made
// a value, an element of an array removed, a key of an object removed),
// and each enqueued id removed.
func singleEdits(body []byte) []edit {
	line, ids, _ := strings.Cut(string(body), "\n")
	var doc any
	if err := json.Unmarshal([]byte(line), &doc); err != nil {
		panic(err)
	}
	var out []edit
	emit := func(what string, v any, notServed bool) {
		b, err := json.Marshal(v)
		if err != nil {
			panic(err)
		}
		out = append(out, edit{what: what, body: append(append(b, '\n'), ids...), notServed: notServed})
	}
	var walk func(path string, v any, set func(any), notServed bool)
	walk = func(path string, v any, set func(any), notServed bool) {
		if strings.HasSuffix(path, ".Off") || strings.HasSuffix(path, ".LastOff") || strings.HasSuffix(path, ".off") {
			notServed = true
		}
		try := func(what string, nv any) {
			set(nv)
			emit(path+" "+what, doc, notServed)
			set(v)
		}
		switch x := v.(type) {
		case float64:
			try("+1", x+1)
		case string:
			try("changed", x+"x")
			if x != "" {
				try("emptied", "")
			}
		case bool:
			try("flipped", !x)
		case nil:
			try("set", "x")
		case []any:
			for i := range x {
				i := i
				rest := append(append([]any{}, x[:i]...), x[i+1:]...)
				try(fmt.Sprintf("[%d] removed", i), rest)
				walk(fmt.Sprintf("%s[%d]", path, i), x[i], func(nv any) { x[i] = nv }, notServed)
			}
		case map[string]any:
			keys := make([]string, 0, len(x))
			for k := range x {
				keys = append(keys, k)
			}
			sort.Strings(keys)
			for _, k := range keys {
				k := k
				ns := notServed || ((k == "Sent" || k == "Spawns") && path == ".p")
				old := x[k]
				delete(x, k)
				emit(path+"."+k+" removed", doc, ns)
				x[k] = old
				walk(path+"."+k, old, func(nv any) { x[k] = nv }, ns)
			}
		}
	}
	walk("", doc, func(any) {}, false)
	idsLine := strings.TrimSuffix(ids, "\n")
	for i := 0; i+32 <= len(idsLine); i += 32 {
		nb := line + "\n" + idsLine[:i] + idsLine[i+32:] + "\n"
		out = append(out, edit{what: fmt.Sprintf("enqueued id %d removed", i/32), body: []byte(nb)})
	}
	return out
}

// TestReplayFingerprintOfAnOpenRunWithoutCalls: a replay stopped at an
// open run that has no call yet, after a run that had calls (whose array
// a replay keeps for the next run's calls), has the fingerprint of the
// live fold and of its checkpoint, and its open run checks out. (The
// scrub compares exactly these; a run given an empty array instead of
// none made it refold agents it had no reason to.)
func TestReplayFingerprintOfAnOpenRunWithoutCalls(t *testing.T) {
	es := entries([]rec{created,
		{schema.TurnStart, schema.TurnStartData{RunID: "r1", Turn: 1, Prompt: "go", Provider: "p2", Model: "m2"}},
		{schema.ToolCall, schema.ToolCallData{CallID: "c1", Tool: "check_inbox", RunID: "r1", Turn: 1}},
		{schema.TurnComplete, schema.TurnCompleteData{RunID: "r1", Turn: 1, Response: "ok"}},
		{schema.TurnStart, schema.TurnStartData{RunID: "r2", Turn: 2, Prompt: "again", Provider: "p2", Model: "m2", MessageIDs: []string{}}},
	})
	live, err := foldLive(es)
	if err != nil {
		t.Fatal(err)
	}
	replay := func() *State {
		p := New()
		p.BeginReplay(&Scratch{})
		for _, e := range es {
			if err := p.Apply(e); err != nil {
				t.Fatal(err)
			}
		}
		return p
	}
	replayed := replay()
	st, err := live.EncodeState()
	if err != nil {
		t.Fatal(err)
	}
	ck, err := DecodeState(st)
	if err != nil {
		t.Fatal(err)
	}
	want, err := live.Fingerprint()
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]*State{"replay": replayed, "checkpoint": ck} {
		got, err := p.Fingerprint()
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("%s: fingerprint %x, the live fold's %x", name, got, want)
		}
	}
	if err := checkAll(ck, es); err != nil {
		t.Errorf("the checks refuse the checkpoint of an open run: %v", err)
	}
	// The same run checked from a state still replaying.
	i := 4
	if err := replay().CheckRun(func() (eventlog.Entry, error) {
		if i >= len(es) {
			return eventlog.Entry{}, io.EOF
		}
		i++
		return es[i-1], nil
	}); err != nil {
		t.Errorf("CheckRun on a replaying state: %v", err)
	}
}
