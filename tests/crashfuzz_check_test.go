package tests

import (
	"context"
	"encoding/json"
	"fmt"
	"github.com/warren-dev/warren/schema"
	"path"
	"reflect"
	"sort"
	"strings"

	"github.com/warren-dev/warren/engine"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
)

// cfEntry is a log entry as the fuzzer compares it.
type cfEntry struct {
	Seq   uint64
	Event string
	Data  string
}

func (e cfEntry) String() string { return fmt.Sprintf("#%d %s %s", e.Seq, e.Event, e.Data) }

// cfAgentSnap is one agent as a core serves it.
type cfAgentSnap struct {
	ID, Name, Path, Parent, Status string
	Pending                        []string
	WaitToken                      string
	Metadata                       map[string]string
	Gated                          bool
}

// cfSnap is everything the fuzzer compares between two cores.
type cfSnap struct {
	Agents map[string]cfAgentSnap
	User   []string
	Logs   map[string][]cfEntry // path -> entries
	Dirs   []string             // agent directories
}

func userLogPath() string { return path.Join(cfHome, "user.jsonl") }

func agentLogPath(id string) string { return path.Join(cfHome, "agents", id, "events.jsonl") }

// snapshotCore reads a core's served state and every log on fsys.
func snapshotCore(c *engine.Core, fsys faultfs.FS) (*cfSnap, error) {
	s := &cfSnap{Agents: map[string]cfAgentSnap{}, Logs: map[string][]cfEntry{}}
	for _, v := range c.List() {
		a := cfAgentSnap{ID: v.ID, Name: v.Name, Path: v.Path, Parent: v.ParentID, Status: v.Status}
		if v.Wait != nil {
			a.WaitToken = v.Wait.TokenID
		}
		m, err := c.Inspect(context.Background(), v.ID)
		if err != nil {
			return nil, fmt.Errorf("inspect %s: %w", v.ID, err)
		}
		a.Metadata = map[string]string{}
		for k, v := range m.Metadata {
			a.Metadata[k] = v
		}
		a.Gated = m.Gated
		for _, it := range m.Inbox {
			a.Pending = append(a.Pending, it.MessageID)
		}
		s.Agents[v.ID] = a
	}
	for _, m := range c.UserPending(context.Background()) {
		s.User = append(s.User, m.ID)
	}
	dirs, err := fsys.ReadDir(path.Join(cfHome, "agents"))
	if err != nil {
		return nil, fmt.Errorf("listing agents: %w", err)
	}
	paths := []string{userLogPath()}
	for _, d := range dirs {
		if d.IsDir() {
			s.Dirs = append(s.Dirs, d.Name())
			paths = append(paths, agentLogPath(d.Name()))
		}
	}
	for _, p := range paths {
		if ok, _ := faultfs.Exists(fsys, p); !ok {
			continue
		}
		es, err := eventlog.ReadAll(fsys, p)
		if err != nil {
			return nil, fmt.Errorf("log %s is not valid: %w", p, err)
		}
		out := make([]cfEntry, len(es))
		for i, e := range es {
			out[i] = cfEntry{Seq: e.Seq, Event: e.Event, Data: normalizeData(e.Event, e.Data)}
		}
		s.Logs[p] = out
	}
	return s, nil
}

// normalizeData hides the fields that are random by design, so that two
// instances that did the same thing compare equal: the provider session
// handle of session.created (a recovery that finishes a spawn creates a
// fresh provider session on each instance).
func normalizeData(event string, data []byte) string {
	if event != "session.created" {
		return string(data)
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return string(data)
	}
	if _, ok := m["handle"]; ok {
		m["handle"] = "<handle>"
	}
	b, err := json.Marshal(m)
	if err != nil {
		return string(data)
	}
	return string(b)
}

// canonical returns a copy of s in which the ids of messages SYSTEM sent
// (state notifications of subscriptions, failure notices) are replaced by
// their text: the daemon gives them random ids, so two instances that
// recovered the same bytes and sent the same notices differ only there.
func canonical(s *cfSnap) *cfSnap {
	ids := map[string]string{}
	for _, es := range s.Logs {
		for _, e := range es {
			if e.Event == "message.enqueued" && field(e, "sender") == "SYSTEM" {
				ids[field(e, "message_id")] = "<SYSTEM:" + field(e, "payload") + ">"
			}
		}
	}
	if len(ids) == 0 {
		return s
	}
	swap := func(x string) string {
		for id, repl := range ids {
			x = strings.ReplaceAll(x, id, repl)
		}
		return x
	}
	out := &cfSnap{Agents: map[string]cfAgentSnap{}, Logs: map[string][]cfEntry{}, Dirs: s.Dirs}
	for id, a := range s.Agents {
		a.Pending = append([]string(nil), a.Pending...)
		for i, p := range a.Pending {
			a.Pending[i] = swap(p)
		}
		out.Agents[id] = a
	}
	for _, u := range s.User {
		out.User = append(out.User, swap(u))
	}
	for p, es := range s.Logs {
		c := make([]cfEntry, len(es))
		for i, e := range es {
			e.Data = swap(e.Data)
			c[i] = e
		}
		out.Logs[p] = c
	}
	return out
}

// diffSnaps describes how two snapshots differ ("" when equal), up to the
// random ids of SYSTEM's messages.
func diffSnaps(want, got *cfSnap) string {
	want, got = canonical(want), canonical(got)
	var out []string
	for id, a := range want.Agents {
		b, ok := got.Agents[id]
		if !ok {
			out = append(out, fmt.Sprintf("  agent %s (%s) missing", id, a.Name))
		} else if !reflect.DeepEqual(a, b) {
			out = append(out, fmt.Sprintf("  agent %s:\n    want %+v\n    got  %+v", id, a, b))
		}
	}
	for id, b := range got.Agents {
		if _, ok := want.Agents[id]; !ok {
			out = append(out, fmt.Sprintf("  extra agent %s (%s)", id, b.Name))
		}
	}
	if !reflect.DeepEqual(want.User, got.User) {
		out = append(out, fmt.Sprintf("  USER inbox: want %v got %v", want.User, got.User))
	}
	for p, es := range want.Logs {
		gs, ok := got.Logs[p]
		if !ok {
			out = append(out, "  log missing: "+p)
			continue
		}
		if !reflect.DeepEqual(es, gs) {
			out = append(out, fmt.Sprintf("  log %s differs:\n    want %s\n    got  %s", p, fmtEntries(es), fmtEntries(gs)))
		}
	}
	for p := range got.Logs {
		if _, ok := want.Logs[p]; !ok {
			out = append(out, "  extra log: "+p)
		}
	}
	sort.Strings(out)
	return strings.Join(out, "\n")
}

func fmtEntries(es []cfEntry) string {
	var b strings.Builder
	for _, e := range es {
		b.WriteString("\n      ")
		d := e.Data
		if len(d) > 160 {
			d = d[:160] + "..."
		}
		fmt.Fprintf(&b, "#%d %s %s", e.Seq, e.Event, d)
	}
	return b.String()
}

// checkNow snapshots the core and returns what violates an invariant.
func (w *cfWorld) checkNow() (*cfSnap, []string, error) {
	snap, err := snapshotCore(w.core, w.mem)
	if err != nil {
		return nil, nil, err
	}
	var bad []string
	facts := map[string]logFacts{}
	for p, es := range snap.Logs {
		f, b := checkLog(p, es)
		bad = append(bad, b...)
		facts[p] = f
	}
	// Every agent directory holds a complete creation; nothing half there.
	for _, d := range snap.Dirs {
		f, ok := facts[agentLogPath(d)]
		if !ok || !f.created {
			bad = append(bad, fmt.Sprintf("agent directory %s has no agent.created (a half-created agent survived); it holds %s", d, dirListing(w.mem, path.Join(cfHome, "agents", d))))
		}
	}
	// Served agents agree with their logs, and every live log is served.
	for id, a := range snap.Agents {
		f := facts[agentLogPath(id)]
		switch {
		case a.Status == "corrupt":
			bad = append(bad, fmt.Sprintf("agent %s is corrupt after a crash", id))
		case !f.created || f.terminated:
			bad = append(bad, fmt.Sprintf("agent %s is served but its log has created=%v terminated=%v", id, f.created, f.terminated))
		case f.name != a.Name || f.parent != a.Parent:
			bad = append(bad, fmt.Sprintf("agent %s is served as %q/parent %q; its log says %q/parent %q", id, a.Name, a.Parent, f.name, f.parent))
		}
		if !reflect.DeepEqual(f.metadata, a.Metadata) || f.gated != a.Gated {
			bad = append(bad, fmt.Sprintf("agent %s (%s) has metadata %v gated %v; its log says %v gated %v", id, a.Name, a.Metadata, a.Gated, f.metadata, f.gated))
		}
		if !reflect.DeepEqual(nonNilS(f.pending), nonNilS(a.Pending)) {
			bad = append(bad, fmt.Sprintf("agent %s (%s) inbox %v; its log says enqueued-delivered-consumed = %v%s", id, a.Name, a.Pending, f.pending,
				mentions(snap.Logs, append(append([]string(nil), a.Pending...), f.pending...))))
		}
	}
	for _, d := range snap.Dirs {
		f := facts[agentLogPath(d)]
		if _, served := snap.Agents[d]; f.created && !f.terminated && !served {
			bad = append(bad, fmt.Sprintf("agent %s (%s) has a live log but is not served", d, f.name))
		}
	}
	if uf, ok := facts[userLogPath()]; ok && !reflect.DeepEqual(nonNilS(uf.pending), nonNilS(snap.User)) {
		bad = append(bad, fmt.Sprintf("USER inbox %v; user.jsonl says %v", snap.User, uf.pending))
	}
	// Acknowledged entries survive: every log extends its last quiescent
	// state.
	for p, old := range w.oracle.logs {
		cur, ok := snap.Logs[p]
		if !ok {
			if len(old) > 0 {
				bad = append(bad, fmt.Sprintf("log %s with %d acknowledged entries vanished", p, len(old)))
			}
			continue
		}
		if len(cur) < len(old) || !reflect.DeepEqual(cur[:len(old)], old) {
			bad = append(bad, fmt.Sprintf("log %s lost or changed acknowledged entries:\n    acked %s\n    now   %s", p, fmtEntries(old), fmtEntries(cur)))
		}
	}
	// The acknowledged tree.
	for id, n := range w.oracle.created {
		if w.oracle.terminated[id] {
			continue
		}
		a, ok := snap.Agents[id]
		switch {
		case !ok && w.oracle.terminating[id] && facts[agentLogPath(id)].terminated:
			// an in-flight termination that became durable
			w.oracle.terminated[id] = true
		case !ok:
			bad = append(bad, fmt.Sprintf("acknowledged agent %s (%s, parent %q) is missing", id, n.Name, n.Parent))
		case a.Name != n.Name || a.Parent != n.Parent:
			bad = append(bad, fmt.Sprintf("acknowledged agent %s is %q/parent %q, want %q/parent %q", id, a.Name, a.Parent, n.Name, n.Parent))
		}
	}
	if w.strict {
		for id, n := range w.oracle.spawned {
			if _, ok := snap.Agents[id]; !ok && !w.oracle.terminated[id] {
				bad = append(bad, fmt.Sprintf("spawn of %s (%s) accepted in an acknowledged turn of %s, but the child does not exist", id, n.Name, n.Parent))
			}
		}
	}
	for id := range w.oracle.terminated {
		if _, ok := snap.Agents[id]; ok {
			bad = append(bad, fmt.Sprintf("acknowledged termination of %s undone", id))
		}
	}
	for mid, id := range w.oracle.delivered {
		if id == "USER" {
			for _, p := range snap.User {
				if p == mid {
					bad = append(bad, fmt.Sprintf("message %s drained from USER is pending again", mid))
				}
			}
		}
		if a, ok := snap.Agents[id]; ok {
			for _, p := range a.Pending {
				if p == mid {
					bad = append(bad, fmt.Sprintf("message %s delivered by an acknowledged check_inbox is pending again in %s", mid, id))
				}
			}
		}
	}
	if w.wake {
		// SPEC 11.4: with wake turns, an idle agent's pending messages are
		// consumed by a completed turn; none stays pending at rest.
		for id, a := range snap.Agents {
			f := facts[agentLogPath(id)]
			// A failed turn holds its messages in the boot it failed in
			// (docs/DECISIONS.md); a restart retries them once.
			held := f.heldBoot != "" && f.heldBoot == w.bootID()
			if a.Status == "idle" && !a.Gated && !held && len(a.Pending) > 0 {
				bad = append(bad, fmt.Sprintf("agent %s (%s) is idle at rest with pending messages %v", id, a.Name, a.Pending))
			}
			// SPEC 11.7: under the resume policy auto no run is lost to
			// a stop or a crash: at rest an interrupted run has been re-run,
			// or re-run 3 times and left.
			if f.stranded != "" {
				bad = append(bad, fmt.Sprintf("agent %s (%s) is at rest with its interrupted run %s: lost", id, a.Name, f.stranded))
			}
		}
	}
	return snap, bad, nil
}

// checkAll checks every invariant at a quiescent point and advances the
// oracle. The core is drained before (step), but work a timer of the core
// starts (a wait's deadline sweep and the re-run it makes, a healed log's
// owed end) is not covered by its Idle: a check may read a creation
// half-way or a message between its log and its inbox. So a violation is
// read again once the core is at rest, and only one that is still there
// fails; one that is gone is counted ("check raced background work") and
// logged.
func (w *cfWorld) checkAll() error {
	snap, bad, err := w.checkNow()
	if err != nil {
		return w.failf("%v", err)
	}
	if len(bad) > 0 && w.core != nil {
		first := bad
		if err := w.drain(); err != nil {
			return err
		}
		if snap, bad, err = w.checkNow(); err != nil {
			return w.failf("%v", err)
		}
		if len(bad) == 0 {
			w.cov["check raced background work"]++
			w.logf("  a check raced the core's background work; at rest it holds (first read: %s)", strings.Join(first, "; "))
		}
	}
	if len(bad) > 0 {
		sort.Strings(bad)
		return w.failf("invariants violated (read twice, the second time at rest):\n  %s", strings.Join(bad, "\n  "))
	}
	for _, a := range snap.Agents {
		w.cov["status "+a.Status]++
	}
	// Advance the oracle: everything served now is acknowledged.
	w.oracle.logs = snap.Logs
	for id, a := range snap.Agents {
		w.oracle.created[id] = cfNode{Name: a.Name, Parent: a.Parent}
	}
	return nil
}

func nonNilS(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// mentions lists, for a failure message, every logged entry that names
// one of ids (where a message that disagrees was sent, enqueued, consumed).
func mentions(logs map[string][]cfEntry, ids []string) string {
	var b strings.Builder
	for _, id := range ids {
		for p, es := range logs {
			for _, e := range es {
				if strings.Contains(e.Data, id) {
					fmt.Fprintf(&b, "\n      %s %s", path.Base(path.Dir(p)), e)
				}
			}
		}
	}
	return b.String()
}

// checkSpend is guarantee 11.9's second half: after any crash, the spend
// the core counts for each agent is the sum of the usage.step entries and
// completed turns in its log.
func checkSpend(c *engine.Core, fsys faultfs.FS) error {
	for _, v := range c.List() {
		es, err := eventlog.ReadAll(fsys, agentLogPath(v.ID))
		if err != nil {
			return fmt.Errorf("reading %s's log: %w", v.ID, err)
		}
		var tokens int64
		steps, turns := 0, 0
		for _, e := range es {
			switch e.Event {
			case schema.UsageStep:
				var d schema.UsageStepData
				if err := json.Unmarshal(e.Data, &d); err != nil {
					return fmt.Errorf("%s: usage.step %d: %w", v.ID, e.Seq, err)
				}
				tokens += int64(d.InputTokens + d.OutputTokens)
				steps++
			case schema.TurnComplete:
				turns++
			}
		}
		if v.Spent.Tokens != tokens || v.Spent.Steps != steps || v.Spent.Turns != turns {
			return fmt.Errorf("11.9: agent %s counts %+v; its log has %d tokens in %d usage.step entries and %d turns", v.Path, v.Spent, tokens, steps, turns)
		}
	}
	return nil
}

// dirListing names the files of dir with their sizes (for a failure's
// message).
func dirListing(fsys faultfs.FS, dir string) string {
	es, err := fsys.ReadDir(dir)
	if err != nil {
		return err.Error()
	}
	var out []string
	for _, e := range es {
		n := "?"
		if fi, err := e.Info(); err == nil {
			n = fmt.Sprint(fi.Size())
		}
		out = append(out, e.Name()+" ("+n+" bytes)")
	}
	if len(out) == 0 {
		return "nothing"
	}
	return strings.Join(out, ", ")
}
