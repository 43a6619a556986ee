package daemon

import (
	"context"
	"github.com/warren-dev/warren/homedir"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/protocol"
)

// poolSlots reads a pool's slots from daemon.status.
func poolSlots(t *testing.T, cl *protocol.Client, pool string) int {
	t.Helper()
	st, err := cl.Call(context.Background(), "daemon.status", nil)
	if err != nil {
		t.Fatal(err)
	}
	p, _ := st["pools"].(map[string]any)[pool].(map[string]any)
	n, _ := protocol.Params(p).Int("slots")
	return n
}

// waitLog waits for a log line (from a logSignal) containing want.
func waitLog(t *testing.T, sig *logSignal, want string) {
	t.Helper()
	timeout := time.After(20 * time.Second)
	for {
		select {
		case line := <-sig.ch:
			if strings.Contains(line, want) {
				return
			}
		case <-timeout:
			t.Fatalf("the daemon did not log %q with %q", sig.marker, want)
		}
	}
}

// TestMaxSlotsFlagWinsOverTheConfigFile: daemon start --max-slots N sets the
// default pool, and neither the config watcher's first apply nor a later
// edit of config.json resets it (flags win over the file, SPEC 10); the
// file's other settings still apply.
func TestMaxSlotsFlagWinsOverTheConfigFile(t *testing.T) {
	home := shortHome(t)
	if err := homedir.Prepare(home); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(home, "config.json"), []byte(`{"pools":{"default":6}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	reloaded := &logSignal{marker: "config.json reloaded", ch: make(chan string, 16)}
	logger := hclog.New(&hclog.LoggerOptions{Output: reloaded, Level: hclog.Info})
	cl, _ := runDaemonOpts(t, Options{Home: home, Logger: logger, MaxSlots: 2})
	waitLog(t, reloaded, "default:2") // the watcher's first apply
	if n := poolSlots(t, cl, "default"); n != 2 {
		t.Fatalf("default pool after the first apply = %d slots, want 2 (--max-slots)", n)
	}
	tmp := filepath.Join(home, "config.json.tmp")
	if err := os.WriteFile(tmp, []byte(`{"pools":{"default":9,"scripted":5}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, filepath.Join(home, "config.json")); err != nil {
		t.Fatal(err)
	}
	waitLog(t, reloaded, "scripted:5")
	if d, s := poolSlots(t, cl, "default"), poolSlots(t, cl, "scripted"); d != 2 || s != 5 {
		t.Fatalf("after an edit: default %d scripted %d; want 2 (--max-slots) and 5 (the file)", d, s)
	}
}

// TestInvalidConfigShownByStatusUntilFixed: an invalid config.json at start
// leaves the defaults in force and daemon.status reports the error until
// the file is fixed; a bad edit while running keeps the previous config and
// is reported too, until the file is valid again (even when it goes back to
// the config in force).
func TestInvalidConfigShownByStatusUntilFixed(t *testing.T) {
	home := shortHome(t)
	if err := homedir.Prepare(home); err != nil {
		t.Fatal(err)
	}
	cfgPath := filepath.Join(home, "config.json")
	write := func(s string) {
		t.Helper()
		tmp := cfgPath + ".tmp"
		if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, cfgPath); err != nil {
			t.Fatal(err)
		}
	}
	write(`{"pools":{"default":"lots"}}`)
	sig := &logSignal{marker: "config.json", ch: make(chan string, 64)}
	logger := hclog.New(&hclog.LoggerOptions{Output: sig, Level: hclog.Debug})
	cl, _ := runDaemonOpts(t, Options{Home: home, Logger: logger})
	cfgErr := func() string {
		st, err := cl.Call(context.Background(), "daemon.status", nil)
		if err != nil {
			t.Fatal(err)
		}
		s, _ := st["config_error"].(string)
		return s
	}
	if e := cfgErr(); !strings.Contains(e, "pools") {
		t.Fatalf("config_error at start = %q, want the file's error", e)
	}
	if n := poolSlots(t, cl, "default"); n != 4 {
		t.Fatalf("default pool with an invalid file = %d, want the default 4", n)
	}
	write(`{"pools":{"default":3}}`)
	waitLog(t, sig, "reloaded")
	if e := cfgErr(); e != "" || poolSlots(t, cl, "default") != 3 {
		t.Fatalf("after the fix: config_error %q, default pool %d; want none and 3", e, poolSlots(t, cl, "default"))
	}
	write(`{"pools":`)
	waitLog(t, sig, "is invalid")
	if e := cfgErr(); e == "" || poolSlots(t, cl, "default") != 3 {
		t.Fatalf("after a bad edit: config_error %q, default pool %d; want the error and the previous 3", e, poolSlots(t, cl, "default"))
	}
	write(`{"pools":{"default":3}}`) // back to the config in force
	waitLog(t, sig, "read and valid")
	if e := cfgErr(); e != "" {
		t.Fatalf("after the file is valid again: config_error %q, want none", e)
	}
}
