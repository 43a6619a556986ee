package atomicfile

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"math/rand/v2"
	"testing"

	"github.com/warren-dev/warren/faultfs"
)

var (
	oldContent = []byte(`{"version":1,"old":true}`)
	newContent = []byte(`{"version":2,"new":"a longer replacement body"}`)
)

// crashCase is one reboot configuration.
type crashCase struct {
	name string
	opts func(seed uint64) faultfs.RebootOptions
}

func crashCases() []crashCase {
	var out []crashCase
	for _, mode := range []faultfs.RebootMode{faultfs.PowerLoss, faultfs.ProcessCrash} {
		for _, tail := range []faultfs.TailMode{faultfs.TailNone, faultfs.TailPrefix, faultfs.TailZero, faultfs.TailGarbage} {
			for _, entries := range []float64{0, 0.5, 1} {
				if mode == faultfs.ProcessCrash && entries > 0 {
					continue // a process crash keeps every entry anyway
				}
				out = append(out, crashCase{
					name: fmt.Sprintf("mode%d/tail%d/entries%.1f", mode, tail, entries),
					opts: func(seed uint64) faultfs.RebootOptions {
						return faultfs.RebootOptions{Mode: mode, Tail: tail, UnsyncedEntries: entries,
							Rand: rand.New(rand.NewPCG(seed, 99))}
					},
				})
			}
		}
	}
	return out
}

// TestCrashAtEveryOp crashes Write at every mutating op index k, in both
// reboot modes and every tail mode, with and without an old file: afterwards
// the target holds exactly the old or exactly the new content (or is absent
// when there was no old file), temps are never read, and CleanTemps leaves
// the directory holding only the target.
func TestCrashAtEveryOp(t *testing.T) {
	const seeds = 8
	for _, withOld := range []bool{true, false} {
		for _, cc := range crashCases() {
			t.Run(fmt.Sprintf("old=%v/%s", withOld, cc.name), func(t *testing.T) {
				sawOld, sawNew := false, false
				for k := 1; ; k++ {
					finished := false
					for seed := uint64(0); seed < seeds; seed++ {
						m := durableDir(t)
						if withOld {
							must(t, Write(m, "/d/s.json", oldContent, 0o600))
						}
						m.CrashAt(k)
						err := Write(m, "/d/s.json", newContent, 0o600)
						if err == nil {
							finished = true
							m.CrashAt(0)
						} else if !errors.Is(err, faultfs.ErrCrashed) {
							t.Fatalf("k=%d: Write error %v, want ErrCrashed", k, err)
						}
						m.Reboot(cc.opts(seed))
						got, rerr := faultfs.ReadFile(m, "/d/s.json")
						switch {
						case errors.Is(rerr, fs.ErrNotExist) && !withOld && err != nil:
						case rerr != nil:
							t.Fatalf("k=%d seed=%d: read: %v", k, seed, rerr)
						case bytes.Equal(got, newContent):
							sawNew = true
						case bytes.Equal(got, oldContent) && withOld && err != nil:
							sawOld = true
						default:
							t.Fatalf("k=%d seed=%d (write err %v): target holds %q, want old or new content", k, seed, err, got)
						}
						if err == nil && !bytes.Equal(got, newContent) {
							t.Fatalf("k=%d: acknowledged Write lost after crash: %q", k, got)
						}
						must(t, CleanTemps(m, "/d"))
						m.Reboot(faultfs.RebootOptions{Mode: faultfs.PowerLoss})
						names := dirNames(t, m, "/d")
						if len(names) > 1 || (len(names) == 1 && names[0] != "s.json") {
							t.Fatalf("k=%d seed=%d: after CleanTemps and power loss the directory holds %v", k, seed, names)
						}
					}
					if finished {
						if k != 6 {
							t.Fatalf("Write finished before k=%d, want 5 mutating ops", k)
						}
						break
					}
				}
				if withOld && !sawOld {
					t.Error("no crash point kept the old content")
				}
				if !sawNew {
					t.Error("no crash point produced the new content")
				}
			})
		}
	}
}

// TestCrashLeavesStaleTempThatReadersIgnore crashes between fsync and rename:
// a complete temp stays beside the untouched target until CleanTemps.
func TestCrashLeavesStaleTempThatReadersIgnore(t *testing.T) {
	m := durableDir(t)
	must(t, Write(m, "/d/s.json", oldContent, 0o600))
	m.CrashAt(4) // create, write, sync, rename <- crash
	if err := Write(m, "/d/s.json", newContent, 0o600); !errors.Is(err, faultfs.ErrCrashed) {
		t.Fatalf("Write: %v", err)
	}
	m.Reboot(faultfs.RebootOptions{Mode: faultfs.ProcessCrash})
	names := dirNames(t, m, "/d")
	if len(names) != 2 || !IsTemp(names[1]) {
		t.Fatalf("directory holds %v, want s.json and a stale temp", names)
	}
	wantContent(t, m, "/d/s.json", oldContent)
	// A new Write is not disturbed by the stale temp.
	must(t, Write(m, "/d/s.json", []byte("third"), 0o600))
	wantContent(t, m, "/d/s.json", []byte("third"))
	must(t, CleanTemps(m, "/d"))
	if names := dirNames(t, m, "/d"); len(names) != 1 {
		t.Fatalf("CleanTemps left %v", names)
	}
}
