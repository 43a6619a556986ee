package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/warren-dev/warren/eventlog/record"
	"github.com/warren-dev/warren/store/jetstream/natsembed"
)

// TestExportLocalIsTheFile: warren export writes an agent's log byte for
// byte as the home's events.jsonl, to stdout or (atomically) to --out.
func TestExportLocalIsTheFile(t *testing.T) {
	t.Parallel()
	home := shortHome(t)
	startDaemon(t, home)
	mustOK(t, "agent", "create", "lead", "--provider", "inproc", "--model", "echo", "--home", home)
	mustOK(t, "agent", "send", "lead", "hello", "--home", home)
	mustOK(t, "agent", "send", "lead", "again with \"quotes\" and é", "--home", home)
	mustOK(t, "daemon", "stop", "--home", home)
	logs, _ := filepath.Glob(filepath.Join(home, "agents", "*", "events.jsonl"))
	if len(logs) != 1 {
		t.Fatalf("want one agent log, found %v", logs)
	}
	want, err := os.ReadFile(logs[0])
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "lead.jsonl")
	mustOK(t, "export", "lead", "--out", out, "--home", home)
	got, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("export --out differs from the log:\n%s\nwant:\n%s", got, want)
	}
	if s := mustOK(t, "export", "lead", "--home", home); s != string(want) {
		t.Fatalf("export to stdout differs from the log")
	}
}

// TestDaemonOnClusterAndExport: warren daemon start --cluster runs the
// agents on a NATS JetStream server (none of their logs in the home), and
// warren export --cluster reads an agent's log back as valid SPEC 3 lines.
// A server whose fsync setting cannot be confirmed is refused unless
// --unsafe-lazy-fsync is given.
func TestDaemonOnClusterAndExport(t *testing.T) {
	t.Parallel()
	srv, err := natsembed.Start(natsembed.Options{Name: "t", Dir: t.TempDir(), Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	url := srv.ClientURL()
	home := shortHome(t)
	r := warren(t, "daemon", "start", "--foreground", "--cluster", url, "--home", home)
	if r.code == 0 || !strings.Contains(r.stderr, "fsync") {
		t.Fatalf("a server whose sync-always cannot be read was not refused: exit %d %s", r.code, r.stderr)
	}
	out := mustOK(t, "daemon", "start", "--cluster", url, "--unsafe-lazy-fsync", "--home", home)
	if !strings.HasPrefix(out, "daemon started") {
		t.Fatalf("daemon start --cluster printed %q", out)
	}
	t.Cleanup(func() { _ = warren(t, "daemon", "stop", "--home", home) })
	created := mustJSON(t, "agent", "create", "lead", "--provider", "inproc", "--model", "echo", "--home", home)
	id, _ := created["agent_id"].(string)
	if got := mustOK(t, "agent", "send", "lead", "hello", "--home", home); got != "echo: hello\n" {
		t.Fatalf("send on the cluster store: %q", got)
	}
	mustOK(t, "daemon", "stop", "--home", home)
	if logs, _ := filepath.Glob(filepath.Join(home, "agents", "*", "events.jsonl")); len(logs) != 0 {
		t.Fatalf("a daemon on a cluster wrote logs in the home: %v", logs)
	}
	// export only reads: no --unsafe-lazy-fsync needed as a plain user
	exp := mustOK(t, "export", id, "--cluster", url, "--home", home)
	var events []string
	for i, line := range strings.SplitAfter(exp, "\n") {
		if line == "" {
			continue
		}
		e, err := record.DecodeLine([]byte(line))
		if err != nil || e.Seq != uint64(i+1) {
			t.Fatalf("line %d of the export: seq %d, %v", i+1, e.Seq, err)
		}
		events = append(events, e.Event)
	}
	if len(events) < 4 || events[0] != "agent.created" || !strings.Contains(strings.Join(events, " "), "turn.complete") {
		t.Fatalf("exported events: %v", events)
	}
}

// TestMigrateRoundTrip: warren migrate copies a stopped home's logs into a
// cluster, and warren export from the cluster gives each events.jsonl back
// byte for byte; a second migrate is refused (the logs are there).
func TestMigrateRoundTrip(t *testing.T) {
	t.Parallel()
	srv, err := natsembed.Start(natsembed.Options{Name: "m", Dir: t.TempDir(), Port: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	url := srv.ClientURL()
	home := shortHome(t)
	startDaemon(t, home)
	mustOK(t, "agent", "create", "lead", "--provider", "inproc", "--model", "echo", "--home", home)
	mustOK(t, "agent", "send", "lead", "hello", "--home", home)
	mustOK(t, "agent", "create", "kid", "--parent", "lead", "--provider", "inproc", "--model", "echo", "--home", home)
	mustOK(t, "agent", "send", "kid", "hi", "--home", home)
	if r := warren(t, "migrate", "--to", url, "--unsafe-lazy-fsync", "--home", home); r.code == 0 {
		t.Fatalf("migrate ran while the daemon runs: %s", r.stdout)
	}
	mustOK(t, "daemon", "stop", "--home", home)
	out := mustOK(t, "migrate", "--to", url, "--unsafe-lazy-fsync", "--home", home)
	if !strings.Contains(out, "verified") {
		t.Fatalf("migrate printed %q", out)
	}
	logs, _ := filepath.Glob(filepath.Join(home, "agents", "*", "events.jsonl"))
	if len(logs) != 2 {
		t.Fatalf("want two agent logs, found %v", logs)
	}
	for _, p := range logs {
		want, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		id := filepath.Base(filepath.Dir(p))
		if got := mustOK(t, "export", id, "--cluster", url, "--unsafe-lazy-fsync", "--home", home); got != string(want) {
			t.Fatalf("the cluster's log of %s differs from the home's:\n%s\nwant:\n%s", id, got, want)
		}
	}
	if r := warren(t, "migrate", "--to", url, "--unsafe-lazy-fsync", "--home", home); r.code == 0 || !strings.Contains(r.stderr, "already holds") {
		t.Fatalf("a second migrate was not refused: exit %d %s", r.code, r.stderr)
	}
}
