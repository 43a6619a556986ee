package tests

// The per-log invariants of the crash fuzzer, computed from one log alone.

import (
	"encoding/json"
	"fmt"
	"strings"
)

// field decodes one string field of an entry's data.
func field(e cfEntry, key string) string {
	var m map[string]any
	if err := json.Unmarshal([]byte(e.Data), &m); err != nil {
		return ""
	}
	if v, ok := m[key].(string); ok {
		return v
	}
	return ""
}

func fieldList(e cfEntry, key string) []string {
	var m map[string]any
	if err := json.Unmarshal([]byte(e.Data), &m); err != nil {
		return nil
	}
	list, _ := m[key].([]any)
	out := make([]string, 0, len(list))
	for _, v := range list {
		out = append(out, fmt.Sprint(v))
	}
	return out
}

// logFacts is what the invariants need from one log, computed from the log
// alone.
type logFacts struct {
	created    bool
	name       string
	parent     string
	terminated bool
	pending    []string // enqueued - delivered - consumed by completed turns
	metadata   map[string]string
	gated      bool
	// stranded names the latest run when it is open and interrupted (not
	// waiting on a live token) and the resume policy has re-run it fewer
	// than 3 times: at rest under auto, a run lost (SPEC 11.7).
	stranded string
	// heldBoot is the boot whose turn failed last, when the latest turn
	// ended in turn.failed and no message was enqueued since: a failed
	// turn holds its messages until a new message, a poke or a restart
	// (docs/DECISIONS.md), so in that boot the agent rests with them.
	heldBoot string
}

// checkLog checks one log's own invariants and folds its facts.
func checkLog(p string, es []cfEntry) (logFacts, []string) {
	f := logFacts{metadata: map[string]string{}}
	var bad []string
	badf := func(format string, args ...any) { bad = append(bad, p+": "+fmt.Sprintf(format, args...)) }
	for i, e := range es {
		if e.Seq != uint64(i+1) {
			badf("entry %d has seq %d (gap or duplicate)", i+1, e.Seq)
			break
		}
	}
	completed := map[string]bool{}
	for _, e := range es {
		if e.Event == "turn.complete" {
			completed[field(e, "run_id")] = true
		}
	}
	var enq []string
	seenEnq := map[string]bool{}
	texts := map[string]string{} // sender + text -> message id
	gone := map[string]bool{}
	consumedBy := map[string]string{} // message id -> completed run that consumed it
	delivered := map[string]int{}
	tokConsumed := map[string]int{}
	// the latest run
	var cur string
	startBoot := "" // boot_id of the latest turn.start
	open := false
	wait := "" // state of the latest run's wait: "", live, consumed, revoked, expired
	interrupts := 0
	autoResumes := 0 // run.resumed by auto of the latest run
	for i, e := range es {
		switch e.Event {
		case "agent.created":
			if i != 0 {
				badf("agent.created at seq %d, not first", e.Seq)
			}
			if !f.created {
				f.created = true
				f.name = field(e, "name")
				f.parent = field(e, "parent_id")
				var d struct {
					Metadata map[string]string `json:"metadata"`
				}
				if json.Unmarshal([]byte(e.Data), &d) == nil {
					for k, v := range d.Metadata {
						f.metadata[k] = v
					}
				}
			}
		case "metadata.updated":
			var d struct {
				Key   string  `json:"key"`
				Value *string `json:"value"`
			}
			if json.Unmarshal([]byte(e.Data), &d) == nil {
				if d.Value == nil {
					delete(f.metadata, d.Key)
				} else {
					f.metadata[d.Key] = *d.Value
				}
			}
		case "tool.gate":
			f.gated = field(e, "action") == "gate"
		case "agent.terminated":
			f.terminated = true
		case "message.enqueued":
			f.heldBoot = "" // a new message retries a held agent
			id := field(e, "message_id")
			if !seenEnq[id] {
				seenEnq[id] = true
				enq = append(enq, id)
			}
			// Every message the fuzzer makes an agent send has a unique
			// text, so the same text from the same sender twice means a
			// side effect ran twice (a re-run executed a recorded call).
			if from := field(e, "sender"); from != "SYSTEM" {
				key := from + "\x00" + field(e, "payload")
				if prev, dup := texts[key]; dup && prev != id {
					badf("sender %s's message %q enqueued twice with ids %s and %s", from, field(e, "payload"), prev, id)
				}
				texts[key] = id
			}
		case "message.delivered":
			id := field(e, "message_id")
			delivered[id]++
			if delivered[id] > 1 {
				badf("message %s delivered twice", id)
			}
			gone[id] = true
		case "turn.start":
			f.heldBoot, startBoot = "", field(e, "boot_id")
			r := field(e, "run_id")
			if completed[r] {
				for _, id := range fieldList(e, "message_ids") {
					if prev, ok := consumedBy[id]; ok && prev != r {
						badf("message %s consumed by two completed turns (%s, %s)", id, prev, r)
					}
					consumedBy[id] = r
					gone[id] = true
				}
			}
			if r != cur {
				cur, wait, autoResumes = r, "", 0
			}
			open, interrupts = true, 0
		case "run.resumed":
			if field(e, "run_id") == cur {
				interrupts = 0
				if field(e, "by") == "auto" {
					autoResumes++
				}
			}
		case "turn.complete", "turn.failed", "turn.cancelled":
			if field(e, "run_id") == cur {
				open, wait = false, ""
			}
			if e.Event == "turn.failed" {
				f.heldBoot = startBoot
			}
		case "run.interrupted":
			if field(e, "run_id") == cur {
				interrupts++
				if interrupts > 1 {
					badf("run %s has two run.interrupted for one interruption (seq %d)", cur, e.Seq)
				}
			}
		case "run.waiting":
			if field(e, "run_id") == cur {
				wait = "live"
			}
		case "token.consumed":
			id := field(e, "token_id")
			tokConsumed[id]++
			if tokConsumed[id] > 1 {
				badf("token %s consumed twice (seq %d)", id, e.Seq)
			}
			if field(e, "run_id") == cur {
				wait = "consumed"
			}
		case "token.revoked":
			if field(e, "run_id") == cur {
				wait = "revoked"
			}
		case "token.expired":
			if field(e, "run_id") == cur {
				wait = "expired"
			}
		}
	}
	for id, n := range delivered {
		if _, ok := consumedBy[id]; ok && n > 0 {
			badf("message %s both delivered by check_inbox and consumed by a completed turn", id)
		}
	}
	if open && !f.terminated && len(es) > 0 && strings.HasSuffix(p, "events.jsonl") {
		// SPEC 4: a live or revoked wait is not a restart interruption; an
		// expired one has its wait_timeout; any other open run has exactly
		// one run.interrupted after it last (re)started.
		switch {
		case (wait == "live" || wait == "revoked") && interrupts != 0:
			badf("run %s has a %s wait but is marked interrupted", cur, wait)
		case wait != "live" && wait != "revoked" && interrupts != 1:
			badf("run %s is open (wait %q) but has %d run.interrupted since it last started (want exactly 1)", cur, wait, interrupts)
		}
		if wait != "live" && wait != "revoked" && interrupts == 1 && autoResumes < 3 {
			f.stranded = fmt.Sprintf("%s (re-run %d times by the resume policy)", cur, autoResumes)
		}
	}
	for _, id := range enq {
		if !gone[id] {
			f.pending = append(f.pending, id)
		}
	}
	return f, bad
}
