package faultfs

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
)

func TestMemConcurrentUse(t *testing.T) {
	m := NewMem()
	must(t, m.MkdirAll("/c", 0o755))
	shared := openAppend(t, m, "/c/shared")
	const workers, writes = 8, 50
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			own := fmt.Sprintf("/c/own-%d", w)
			f, err := m.OpenFile(own, os.O_RDWR|os.O_CREATE, 0o644)
			if err != nil {
				errs <- err
				return
			}
			for i := range writes {
				if _, err := shared.Write([]byte("x")); err != nil {
					errs <- err
					return
				}
				if _, err := f.Write([]byte{byte(i)}); err != nil {
					errs <- err
					return
				}
				if _, err := m.ReadDir("/c"); err != nil {
					errs <- err
					return
				}
				if _, err := shared.Stat(); err != nil {
					errs <- err
					return
				}
			}
			errs <- f.Sync()
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		must(t, err)
	}
	fi, err := m.Stat("/c/shared")
	must(t, err)
	if fi.Size() != workers*writes {
		t.Fatalf("shared file has %d bytes, want %d (lost appends)", fi.Size(), workers*writes)
	}
	// 1 mkdir + 1 create + per worker: create, 2 writes per round, sync.
	if want := 2 + workers*(1+2*writes+1); m.MutatingOps() != want {
		t.Fatalf("MutatingOps = %d, want %d", m.MutatingOps(), want)
	}
}

// TestConcurrentCrashIsSticky crashes the FS while goroutines write: once a
// goroutine sees ErrCrashed, every later op it makes also fails.
func TestConcurrentCrashIsSticky(t *testing.T) {
	m := NewMem()
	m.CrashAt(100)
	var wg sync.WaitGroup
	bad := make(chan error, 4)
	for w := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := m.OpenFile(fmt.Sprintf("/f%d", w), os.O_WRONLY|os.O_CREATE, 0o644)
			if err != nil {
				if !errors.Is(err, ErrCrashed) {
					bad <- err
				}
				return
			}
			seen := false
			for range 100 {
				_, err := f.Write([]byte("x"))
				switch {
				case errors.Is(err, ErrCrashed):
					seen = true
				case err != nil:
					bad <- err
					return
				case seen:
					bad <- errors.New("a write succeeded after the crash")
					return
				}
			}
		}()
	}
	wg.Wait()
	close(bad)
	for err := range bad {
		t.Fatal(err)
	}
	if !m.Crashed() || m.MutatingOps() != 100 {
		t.Fatalf("crashed=%v ops=%d, want crashed at exactly op 100", m.Crashed(), m.MutatingOps())
	}
}
