package atomicfile

import (
	"bytes"
	"fmt"
	"sync"
	"testing"

	"github.com/warren-dev/warren/faultfs"
)

// TestConcurrentWritesNeverInterleave runs writers of distinct contents at
// one path; every read sees exactly one writer's content and no temp stays.
func TestConcurrentWritesNeverInterleave(t *testing.T) {
	for _, fsName := range []string{"mem", "os"} {
		t.Run(fsName, func(t *testing.T) {
			var fsys faultfs.FS
			dir := "/d"
			if fsName == "mem" {
				fsys = durableDir(t)
			} else {
				fsys, dir = faultfs.OS{}, t.TempDir()
			}
			target := dir + "/s.json"
			const writers, rounds = 6, 20
			contents := make([][]byte, writers)
			for w := range writers {
				contents[w] = bytes.Repeat([]byte(fmt.Sprintf("writer-%d;", w)), 50+w*7)
			}
			must(t, Write(fsys, target, contents[0], 0o600))
			valid := func(b []byte) bool {
				for _, c := range contents {
					if bytes.Equal(b, c) {
						return true
					}
				}
				return false
			}
			var wg sync.WaitGroup
			errs := make(chan error, writers*rounds*2)
			for w := range writers {
				wg.Add(2)
				go func() {
					defer wg.Done()
					for range rounds {
						if err := Write(fsys, target, contents[w], 0o600); err != nil {
							errs <- err
						}
					}
				}()
				go func() {
					defer wg.Done()
					for range rounds {
						b, err := faultfs.ReadFile(fsys, target)
						if err != nil {
							errs <- err
						} else if !valid(b) {
							errs <- fmt.Errorf("reader saw a mixed or partial file of %d bytes", len(b))
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			b, err := faultfs.ReadFile(fsys, target)
			must(t, err)
			if !valid(b) {
				t.Fatalf("final content is not one writer's: %q", b)
			}
			if names := dirNames(t, fsys, dir); len(names) != 1 {
				t.Fatalf("directory holds %v after concurrent writes, want only the target", names)
			}
		})
	}
}
