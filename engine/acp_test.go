package engine

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/warren-dev/warren/config"
	"github.com/warren-dev/warren/schema"
)

var fakeACP struct {
	once sync.Once
	bin  string
	err  error
}

// fakeACPAgent builds provider/acp's fake ACP agent once per test binary.
func fakeACPAgent(t *testing.T) string {
	t.Helper()
	fakeACP.once.Do(func() {
		dir, err := os.MkdirTemp("", "warren-fakeacp")
		if err != nil {
			fakeACP.err = err
			return
		}
		fakeACP.bin = filepath.Join(dir, "fakeagent")
		out, err := exec.Command("go", "build", "-o", fakeACP.bin, "../provider/acp/internal/fakeagent").CombinedOutput()
		if err != nil {
			fakeACP.err = &buildErr{err: err, out: string(out)}
		}
	})
	if fakeACP.err != nil {
		t.Fatalf("building the fake ACP agent: %v", fakeACP.err)
	}
	return fakeACP.bin
}

type buildErr struct {
	err error
	out string
}

func (e *buildErr) Error() string { return e.err.Error() + ": " + e.out }

// acpHarness is a harness with an acp entry "fake" running the fake agent,
// its sessions kept in state; env adds FAKEACP_ variables.
func acpHarness(t *testing.T, env map[string]string, settings map[string]any) (*harness, string) {
	bin := fakeACPAgent(t)
	state := t.TempDir()
	h := newHarness(t, func(h *harness) {
		h.cfg.Providers = map[string]config.ProviderConfig{"fake": acpEntry(bin, state, env, settings)}
	})
	return h, state
}

func acpEntry(bin, state string, env map[string]string, settings map[string]any) config.ProviderConfig {
	e := map[string]string{"FAKEACP_STATE": state}
	for k, v := range env {
		e[k] = v
	}
	s := map[string]any{"type": "acp", "command": []any{bin}}
	for k, v := range settings {
		s[k] = v
	}
	return config.ProviderConfig{Env: e, Settings: s}
}

func (h *harness) createOn(name, prov string) string {
	h.t.Helper()
	id, err := h.c.CreateAgent(context.Background(), CreateSpec{Name: name, Provider: prov})
	if err != nil {
		h.t.Fatalf("create %s on %s: %v", name, prov, err)
	}
	return id
}

// restored returns the data of the agent's session.restored entries.
func (h *harness) restored(id string) []map[string]any {
	var out []map[string]any
	for _, e := range h.entries(id) {
		if e.Event == schema.SessionRestored {
			out = append(out, dataOf(h.t, e))
		}
	}
	return out
}

func TestACPTurnAndNativeRestoreAfterRestart(t *testing.T) {
	h, _ := acpHarness(t, nil, nil)
	id := h.createOn("coder", "fake")
	if res := h.send(id, "first"); res.Response != "turn 1: first" {
		t.Fatalf("first: %+v", res)
	}
	h.restart()
	res := h.send(id, "second")
	if res.Response != "turn 2: second" {
		t.Fatalf("after the restart the agent's own session must be back: %+v", res)
	}
	r := h.restored(id)
	last := r[len(r)-1]
	if last["strategy"] != schema.RestoreNative || last["method"] != "session/load" {
		t.Fatalf("session.restored %v", last)
	}
}

func TestACPLoadFailureFallsBackToHistory(t *testing.T) {
	bin := fakeACPAgent(t)
	h, state := acpHarness(t, nil, nil)
	id := h.createOn("coder", "fake")
	h.send(id, "first")
	h.cfg.Providers["fake"] = acpEntry(bin, state, map[string]string{"FAKEACP_LOAD_FAIL": "1"}, nil)
	h.restart()
	res := h.send(id, "second")
	if res.Response != "turn 1: second (history injected)" {
		t.Fatalf("a failed load must give a fresh session with the history: %+v", res)
	}
	r := h.restored(id)
	if last := r[len(r)-1]; last["strategy"] != schema.RestoreHistory {
		t.Fatalf("session.restored %v", last)
	}
	if n := h.count(id, schema.SessionCreated); n != 2 {
		t.Fatalf("%d session.created, want the first and the fallback's", n)
	}
}

func TestACPPermissionAskWaitsForTheOperator(t *testing.T) {
	for _, restart := range []bool{false, true} {
		name := "answered"
		if restart {
			name = "answered after a restart"
		}
		t.Run(name, func(t *testing.T) {
			h, _ := acpHarness(t, nil, nil)
			id := h.createOn("coder", "fake")
			res := h.send(id, "@say checking\n@permission rm -rf build\n@say done")
			if res.Status != "suspended" || res.Wait == nil || res.Wait.Kind != "permission" || !strings.Contains(res.Wait.Prompt, "rm -rf build") {
				t.Fatalf("send: %+v", res)
			}
			if restart {
				h.restart()
			}
			ws := h.c.Waits()
			if len(ws) != 1 || ws[0].Kind != "permission" {
				t.Fatalf("waits %+v", ws)
			}
			out, err := h.c.ResumeByID(context.Background(), id, ws[0].TokenID, "allow")
			if err != nil || !strings.Contains(out.Response, "permission rm -rf build: selected allow;") || !strings.HasSuffix(out.Response, "done") {
				t.Fatalf("resume: %+v, %v", out, err)
			}
			if n := h.count(id, schema.TurnComplete); n != 1 {
				t.Fatalf("%d turn.complete", n)
			}
		})
	}
}

func TestACPPermissionPolicyFromConfig(t *testing.T) {
	h, _ := acpHarness(t, nil, map[string]any{"permissions": "deny"})
	id := h.createOn("coder", "fake")
	if res := h.send(id, "@permission rm -rf build"); !strings.Contains(res.Response, "selected reject") {
		t.Fatalf("deny: %+v", res)
	}
}

// An agent that dies while restoring says nothing about its session: the
// turn fails (transient) and the session is not replaced, so the next turn
// restores it natively.
func TestACPDeadTransportOnRestoreKeepsTheSession(t *testing.T) {
	bin := fakeACPAgent(t)
	h, state := acpHarness(t, nil, nil)
	h.cfg.MaxRetries = 0
	id := h.createOn("coder", "fake")
	h.send(id, "first")
	h.cfg.Providers["fake"] = acpEntry(bin, state, map[string]string{"FAKEACP_LOAD_CRASH": "1"}, nil)
	h.restart()
	res, err := h.c.Send(context.Background(), id, "second", "", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Err == nil || !strings.Contains(res.Err.Error(), "exited") {
		t.Fatalf("a crash during the restore must fail the turn: %+v", res)
	}
	if n := h.count(id, schema.SessionCreated); n != 1 {
		t.Fatalf("%d session.created: the session was replaced", n)
	}
	h.cfg.Providers["fake"] = acpEntry(bin, state, nil, nil)
	h.restart()
	if res := h.send(id, "third"); res.Response != "turn 2: third" {
		t.Fatalf("the agent's own session must come back: %+v", res)
	}
}

func TestACPBuiltinNotInstalledSaysHowToInstall(t *testing.T) {
	h := newHarness(t, func(h *harness) {
		h.cfg.Providers = map[string]config.ProviderConfig{}
	})
	t.Setenv("PATH", t.TempDir())
	_, err := h.c.CreateAgent(context.Background(), CreateSpec{Name: "lead", Provider: "claude"})
	if err == nil || !strings.Contains(err.Error(), "warren agents install claude") {
		t.Fatalf("create on a built-in whose agent is not installed: %v", err)
	}
}

func TestACPAgentCancel(t *testing.T) {
	h, _ := acpHarness(t, nil, nil)
	id := h.createOn("coder", "fake")
	started := make(chan struct{})
	var once sync.Once
	done := make(chan TurnResult, 1)
	go func() {
		res, _ := h.c.Send(context.Background(), id, "@say working\n@hang", "", "", func(string) { once.Do(func() { close(started) }) })
		done <- res
	}()
	<-started
	if err := h.c.Cancel(context.Background(), id); err != nil {
		t.Fatal(err)
	}
	if res := <-done; res.Err == nil || !strings.Contains(res.Err.Error(), "cancelled") {
		t.Fatalf("cancelled turn: %+v", res)
	}
	if n := h.count(id, schema.TurnCancelled); n != 1 {
		t.Fatalf("%d turn.cancelled", n)
	}
	if res := h.send(id, "next"); res.Response != "turn 1: next" {
		t.Fatalf("after the cancel: %+v", res)
	}
}
