package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRepairRefusesClusterLogs: `warren repair` on a home whose daemon
// keeps its logs in NATS JetStream (an embedded server's <home>/nats, or
// --cluster) says why it cannot repair and what to do, and touches no
// file.
func TestRepairRefusesClusterLogs(t *testing.T) {
	home := t.TempDir()
	if err := os.MkdirAll(filepath.Join(home, "nats"), 0o700); err != nil {
		t.Fatal(err)
	}
	id := strings.Repeat("ab", 16)
	r := warren(t, "repair", id, "--home", home)
	if r.code == 0 || !strings.Contains(r.stderr, "--cluster-embedded") || !strings.Contains(r.stderr, "warren export") {
		t.Errorf("repair on a cluster-embedded home: exit %d stderr %q; want a refusal naming the cluster and warren export", r.code, r.stderr)
	}
	r = warren(t, "repair", id, "--home", t.TempDir(), "--cluster", "nats://127.0.0.1:4222")
	if r.code == 0 || !strings.Contains(r.stderr, "NATS JetStream") {
		t.Errorf("repair --cluster: exit %d stderr %q; want a refusal", r.code, r.stderr)
	}
	if entries, _ := os.ReadDir(filepath.Join(home, "agents")); len(entries) != 0 {
		t.Errorf("repair created %d entries under agents/", len(entries))
	}
}
