package tests

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestDamagedUserInboxRepairedFromTheCLI (D7, process level): a flipped
// byte in the middle of user.jsonl leaves the daemon serving every agent,
// says in `daemon status` and in the inbox's refusal what is wrong and
// how to fix it, and the fix it names works: `warren logs USER` reads the
// log up to the damage, `warren repair USER` keeps a copy and cuts it, and
// the restarted daemon serves the USER inbox again.
func TestDamagedUserInboxRepairedFromTheCLI(t *testing.T) {
	t.Parallel()
	d := startTestDaemon(t, modeBinary)
	d.createAgent("lead", "inproc", "echo", "")
	for _, text := range []string{"first words", "second words", "third words"} {
		d.callN("tool.call", map[string]any{"agent_id": "lead", "tool": "send_message",
			"arguments": map[string]any{"recipient": "USER", "text": text}})
	}
	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(d.Home, "user.jsonl")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.Index(b, []byte("second words"))
	if i < 0 {
		t.Fatalf("user.jsonl does not hold the second message:\n%s", b)
	}
	b[i] ^= 0x01 // "second" -> "recond": the line's CRC no longer matches
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}

	d.Start()
	if got := d.callN("agent.list", nil); !strings.Contains(toJSON(t, got), `"lead"`) {
		t.Fatalf("agent.list with a damaged USER inbox: %v", got)
	}
	st := d.callN("daemon.status", nil)
	if why, _ := st["user_inbox_degraded"].(string); !strings.Contains(why, "warren repair USER") {
		t.Fatalf("daemon.status does not say the USER inbox is damaged and how to fix it: %v", st)
	}
	_, err = d.Client().Call(procCtx(t), "inbox.list", nil)
	if err == nil || !strings.Contains(err.Error(), "warren repair USER") {
		t.Fatalf("inbox.list on a damaged USER inbox: %v", err)
	}
	if err := d.Stop(); err != nil {
		t.Fatal(err)
	}

	logs := runCLI(t, d.Home, "logs", "USER")
	if !strings.Contains(logs.stdout, "first words") || logs.code == 0 {
		t.Fatalf("warren logs USER on the damaged log: exit %d\nstdout: %s\nstderr: %s", logs.code, logs.stdout, logs.stderr)
	}
	rep := runCLI(t, d.Home, "repair", "USER").want(t, 0, "warren repair USER")
	backups, _ := filepath.Glob(path + ".corrupt-*")
	if len(backups) != 1 || !strings.Contains(rep.stdout, backups[0]) {
		t.Fatalf("warren repair USER kept %v; it said:\n%s", backups, rep.stdout)
	}
	if kept, err := os.ReadFile(backups[0]); err != nil || !bytes.Equal(kept, b) {
		t.Fatalf("the kept copy differs from the damaged log (%v)", err)
	}

	d.Start()
	if st := d.callN("daemon.status", nil); st["user_inbox_degraded"] != nil {
		t.Fatalf("daemon.status after the repair: %v", st)
	}
	msgs := toJSON(t, d.callN("inbox.list", nil))
	if !strings.Contains(msgs, "first words") || strings.Contains(msgs, "third words") {
		t.Fatalf("the repaired USER inbox serves %s, want the first message (the log is cut at the damage)", msgs)
	}
}

// toJSON renders v for a substring check in a test's assertion.
func toJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
