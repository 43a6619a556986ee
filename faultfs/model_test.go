package faultfs

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"slices"
	"testing"
)

// refModel is an independent reference for Mem's durability rules in one
// directory: entries map names to inode numbers, inodes have visible and
// synced contents, and SyncDir snapshots the entries.
type refModel struct {
	entries, durable map[string]int
	data, synced     map[int][]byte
	next             int
}

func newRefModel() *refModel {
	return &refModel{entries: map[string]int{}, durable: map[string]int{},
		data: map[int][]byte{}, synced: map[int][]byte{}}
}

// afterPowerLoss is what a PowerLoss reboot with TailNone must leave.
func (r *refModel) afterPowerLoss() map[string][]byte {
	out := map[string][]byte{}
	for name, ino := range r.durable {
		out[name] = r.synced[ino]
	}
	return out
}

// visible is what a ProcessCrash reboot must leave.
func (r *refModel) visible() map[string][]byte {
	out := map[string][]byte{}
	for name, ino := range r.entries {
		out[name] = r.data[ino]
	}
	return out
}

// memState reads every file in /d.
func memState(t *testing.T, m *Mem) map[string][]byte {
	t.Helper()
	ents, err := m.ReadDir("/d")
	must(t, err)
	out := map[string][]byte{}
	for _, e := range ents {
		b, err := ReadFile(m, "/d/"+e.Name())
		must(t, err)
		out[e.Name()] = b
	}
	return out
}

func sameState(a, b map[string][]byte) bool {
	return maps.EqualFunc(a, b, func(x, y []byte) bool { return bytes.Equal(x, y) })
}

// TestMemMatchesReferenceModel drives random creates, appends, syncs,
// renames, removes, truncates and directory syncs (through open handles that
// follow renames) on Mem and on the reference model, then reboots in both
// modes and compares.
func TestMemMatchesReferenceModel(t *testing.T) {
	seeds, steps := 300, 40
	if os.Getenv("WARREN_LONG") == "1" {
		seeds, steps = 5000, 120
	}
	names := []string{"a", "b", "c"}
	for seed := range seeds {
		rng := rand.New(rand.NewPCG(uint64(seed), 11))
		m := NewMem()
		must(t, m.MkdirAll("/d", 0o755))
		must(t, m.SyncDir("/"))
		ref := newRefModel()
		type handle struct {
			f   File
			ino int
		}
		var handles []handle
		var log []string
		for range steps {
			name := names[rng.IntN(len(names))]
			switch op := rng.IntN(8); {
			case op == 0: // create (or truncate) and keep a handle
				f, err := m.OpenFile("/d/"+name, os.O_RDWR|os.O_CREATE|os.O_TRUNC|os.O_APPEND, 0o644)
				must(t, err)
				ino, ok := ref.entries[name]
				if !ok {
					ref.next++
					ino = ref.next
					ref.entries[name] = ino
				}
				ref.data[ino] = nil
				handles = append(handles, handle{f, ino})
				log = append(log, "create "+name)
			case op == 1 && len(handles) > 0: // append through a handle
				h := handles[rng.IntN(len(handles))]
				b := []byte(fmt.Sprintf("<%d>", rng.IntN(100)))
				_, err := h.f.Write(b)
				must(t, err)
				ref.data[h.ino] = append(slices.Clone(ref.data[h.ino]), b...)
				log = append(log, fmt.Sprintf("write ino%d %s", h.ino, b))
			case op == 2 && len(handles) > 0: // fsync a handle
				h := handles[rng.IntN(len(handles))]
				must(t, h.f.Sync())
				ref.synced[h.ino] = slices.Clone(ref.data[h.ino])
				log = append(log, fmt.Sprintf("sync ino%d", h.ino))
			case op == 3: // rename
				to := names[rng.IntN(len(names))]
				err := m.Rename("/d/"+name, "/d/"+to)
				ino, ok := ref.entries[name]
				if ok != (err == nil) {
					t.Fatalf("seed %d: rename %s %s: %v, model has source=%v", seed, name, to, err, ok)
				}
				if ok {
					delete(ref.entries, name)
					ref.entries[to] = ino
				}
				log = append(log, "rename "+name+" "+to)
			case op == 4: // remove
				err := m.Remove("/d/" + name)
				if _, ok := ref.entries[name]; ok != (err == nil) {
					t.Fatalf("seed %d: remove %s: %v, model has it=%v", seed, name, err, ok)
				}
				delete(ref.entries, name)
				log = append(log, "remove "+name)
			case op == 5: // truncate by name
				size := rng.IntN(6)
				err := m.Truncate("/d/"+name, int64(size))
				ino, ok := ref.entries[name]
				if ok != (err == nil) {
					t.Fatalf("seed %d: truncate %s: %v, model has it=%v", seed, name, err, ok)
				}
				if ok {
					d := slices.Clone(ref.data[ino])
					for len(d) < size {
						d = append(d, 0)
					}
					ref.data[ino] = d[:size]
				}
				log = append(log, fmt.Sprintf("truncate %s %d", name, size))
			case op == 6: // directory fsync
				must(t, m.SyncDir("/d"))
				ref.durable = maps.Clone(ref.entries)
				log = append(log, "syncdir")
			}
			if got, want := memState(t, m), ref.visible(); !sameState(got, want) {
				t.Fatalf("seed %d: visible state %q, model %q\nops: %v", seed, got, want, log)
			}
		}
		// A process crash keeps the visible state; a power loss after it
		// keeps only what was synced.
		m.Reboot(RebootOptions{Mode: ProcessCrash})
		if got, want := memState(t, m), ref.visible(); !sameState(got, want) {
			t.Fatalf("seed %d: after process crash %q, model %q\nops: %v", seed, got, want, log)
		}
		if seed%2 == 0 {
			m.Reboot(RebootOptions{Mode: PowerLoss})
			if got, want := memState(t, m), ref.afterPowerLoss(); !sameState(got, want) {
				t.Fatalf("seed %d: after power loss %q, model %q\nops: %v", seed, got, want, log)
			}
			continue
		}
		// Some unsynced entry changes survive: each name then shows either
		// its durable entry or its visible one, always with synced data.
		m.Reboot(RebootOptions{Mode: PowerLoss, UnsyncedEntries: 0.5, Rand: rand.New(rand.NewPCG(uint64(seed), 1))})
		got := memState(t, m)
		for _, name := range names {
			b, present := got[name]
			ok := false
			for _, entries := range []map[string]int{ref.durable, ref.entries} {
				ino, has := entries[name]
				if has == present && (!has || bytes.Equal(b, ref.synced[ino])) {
					ok = true
				}
			}
			if !ok {
				t.Fatalf("seed %d: after power loss with unsynced entries %s = %q (present %v); durable %v visible %v synced %v\nops: %v",
					seed, name, b, present, ref.durable, ref.entries, ref.synced, log)
			}
		}
	}
}
