package natsembed

import (
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestEmbedLocalClusterRetries: a start that fails (here the first
// server's data directory cannot be made; in CI a route port taken by
// another process) is tried again from scratch, and the error says so
// when every attempt fails.
func TestEmbedLocalClusterRetries(t *testing.T) {
	var calls atomic.Int32
	dir := func(int) string {
		if calls.Add(1) == 1 {
			return "/proc/warren-cannot-create-this"
		}
		return t.TempDir()
	}
	srvs, err := StartCluster(ClusterOptions{Nodes: 1, Dir: dir, StartTimeout: 3 * time.Second})
	if err != nil {
		t.Fatalf("the second attempt should start: %v", err)
	}
	t.Cleanup(func() { srvs[0].Shutdown(); srvs[0].WaitForShutdown() })
	if calls.Load() != 2 || !srvs[0].ReadyForConnections(time.Second) {
		t.Fatalf("%d starts; want 2, the second ready", calls.Load())
	}

	_, err = StartCluster(ClusterOptions{Nodes: 1, Attempts: 2, StartTimeout: time.Second, Dir: func(int) string { return "/proc/warren-cannot-create-this" }})
	if err == nil || !strings.Contains(err.Error(), "did not start in 2 attempts") {
		t.Fatalf("every attempt failing: err %v", err)
	}
}
