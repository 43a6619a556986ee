package faultfs

import (
	"errors"
	"os"
	"testing"
)

// memWrite creates name in a Mem with data, neither synced nor with its
// directory synced.
func memWrite(t *testing.T, m *Mem, name, data string) {
	t.Helper()
	f, err := m.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write([]byte(data)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestMemSyncFSMakesEverythingDurable: files and directories created and
// written without any fsync survive a power loss after one FileSystem.Sync; what
// came after it does not.
func TestMemSyncFSMakesEverythingDurable(t *testing.T) {
	m := NewMem()
	if err := m.MkdirAll("home/agents/a1", 0o755); err != nil {
		t.Fatal(err)
	}
	memWrite(t, m, "home/agents/a1/events.jsonl", "one\n")
	memWrite(t, m, "home/user.jsonl", "two\n")
	h, err := m.OpenFS("home/agents/a1")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Sync(); err != nil {
		t.Fatal(err)
	}
	memWrite(t, m, "home/later", "three\n")
	if ops := m.Ops(); ops[len(ops)-3].Kind != OpSyncFS {
		t.Fatalf("trace %v: want a syncfs op", ops)
	}
	m.Crash()
	m.Reboot(RebootOptions{Mode: PowerLoss})
	for name, want := range map[string]string{"home/agents/a1/events.jsonl": "one\n", "home/user.jsonl": "two\n"} {
		got, err := ReadFile(m, name)
		if err != nil || string(got) != want {
			t.Fatalf("%s after power loss: %q, %v; want %q", name, got, err, want)
		}
	}
	if _, err := m.Stat("home/later"); err == nil {
		t.Fatal("a file created after the SyncFS survived the power loss")
	}
}

// TestMemSyncFSFailure: a failing FileSystem.Sync follows fsyncgate for
// every file (unsynced data dropped), makes nothing durable, and the file
// whose data it dropped reports the loss to its own next Sync, once.
func TestMemSyncFSFailure(t *testing.T) {
	m := NewMem()
	if err := m.MkdirAll("home", 0o755); err != nil {
		t.Fatal(err)
	}
	memWrite(t, m, "home/a", "old")
	f, err := m.OpenFile("home/a", os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	if err := m.SyncDir("home"); err != nil {
		t.Fatal(err)
	}
	h, err := m.OpenFS("home")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("new"), 0); err != nil {
		t.Fatal(err)
	}
	m.Inject(Rule{Kind: OpSyncFS})
	if err := h.Sync(); !errors.Is(err, ErrInjected) {
		t.Fatalf("Sync: %v; want the injected failure", err)
	}
	if got, _ := ReadFile(m, "home/a"); string(got) != "old" {
		t.Fatalf("after the failed Sync reads see %q; want the dropped write gone (%q)", got, "old")
	}
	if err := f.Sync(); err == nil {
		t.Fatal("the file whose write was dropped fsynced without an error")
	}
	if err := f.Sync(); err != nil {
		t.Fatalf("the loss was reported twice: %v", err)
	}
	if err := h.Sync(); err != nil {
		t.Fatalf("the handle that reported the failure reports it again: %v", err)
	}
	if _, err := m.OpenFS("missing"); err == nil {
		t.Fatal("OpenFS of a missing path succeeded")
	}
}

// TestMemFileSystemReportsEarlierFailures: a failed File.Sync is reported
// to the next FileSystem.Sync of a handle opened before it, once, as
// Linux's errseq reports writeback failures to syncfs.
func TestMemFileSystemReportsEarlierFailures(t *testing.T) {
	m := NewMem()
	if err := m.MkdirAll("home", 0o755); err != nil {
		t.Fatal(err)
	}
	h, err := m.OpenFS("home")
	if err != nil {
		t.Fatal(err)
	}
	memWrite(t, m, "home/a", "x")
	f, err := m.OpenFile("home/a", os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	m.Inject(Rule{Kind: OpSync})
	if err := f.Sync(); err == nil {
		t.Fatal("the injected fsync failure was not reported")
	}
	if err := h.Sync(); err == nil {
		t.Fatal("the filesystem's flush did not report the earlier writeback failure")
	}
	if err := h.Sync(); err != nil {
		t.Fatalf("reported twice: %v", err)
	}
}
