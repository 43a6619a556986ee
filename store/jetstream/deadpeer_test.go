package jetstream

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/warren-dev/warren/store/jetstream/natsembed"
	"github.com/warren-dev/warren/store/storetest"
)

// serverProcEnv makes the test binary one NATS server (JSON natsembed.Options),
// so that a test can kill it with kill -9: a server shut down in process
// announces its shutdown, and its peers mark it offline at once, which a
// killed one never does.
const serverProcEnv = "WARREN_JETSTREAM_TEST_SERVER"

func TestMain(m *testing.M) {
	if spec := os.Getenv(serverProcEnv); spec != "" {
		os.Exit(runServerProc(spec))
	}
	os.Exit(m.Run())
}

// runServerProc runs one sync-always server until killed.
func runServerProc(spec string) int {
	var o natsembed.Options
	if err := json.Unmarshal([]byte(spec), &o); err != nil {
		fmt.Println("bad spec:", err)
		return 2
	}
	srv, err := natsembed.Start(o)
	if err != nil {
		fmt.Println("embed:", err)
		return 1
	}
	fmt.Println("ready")
	srv.WaitForShutdown()
	return 0
}

// startServerProc starts a server process and waits until it accepts
// clients; kill ends it with SIGKILL.
func startServerProc(t *testing.T, o natsembed.Options) (kill func()) {
	t.Helper()
	spec, _ := json.Marshal(o)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), serverProcEnv+"="+string(spec))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	line, _ := bufio.NewReader(out).ReadString('\n')
	go func() { _, _ = io.Copy(io.Discard, out); _ = cmd.Wait(); close(done) }()
	var once sync.Once
	kill = func() { once.Do(func() { _ = cmd.Process.Signal(syscall.SIGKILL); <-done }) }
	t.Cleanup(kill)
	if strings.TrimSpace(line) != "ready" {
		kill()
		t.Fatalf("server process %s did not start: %q", o.Name, line)
	}
	return kill
}

// warnCounter is the output of a logger at level Warn: it keeps the
// lines written (one per warning).
type warnCounter struct {
	mu    sync.Mutex
	lines []string
}

func (w *warnCounter) Write(p []byte) (int, error) {
	w.mu.Lock()
	w.lines = append(w.lines, strings.TrimSpace(string(p)))
	w.mu.Unlock()
	return len(p), nil
}

func (w *warnCounter) take() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	l := w.lines
	w.lines = nil
	return l
}

// TestReadsDoNotWaitOnAKilledServer: after kill -9 of one server of
// three, every read of every log is answered by the servers still
// running, with no request left unanswered. A killed server stays
// "online" in the cluster's view until its heartbeats are missed (two to
// four minutes); the reader used to make an ordered consumer (an R1
// ephemeral consumer, placed by the meta leader on a random peer it
// believes online), so about one read in three waited out its request
// timeout on the dead server and made its consumer again, logging a
// warning each time. The signal asserted is that warning count (zero),
// not a duration.
func TestReadsDoNotWaitOnAKilledServer(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: this test starts a three-server cluster with a server process (CI runs it without -short)")
	}
	ports, err := natsembed.FreeLoopbackPorts(4) // three route ports, the process's client port
	if err != nil {
		t.Fatal(err)
	}
	var routes []string
	for _, p := range ports[:3] {
		routes = append(routes, fmt.Sprintf("nats://127.0.0.1:%d", p))
	}
	// n3 is the process; it starts first, so that the two in-process
	// servers find a route to it at once.
	kill := startServerProc(t, natsembed.Options{Name: "n3", Dir: t.TempDir(), Port: ports[3], ClusterName: "warren",
		ClusterPort: ports[2], Routes: routes, StartTimeout: 30 * time.Second})
	var srvs []*server.Server
	for i := range 2 {
		srv := embed(t, natsembed.Options{Name: fmt.Sprintf("n%d", i+1), ClusterName: "warren", ClusterPort: ports[i], Routes: routes,
			StartTimeout: 30 * time.Second})
		srvs = append(srvs, srv)
	}
	// The store's connection goes to the in-process servers only: the
	// kill must not move it.
	s := clusterStore(t, srvs[0].ClientURL()+","+srvs[1].ClientURL(), srvs, 30*time.Second)
	// Set before any lease exists (no goroutine of the store reads them yet).
	warns := &warnCounter{}
	s.o.Logger = hclog.New(&hclog.LoggerOptions{Level: hclog.Warn, Output: warns})
	s.o.Timeout = 2 * time.Second

	ctx := context.Background()
	const logs, entries = 15, 3
	var ids []string
	for range logs {
		id := storetest.NewID(t)
		_, lg := ownedLog(t, s, id)
		for i := range entries {
			if _, err := lg.Append("k", payload(i)); err != nil {
				t.Fatal(err)
			}
		}
		_ = lg.Close()
		ids = append(ids, id)
	}
	// The stream leader must keep running (reads need it); move it off
	// the process if it leads.
	waitFor(t, 30*time.Second, "the log stream led by an in-process server", func() bool {
		if srvs[0].JetStreamIsStreamLeader("$G", StreamName) || srvs[1].JetStreamIsStreamLeader("$G", StreamName) {
			return true
		}
		_, _ = s.nc.Request("$JS.API.STREAM.LEADER.STEPDOWN."+StreamName, nil, 2*time.Second)
		return false
	})
	for _, srv := range srvs {
		waitFor(t, 30*time.Second, "every replica current", func() bool { return srv.JetStreamIsStreamCurrent("$G", StreamName) })
	}
	warns.take()
	kill()

	for _, id := range ids {
		rctx, cancel := context.WithTimeout(ctx, time.Minute)
		r, err := s.Read(rctx, id, 0, 0)
		if err != nil {
			cancel()
			t.Fatalf("read %s after the kill: %v", id, err)
		}
		n := 0
		for {
			e, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatalf("read %s after the kill, entry %d: %v", id, n+1, err)
			}
			n++
			if e.Seq != uint64(n) {
				t.Fatalf("read %s: entry %d has seq %d", id, n, e.Seq)
			}
		}
		_ = r.Close()
		cancel()
		if n != entries {
			t.Fatalf("read %s: %d entries, want %d", id, n, entries)
		}
	}
	if w := warns.take(); len(w) > 0 {
		t.Fatalf("%d of %d reads after the kill waited on an unanswered request:\n%s", len(w), logs, strings.Join(w, "\n"))
	}
}
