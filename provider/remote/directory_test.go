package remote

import (
	"crypto/ed25519"
	"crypto/rand"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
)

// bareDirectory is a Directory without NATS: beats are fed to put.
func bareDirectory(t *testing.T) (*Directory, ed25519.PrivateKey) {
	t.Helper()
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	d := &Directory{keys: func() (Keys, error) { return Keys{Workers: map[string]ed25519.PublicKey{"w1": pub}}, nil },
		refused: map[string]string{}, log: hclog.NewNullLogger(), now: time.Now, workers: map[string]*workerState{},
		marks: map[string]*mark{}, last: map[string]string{}, changed: make(chan struct{})}
	return d, priv
}

func beat(t *testing.T, d *Directory, key ed25519.PrivateKey, boot string, started int64, n uint64, leaving bool) {
	t.Helper()
	body, err := Sign(key, Registration{Worker: "w1", Boot: boot, Started: started, Beat: n, Leaving: leaving,
		Pools: map[string]PoolState{"scripted": {Size: 2}}})
	if err != nil {
		t.Fatal(err)
	}
	d.put("", body)
}

func listedBoot(d *Directory) string {
	ws := d.Workers()
	if len(ws) == 0 {
		return ""
	}
	return ws[0].Boot
}

// TestBootsInOrder: an earlier boot's late beat (the bucket's stale
// value) never replaces the boot in force; a worker lost to a probe comes
// back with its next beat; one that left does not.
func TestBootsInOrder(t *testing.T) {
	d, key := bareDirectory(t)
	beat(t, d, key, "B", 2, 1, false)
	beat(t, d, key, "A", 1, 50, false) // the previous boot's value in the bucket
	if b := listedBoot(d); b != "B" {
		t.Fatalf("listed %q after a stale beat of an earlier boot, want B", b)
	}
	sl, ok := d.place("scripted", "a1", nil, nil)
	if !ok {
		t.Fatal("no slot on B")
	}
	d.lose(sl, "no responders")
	if b := listedBoot(d); b != "" {
		t.Fatalf("listed %q after a probe lost it", b)
	}
	beat(t, d, key, "B", 2, 2, false) // it only reconnected
	if b := listedBoot(d); b != "B" {
		t.Fatalf("listed %q after B beat again, want B back", b)
	}
	d.release(sl) // the old slot gives nothing back to the new state
	sl2, ok := d.place("scripted", "a2", nil, nil)
	if !ok {
		t.Fatal("no slot on B after it came back")
	}
	if ws := d.Workers(); ws[0].Placed["scripted"] != 1 {
		t.Fatalf("placed %v after an old slot's release and one new placement, want 1", ws[0].Placed)
	}
	d.release(sl2)
	beat(t, d, key, "B", 2, 2, false) // a repeat of a seen beat
	beat(t, d, key, "B", 2, 3, true)  // it stops
	if b := listedBoot(d); b != "" {
		t.Fatalf("listed %q after B left", b)
	}
	beat(t, d, key, "B", 2, 4, false)
	if b := listedBoot(d); b != "" {
		t.Fatalf("a boot that left came back (%q)", b)
	}
	beat(t, d, key, "C", 3, 1, false)
	if b := listedBoot(d); b != "C" {
		t.Fatalf("listed %q, want the new boot C", b)
	}
}
