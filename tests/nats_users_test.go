package tests

import (
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/nats-io/nats.go"
)

// TestEmbeddedServerLetsInOnlyKeys: a daemon's embedded NATS server
// refuses a client without a key (before this, any local user could
// connect to 127.0.0.1:4222 and read or write every log), while the
// daemon itself, its worker and `warren export --cluster` from the home
// (which signs in with the home's key) work.
func TestEmbeddedServerLetsInOnlyKeys(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test starts a daemon, a warren worker process and the CLI; run without -short")
	}
	f := startWorkerFleet(t, 1, 2, "")
	if nc, err := nats.Connect(f.url); err == nil {
		nc.Close()
		t.Fatal("a NATS client without a key was let in to the daemon's embedded server")
	} else if !errors.Is(err, nats.ErrAuthorization) {
		t.Fatalf("a client without a key: %v; want an authorization error", err)
	}
	bot := f.d.createAgent("bot", "scripted", f.script, "")
	if res := f.d.callN("agent.send", map[string]any{"agent_id": bot, "message": "keyed"}); !strings.Contains(str(res["response"]), "keyed") {
		t.Fatalf("send through the worker: %v", res)
	}
	out, err := exec.Command(procBinary, "--home", f.d.Home, "export", bot, "--cluster", f.url).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "keyed") {
		t.Fatalf("warren export --cluster from the daemon's home: %v\n%s", err, out)
	}
	other := t.TempDir()
	out, err = exec.Command(procBinary, "--home", other, "export", bot, "--cluster", f.url).CombinedOutput()
	if err == nil || !strings.Contains(string(out), "workers.json") {
		t.Fatalf("warren export --cluster from a home without the key: %v; want a refusal that names workers.json\n%s", err, out)
	}
	out, err = exec.Command(procBinary, "--home", other, "export", bot, "--cluster", f.url, "--keys", filepath.Join(f.d.Home, "workers.json")).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "keyed") {
		t.Fatalf("warren export --cluster --keys with the daemon's workers.json: %v\n%s", err, out)
	}
}
