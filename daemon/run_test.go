package daemon

import (
	"bytes"
	"context"
	"errors"
	"github.com/warren-dev/warren/homedir"
	"github.com/warren-dev/warren/registry"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/protocol"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/inproc"
)

// runDaemon runs a daemon in-process on a real home and returns a client.
func runDaemon(t *testing.T, home string, provs map[string]provider.Provider, logger ...hclog.Logger) (*protocol.Client, func() error) {
	t.Helper()
	lg := hclog.NewNullLogger()
	if len(logger) > 0 {
		lg = logger[0]
	}
	return runDaemonOpts(t, Options{Home: home, Logger: lg, Providers: fixedProviders(provs)})
}

// fixedProviders is a registry serving provs.
func fixedProviders(provs map[string]provider.Provider) func(registry.Env) (map[string]provider.Provider, error) {
	return func(registry.Env) (map[string]provider.Provider, error) { return provs, nil }
}

// runDaemonOpts is runDaemon with the given options (Ready is set here).
func runDaemonOpts(t *testing.T, opts Options) (*protocol.Client, func() error) {
	t.Helper()
	if opts.Providers == nil {
		opts.Providers = fixedProviders(map[string]provider.Provider{})
	}
	if opts.DefaultProvider == "" {
		opts.DefaultProvider = "inproc" // the binary's (builtins.DefaultProvider)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	opts.Ready = func(s string) { ready <- s }
	go func() {
		done <- Run(ctx, opts)
	}()
	var sock string
	select {
	case sock = <-ready:
	case err := <-done:
		cancel()
		t.Fatalf("daemon exited before serving: %v", err)
	case <-time.After(30 * time.Second):
		cancel()
		t.Fatal("daemon did not start")
	}
	cl, err := protocol.Dial(context.Background(), sock)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	stopped := false
	stop := func() error {
		if stopped {
			return nil
		}
		stopped = true
		cl.Close()
		cancel()
		return <-done
	}
	t.Cleanup(func() { _ = stop() })
	return cl, stop
}

func shortHome(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "wd")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func TestRunLockConfigReloadAndCleanShutdown(t *testing.T) {
	home := shortHome(t)
	ip := inproc.New("inproc", inproc.Options{})
	started := make(chan *inproc.Turn, 1)
	ip.Register("slow", inproc.Signal(started, inproc.Block(make(chan struct{}), inproc.Echo)))
	reloaded := &logSignal{marker: "config.json reloaded", ch: make(chan string, 16)}
	logger := hclog.New(&hclog.LoggerOptions{Output: reloaded, Level: hclog.Info})
	cl, stop := runDaemon(t, home, map[string]provider.Provider{"inproc": ip}, logger)
	ctx := context.Background()

	// A second daemon on the same home refuses to start; the first serves.
	err := Run(ctx, Options{Home: home, Logger: hclog.NewNullLogger()})
	if !errors.Is(err, ErrAlreadyRunning) {
		t.Fatalf("second daemon: %v", err)
	}
	if _, err := cl.Call(ctx, "daemon.status", nil); err != nil {
		t.Fatalf("the first daemon stopped serving: %v", err)
	}
	for name, want := range map[string]os.FileMode{home: 0o700, homedir.SocketPath(home): 0o600} {
		st, err := os.Stat(name)
		if err != nil || st.Mode().Perm() != want {
			t.Fatalf("%s mode = %v (err %v), want %v", name, st.Mode().Perm(), err, want)
		}
	}

	// A valid config.json is applied live; an invalid one is ignored.
	writeConfig := func(s string) {
		tmp := filepath.Join(home, "config.json.tmp")
		if err := os.WriteFile(tmp, []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(home, "config.json")); err != nil {
			t.Fatal(err)
		}
	}
	slots := func() int {
		st, err := cl.Call(ctx, "daemon.status", nil)
		if err != nil {
			t.Fatal(err)
		}
		pools := st["pools"].(map[string]any)
		n, _ := protocol.Params(pools["default"].(map[string]any)).Int("slots")
		return n
	}
	// waitReload waits for the daemon's report of a reload whose pools
	// line contains want.
	waitReload := func(want string) {
		timeout := time.After(20 * time.Second)
		for {
			select {
			case line := <-reloaded.ch:
				if strings.Contains(line, want) {
					return
				}
			case <-timeout:
				t.Fatalf("the daemon did not report a config reload with %s", want)
			}
		}
	}
	waitReload("default:4") // the watcher reports the file once it is in place
	writeConfig(`{"pools":{"default":7}}`)
	waitReload("default:7")
	if n := slots(); n != 7 {
		t.Fatalf("default slots after the reload = %d, want 7", n)
	}
	writeConfig(`{"pools":{"default":-1}}`)
	writeConfig(`{"pools":{"default":9},"max_retries":1}`)
	waitReload("default:9")
	if n := slots(); n != 9 {
		t.Fatalf("default slots = %d, want 9 (the invalid file in between is ignored)", n)
	}

	// Shutdown interrupts the running turn (logged), removes socket and pid.
	res, err := cl.Call(ctx, "agent.create", map[string]any{"name": "lead", "provider": "inproc", "model": "slow"})
	if err != nil {
		t.Fatal(err)
	}
	id := res["agent_id"].(string)
	go func() { _, _ = cl.Call(ctx, "agent.send", map[string]any{"agent_id": id, "message": "x"}) }()
	<-started
	if _, err := cl.Call(ctx, "daemon.shutdown", nil); err != nil {
		t.Fatal(err)
	}
	if err := stop(); err != nil {
		t.Fatalf("daemon stopped with %v", err)
	}
	for _, f := range []string{homedir.SocketPath(home), homedir.PidPath(home)} {
		if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("%s left behind after shutdown (%v)", f, err)
		}
	}
	data, err := os.ReadFile(filepath.Join(home, "agents", id, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if contains(data, `"event":"turn.cancelled"`) || !contains(data, `"reason":"shutdown"`) {
		t.Fatalf("the running turn was not interrupted (run.interrupted, shutdown, and never turn.cancelled):\n%s", data)
	}
	// The next start re-runs it (inproc's resume policy is auto) and says
	// so in daemon.status.
	cl2, _ := runDaemon(t, home, map[string]provider.Provider{"inproc": ip})
	<-started
	st, err := cl2.Call(ctx, "daemon.status", nil)
	runs, _ := st["interrupted"].([]any)
	if err != nil || len(runs) != 1 || runs[0].(map[string]any)["rerun"] != true || runs[0].(map[string]any)["reason"] != "shutdown" {
		t.Fatalf("daemon.status after the restart: %v %v", st, err)
	}
}

func TestSocketPathTooLongIsAClearError(t *testing.T) {
	home := filepath.Join(shortHome(t), string(make([]byte, 0)), "x"+string(bytesOf('a', 120)))
	err := Run(context.Background(), Options{Home: home, Logger: hclog.NewNullLogger()})
	if err == nil || !contains([]byte(err.Error()), "107") {
		t.Fatalf("err = %v, want a clear error naming the 107-byte limit", err)
	}
}

func bytesOf(b byte, n int) []byte { return bytes.Repeat([]byte{b}, n) }

func contains(b []byte, s string) bool { return bytes.Contains(b, []byte(s)) }

// logSignal is a log output that signals each line containing a marker.
type logSignal struct {
	marker string
	ch     chan string
}

func (l *logSignal) Write(p []byte) (int, error) {
	if bytes.Contains(p, []byte(l.marker)) {
		select {
		case l.ch <- string(p):
		default:
		}
	}
	return len(p), nil
}

// TestStatusCountsOpenLogs: daemon.status's open_logs counts the logs of
// the daemon's own store holding handles (it counted a cap the Core kept
// for a store it did not use, and read 0 whatever was open).
func TestStatusCountsOpenLogs(t *testing.T) {
	home := shortHome(t)
	cl, _ := runDaemon(t, home, map[string]provider.Provider{"inproc": inproc.New("inproc", inproc.Options{})}, hclog.NewNullLogger())
	ctx := context.Background()
	if _, err := cl.Call(ctx, "agent.create", map[string]any{"name": "lead", "provider": "inproc", "model": "echo"}); err != nil {
		t.Fatal(err)
	}
	st, err := cl.Call(ctx, "daemon.status", nil)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := protocol.Params(st).Int("open_logs"); n < 1 {
		t.Fatalf("open_logs = %v with an agent just created; want its log counted", st["open_logs"])
	}
}
