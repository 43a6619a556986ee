package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestWorkerFlags: `warren worker` says what is missing or wrong before
// it connects anywhere, and `warren worker token` records a key and
// prints a token the worker takes.
func TestWorkerFlags(t *testing.T) {
	home := shortHome(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"worker", "--pools", "scripted=2"}, "--join is required"},
		{[]string{"worker", "--join", "nats://127.0.0.1:1", "--pools", "scripted"}, "key=value"},
		{[]string{"worker", "--join", "nats://127.0.0.1:1", "--pools", "scripted=0"}, "from 1 to 4096"},
		{[]string{"worker", "--join", "nats://127.0.0.1:1", "--pools", "scripted=2", "--id", "a.b"}, "--id"},
		{[]string{"worker", "--join", "nats://127.0.0.1:1", "--pools", "scripted=2", "--id", "w1"}, "warren worker token w1"},
		{[]string{"worker", "token", "bad id"}, "letters, digits"},
	} {
		r := warren(t, append([]string{"--home", home}, c.args...)...)
		if r.code != 2 || !strings.Contains(r.stderr, c.want) {
			t.Errorf("warren %v: exit %d, stderr %q; want exit 2 saying %q", c.args, r.code, r.stderr, c.want)
		}
	}
	token := strings.TrimSpace(mustOK(t, "--home", home, "worker", "token", "w1"))
	if !strings.HasPrefix(token, "wwt1_") {
		t.Fatalf("token %q", token)
	}
	keys, err := os.ReadFile(filepath.Join(home, "workers.json"))
	if err != nil || !strings.Contains(string(keys), `"w1"`) || strings.Contains(string(keys), strings.TrimPrefix(token, "wwt1_")) {
		t.Fatalf("workers.json %q (%v): want w1's public key and never the token", keys, err)
	}
	fi, err := os.Stat(filepath.Join(home, "workers.json"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("workers.json mode %v (%v), want 0600", fi.Mode(), err)
	}
	bad := filepath.Join(home, "bad.token")
	if err := os.WriteFile(bad, []byte("not a token"), 0o600); err != nil {
		t.Fatal(err)
	}
	r := warren(t, "--home", home, "worker", "--join", "nats://127.0.0.1:1", "--pools", "scripted=2", "--id", "w1", "--token-file", bad)
	if r.code != 2 || !strings.Contains(r.stderr, "not a worker token") {
		t.Fatalf("a bad token file: exit %d, %q", r.code, r.stderr)
	}
}
