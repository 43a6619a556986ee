package agentload

import (
	"errors"
	"os"
	"slices"
	"testing"

	"github.com/warren-dev/warren/faultfs"
)

// IDs lists the directories named by a normalized agent id, then the
// store's agents it has not listed; anything else in the directory is
// left out.
func TestIDsListsDirectoriesThenTheStores(t *testing.T) {
	const a, b, c = "000000000000000000000000000000a1", "000000000000000000000000000000b1", "000000000000000000000000000000c1"
	m := faultfs.NewMem()
	for _, d := range []string{a, b, "000000000000000000000000000000A2", "notes"} {
		if err := m.MkdirAll("/home/agents/"+d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	f, err := m.OpenFile("/home/agents/000000000000000000000000000000d1", os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Close()
	ids, err := IDs(m, "/home/agents", nil)
	if err != nil || !slices.Equal(ids, []string{a, b}) {
		t.Fatalf("IDs on the local store = %v, %v; want %v", ids, err, []string{a, b})
	}
	ids, err = IDs(m, "/home/agents", func() ([]string, error) { return []string{b, c}, nil })
	if err != nil || !slices.Equal(ids, []string{a, b, c}) {
		t.Fatalf("IDs with the store's = %v, %v; want %v", ids, err, []string{a, b, c})
	}
	bad := errors.New("no quorum")
	if _, err := IDs(m, "/home/agents", func() ([]string, error) { return nil, bad }); !errors.Is(err, bad) {
		t.Fatalf("IDs when the store fails = %v, want its error", err)
	}
	if _, err := IDs(m, "/home/none", nil); err == nil {
		t.Fatal("IDs of a missing directory succeeded")
	}
}

// RemoveOrphanDir removes the directory and its files, durably (a power
// loss after it keeps the removal), and leaves the other agents alone.
func TestRemoveOrphanDir(t *testing.T) {
	const a, b = "000000000000000000000000000000a1", "000000000000000000000000000000b1"
	m := faultfs.NewMem()
	for _, d := range []string{a, b} {
		if err := m.MkdirAll("/home/agents/"+d, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := faultfs.WriteFile(m, "/home/agents/"+d+"/events.jsonl", []byte("{}\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	for _, d := range []string{"/", "/home", "/home/agents", "/home/agents/" + a} {
		if err := m.SyncDir(d); err != nil {
			t.Fatal(err)
		}
	}
	RemoveOrphanDir(m, "/home/agents", a)
	RemoveOrphanDir(m, "/home/agents", "000000000000000000000000000000c1") // none: nothing happens
	m.Crash()
	m.Reboot(faultfs.RebootOptions{Mode: faultfs.PowerLoss})
	ids, err := IDs(m, "/home/agents", nil)
	if err != nil || !slices.Equal(ids, []string{b}) {
		t.Fatalf("after RemoveOrphanDir and a power loss: IDs = %v, %v; want %v", ids, err, []string{b})
	}
}
