package faultfs

import (
	"os"
	"path/filepath"
	"testing"
)

func benchAppendSync(b *testing.B, fsys FS, name string, sync bool) {
	f, err := fsys.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	line := make([]byte, 200)
	b.SetBytes(int64(len(line)))
	b.ResetTimer()
	for i := range b.N {
		if i%4096 == 4095 { // keep the file at most ~800 KiB
			if err := f.Truncate(0); err != nil {
				b.Fatal(err)
			}
		}
		if _, err := f.Write(line); err != nil {
			b.Fatal(err)
		}
		if sync {
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkMemAppend measures a 200-byte append on Mem.
func BenchmarkMemAppend(b *testing.B) { benchAppendSync(b, NewMem(), "/f", false) }

// BenchmarkMemAppendSync measures a 200-byte append plus fsync on Mem; sync
// is O(1), so this stays flat as the file grows.
func BenchmarkMemAppendSync(b *testing.B) { benchAppendSync(b, NewMem(), "/f", true) }

// BenchmarkOSAppendSync measures a 200-byte append plus a real fsync.
func BenchmarkOSAppendSync(b *testing.B) {
	benchAppendSync(b, OS{}, filepath.Join(b.TempDir(), "f"), true)
}

// BenchmarkOSSyncDir measures a directory fsync.
func BenchmarkOSSyncDir(b *testing.B) {
	dir := b.TempDir()
	for range b.N {
		if err := (OS{}).SyncDir(dir); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkMemPowerLossReboot measures a power-loss reboot of a Mem holding
// 100 files of 4 KiB.
func BenchmarkMemPowerLossReboot(b *testing.B) {
	m := NewMem()
	data := make([]byte, 4096)
	for i := range 100 {
		name := filepath.Join("/d", string(rune('a'+i%26))+string(rune('a'+i/26)))
		if err := m.MkdirAll("/d", 0o755); err != nil {
			b.Fatal(err)
		}
		f, err := m.OpenFile(name, os.O_WRONLY|os.O_CREATE, 0o644)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.Write(data); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
		if _, err := f.Write(data); err != nil { // an unsynced tail
			b.Fatal(err)
		}
	}
	if err := m.SyncDir("/d"); err != nil {
		b.Fatal(err)
	}
	if err := m.SyncDir("/"); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for range b.N {
		m.Reboot(RebootOptions{Mode: ProcessCrash}) // keep the state for the next round
		m.Reboot(RebootOptions{Mode: PowerLoss, Tail: TailGarbage})
	}
}
