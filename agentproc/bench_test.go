package agentproc

import (
	"os/exec"
	"testing"

	"github.com/warren-dev/warren/faultfs"
)

// BenchmarkStart compares starting (and reaping) a process through a
// Spawner with a plain exec.Cmd: the cost of the dedicated thread.
func BenchmarkStart(b *testing.B) {
	b.Run("spawner", func(b *testing.B) {
		sp := NewSpawner()
		for i := 0; i < b.N; i++ {
			p, err := sp.Start(exec.Command("true"))
			if err != nil {
				b.Fatal(err)
			}
			<-p.Done()
		}
	})
	b.Run("exec", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			if err := exec.Command("true").Run(); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkRecord is the durable record written for every agent process
// start (atomicfile on the real disk) and its removal.
func BenchmarkRecord(b *testing.B) {
	r := Records{FS: faultfs.OS{}, Dir: b.TempDir()}
	rec := Record{AgentID: "0123456789abcdef0123456789abcdef", Pid: 4242, Pgid: 4242, StartTime: 1, BootID: "x"}
	for i := 0; i < b.N; i++ {
		if err := r.Add(rec); err != nil {
			b.Fatal(err)
		}
		if err := r.Remove(rec); err != nil {
			b.Fatal(err)
		}
	}
}
