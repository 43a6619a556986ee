package atomicfile

import (
	"testing"

	"github.com/warren-dev/warren/faultfs"
)

func benchWrite(b *testing.B, fsys faultfs.FS, path string) {
	data := make([]byte, 4096)
	b.SetBytes(int64(len(data)))
	b.ResetTimer()
	for range b.N {
		if err := Write(fsys, path, data, 0o600); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkWriteMem measures the protocol's overhead on Mem (4 KiB).
func BenchmarkWriteMem(b *testing.B) {
	m := faultfs.NewMem()
	if err := m.MkdirAll("/d", 0o755); err != nil {
		b.Fatal(err)
	}
	benchWrite(b, m, "/d/s.json")
}

// BenchmarkWriteOS measures a durable 4 KiB replacement on the real disk
// (two fsyncs: the temp and the directory).
func BenchmarkWriteOS(b *testing.B) { benchWrite(b, faultfs.OS{}, b.TempDir()+"/s.json") }
