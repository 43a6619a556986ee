package tests

import (
	"strings"
	"testing"
)

// The fuzzer is only as good as its oracle: these tests feed it logs that
// break each invariant and require it to say so.

func cfLog(events ...string) []cfEntry {
	out := make([]cfEntry, len(events))
	for i, ev := range events {
		name, data, _ := strings.Cut(ev, " ")
		out[i] = cfEntry{Seq: uint64(i + 1), Event: name, Data: data}
	}
	return out
}

func TestCrashfuzzOracleCatchesBrokenLogs(t *testing.T) {
	created := `agent.created {"agent_id":"a","name":"x","parent_id":null,"metadata":{}}`
	cases := []struct {
		name string
		log  []cfEntry
		want string
	}{
		{"seq gap", append(cfLog(created), cfEntry{Seq: 3, Event: "turn.start", Data: `{"run_id":"r"}`}), "gap or duplicate"},
		{"token consumed twice", cfLog(created,
			`token.consumed {"token_id":"t","run_id":"r"}`, `token.consumed {"token_id":"t","run_id":"r"}`), "consumed twice"},
		{"two interruptions of one run start", cfLog(created,
			`turn.start {"run_id":"r","message_ids":[]}`,
			`run.interrupted {"run_id":"r","reason":"process_restart"}`,
			`run.interrupted {"run_id":"r","reason":"process_restart"}`), "two run.interrupted"},
		{"open run never marked", cfLog(created, `turn.start {"run_id":"r","message_ids":[]}`), "want exactly 1"},
		{"live wait marked interrupted", cfLog(created,
			`turn.start {"run_id":"r","message_ids":[]}`,
			`run.waiting {"run_id":"r","token_id":"t"}`,
			`run.interrupted {"run_id":"r","reason":"process_restart"}`), "live wait"},
		{"message consumed by two completed turns", cfLog(created,
			`message.enqueued {"message_id":"m"}`,
			`turn.start {"run_id":"r1","message_ids":["m"]}`, `turn.complete {"run_id":"r1"}`,
			`turn.start {"run_id":"r2","message_ids":["m"]}`, `turn.complete {"run_id":"r2"}`), "two completed turns"},
		{"message delivered twice", cfLog(created,
			`message.enqueued {"message_id":"m"}`,
			`message.delivered {"message_id":"m"}`, `message.delivered {"message_id":"m"}`), "delivered twice"},
		{"side effect run twice", cfLog(created,
			`message.enqueued {"message_id":"m1","sender":"s","payload":"hello"}`,
			`message.enqueued {"message_id":"m2","sender":"s","payload":"hello"}`), "enqueued twice"},
		{"creation not first", cfLog(`turn.start {"run_id":"r","message_ids":[]}`, created), "not first"},
	}
	for _, c := range cases {
		_, bad := checkLog("/home/agents/a/events.jsonl", c.log)
		if !strings.Contains(strings.Join(bad, "\n"), c.want) {
			t.Errorf("%s: the oracle said %q, want a complaint containing %q", c.name, bad, c.want)
		}
	}
}

func TestCrashfuzzOracleFoldsInbox(t *testing.T) {
	f, bad := checkLog("/home/agents/a/events.jsonl", cfLog(
		`agent.created {"agent_id":"a","name":"x","parent_id":"p","metadata":{"k":"v"}}`,
		`message.enqueued {"message_id":"m1","sender":"s","payload":"p1"}`,
		`message.enqueued {"message_id":"m2","sender":"s","payload":"p2"}`,
		`message.enqueued {"message_id":"m3","sender":"s","payload":"p3"}`,
		`message.enqueued {"message_id":"m4","sender":"s","payload":"p4"}`,
		`message.enqueued {"message_id":"m2","sender":"s","payload":"p2"}`,
		`message.delivered {"message_id":"m1"}`,
		`turn.start {"run_id":"r1","message_ids":["m3"]}`, `turn.complete {"run_id":"r1"}`,
		`turn.start {"run_id":"r2","message_ids":["m4"]}`, `turn.failed {"run_id":"r2"}`,
		`metadata.updated {"key":"k","value":null}`,
		`tool.gate {"action":"gate"}`,
	))
	if len(bad) > 0 {
		t.Fatalf("a valid log was refused: %v", bad)
	}
	if strings.Join(f.pending, ",") != "m2,m4" || f.parent != "p" || len(f.metadata) != 0 || !f.gated {
		t.Fatalf("folded %+v; want pending m2,m4 (a failed turn consumes nothing), parent p, no metadata, gated", f)
	}
}

// TestCrashfuzzOracleCatchesLostAckedEntry: after a step, every log must
// extend what the oracle saw acknowledged.
func TestCrashfuzzOracleCatchesLostAckedEntry(t *testing.T) {
	w, err := newWorld()
	if err != nil {
		t.Fatal(err)
	}
	defer w.close()
	if err := w.opCreateRoot(cfCrash{}); err != nil {
		t.Fatal(err)
	}
	id := w.alive()[0].ID
	p := agentLogPath(id)
	w.oracle.logs[p] = append(w.oracle.logs[p], cfEntry{Seq: uint64(len(w.oracle.logs[p]) + 1), Event: "turn.complete", Data: `{}`})
	err = w.checkAll()
	if err == nil || !strings.Contains(err.Error(), "lost or changed acknowledged entries") {
		t.Fatalf("checkAll = %v; want a lost acknowledged entry reported", err)
	}
	w.oracle.logs[p] = w.oracle.logs[p][:len(w.oracle.logs[p])-1]
	w.oracle.created["ghost"] = cfNode{Name: "ghost"}
	if err := w.checkAll(); err == nil || !strings.Contains(err.Error(), "acknowledged agent ghost") {
		t.Fatalf("checkAll = %v; want a missing acknowledged agent reported", err)
	}
}
