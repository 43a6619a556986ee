package quarantine

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warren-dev/warren/faultfs"
)

const id = "0123456789abcdef0123456789abcdef"

type seq uint64

func (s seq) LastSeq() uint64 { return uint64(s) }

// TestMoveSurvivesPowerLoss: a moved directory is in quarantine after a
// power loss, under a name that starts with its id, and Index finds it; a
// second move of the same name at the same instant gets another name.
func TestMoveSurvivesPowerLoss(t *testing.T) {
	m := faultfs.NewMem()
	dir := "/home/agents/" + id
	if err := m.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := faultfs.WriteFile(m, dir+"/x", []byte("?"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"/", "/home", "/home/agents", dir} {
		if err := m.SyncDir(d); err != nil {
			t.Fatal(err)
		}
	}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	dst, moved, err := Move(m, "/home", dir, now)
	if err != nil || !moved || !strings.HasPrefix(filepath.Base(dst), id+"-20260102T030405") {
		t.Fatalf("Move = %q, %v, %v", dst, moved, err)
	}
	m.Crash()
	m.Reboot(faultfs.RebootOptions{Mode: faultfs.PowerLoss})
	if ok, _ := faultfs.Exists(m, dst); !ok {
		t.Fatal("the quarantined directory is gone after a power loss")
	}
	if ok, _ := faultfs.Exists(m, dir); ok {
		t.Fatal("the directory is still in agents/")
	}
	q, err := Index(m, "/home")
	if err != nil || q[id] != dst {
		t.Fatalf("Index = %v, %v", q, err)
	}
	if err := m.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	dst2, _, err := Move(m, "/home", dir, now)
	if err != nil || dst2 == dst {
		t.Fatalf("second move to %q (first %q): %v", dst2, dst, err)
	}
}

// TestProvablyEmpty: only an empty log with nothing beside it is an orphan.
func TestProvablyEmpty(t *testing.T) {
	m := faultfs.NewMem()
	dir := "/home/agents/" + id
	if err := m.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := faultfs.WriteFile(m, dir+"/events.jsonl", nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if why, ok := ProvablyEmpty(m, dir, false, seq(0)); !ok {
		t.Fatalf("an empty log alone is not an orphan: %s", why)
	}
	if _, ok := ProvablyEmpty(m, dir, false, seq(3)); ok {
		t.Fatal("a log with entries is an orphan")
	}
	if err := faultfs.WriteFile(m, dir+"/session.json", []byte("{}"), 0o600); err != nil {
		t.Fatal(err)
	}
	if why, ok := ProvablyEmpty(m, dir, false, seq(0)); ok || !strings.Contains(why, "session.json") {
		t.Fatalf("a session.json beside the log: %q, %v", why, ok)
	}
}
