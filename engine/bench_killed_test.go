package engine

// The memory benchmark's "killed" state (bench_memproc_test.go): a home as
// warren leaves it after a kill -9 in the middle of work. The daemon is
// started on the home, driven with turns, and killed with SIGKILL while
// turns are in flight (interrupted runs, pending messages, maybe an
// events.pending file, whatever the kill catches). Then every agent's
// checkpoint is moved back to a line 0-255 entries before its log's end,
// as if the daemon's own writer (every CheckpointEvery = 256 entries) had
// last written it there: the worst case a kill -9 leaves, where every
// agent has work since its last checkpoint.

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/checkpoint"
	"github.com/warren-dev/warren/config"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/protocol"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/inproc"
)

// killMidWork starts the daemon on home, drives turns on up to 64 agents
// over four connections until at least minTurns have been answered, and
// kills the daemon with SIGKILL while the next ones are in flight.
func killMidWork(t testing.TB, bin, home string, spec homeSpec, minTurns int) {
	t.Helper()
	stderr, err := os.CreateTemp(t.TempDir(), "daemon-stderr-")
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	cmd := exec.Command(bin, "daemon", "start", "--foreground", "--home", home, "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting the daemon: %v", err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Minute)
	defer cancel()
	sock := filepath.Join(home, "daemon.sock") // daemon.SocketPath (engine cannot import daemon)
	for {
		select {
		case err := <-exited:
			out, _ := os.ReadFile(stderr.Name())
			t.Fatalf("the daemon exited before serving: %v\n%s", err, tail(string(out), 40))
		default:
		}
		if c, err := protocol.Dial(ctx, sock); err == nil {
			_, err = c.Call(ctx, "daemon.status", nil)
			c.Close()
			if err == nil {
				break
			}
		}
		time.Sleep(2 * time.Millisecond) // polling a socket that does not exist yet: nothing to wait on
	}
	ids := drivenIDs(spec)
	var answered atomic.Int64
	enough := make(chan struct{})
	var once sync.Once
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			c, err := protocol.Dial(ctx, sock)
			if err != nil {
				return
			}
			defer c.Close()
			for j := w; ; j += 4 {
				id := ids[(j*7)%len(ids)]
				// Errors end the client: the daemon is killed under it.
				if _, err := c.Call(ctx, "agent.send", map[string]any{"agent_id": id,
					"message": fmt.Sprintf("Turn %d: summarise what changed since your last report.", j)}); err != nil {
					return
				}
				if answered.Add(1) >= int64(minTurns) {
					once.Do(func() { close(enough) })
				}
			}
		}(w)
	}
	select {
	case <-enough:
	case err := <-exited:
		t.Fatalf("the daemon exited while driven: %v", err)
	}
	// Turns are in flight on every client: kill now.
	_ = cmd.Process.Kill()
	<-exited
	wg.Wait()
	// The socket file stays behind after a kill -9, as in real life.
}

// lagCheckpoints rewrites every agent's checkpoint at a line lag entries
// before its log's last line (lag drawn from 0..maxLag with seed; less
// when the log is shorter), with the daemon's own checkpoint writer on the
// projection of the log up to that line.
func lagCheckpoints(t testing.TB, home string, seed int64, maxLag int) {
	t.Helper()
	c, err := NewCore(context.Background(), withDefaults(CoreOptions{
		FS: faultfs.OS{}, Home: home, DefaultProvider: "inproc", DefaultModel: "echo",
		Providers: map[string]provider.Provider{"inproc": inproc.New("inproc", inproc.Options{NativeResume: true})},
		Config:    config.Default(), NoWake: true, Logger: hclog.NewNullLogger(),
	}))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close(context.Background()) }()
	ids, _, err := c.agentIDs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewSource(seed))
	lags := make([]int, len(ids))
	for i := range lags {
		lags[i] = rng.Intn(maxLag + 1)
	}
	work := make(chan int)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := c.lagCheckpoint(ids[i], lags[i]); err != nil {
					mu.Lock()
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
				}
			}
		}()
	}
	for i := range ids {
		work <- i
	}
	close(work)
	wg.Wait()
	if firstErr != nil {
		t.Fatal(firstErr)
	}
}

// lagCheckpoint writes id's checkpoint lag lines before its log's end.
func (c *Core) lagCheckpoint(id string, lag int) error {
	data, err := os.ReadFile(c.logPath(id))
	if err != nil {
		return err
	}
	lines := bytes.Count(data, []byte{'\n'})
	data = nil
	upTo := uint64(max(lines-lag, 2)) // agent.created and session.created come in one write
	p := newProjection()
	p.BeginReplay(nil)
	var foldErr error
	lg, err := c.openLogReplay(context.Background(), id, new(*agent), nil, nil, func(e eventlog.Entry) error {
		if e.Seq <= upTo && foldErr == nil {
			foldErr = p.Apply(e)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("agent %s: %w", id, err)
	}
	defer lg.Close()
	if foldErr == nil {
		foldErr = p.EndReplay(func(ref inbox.Ref) (json.RawMessage, error) {
			e, err := c.st.ReadSeq(context.Background(), id, ref.Seq, ref.Off)
			return e.Data, err
		})
	}
	if foldErr != nil {
		return fmt.Errorf("agent %s: %w", id, foldErr)
	}
	if !p.Created || p.Terminated {
		return nil
	}
	a := newAgent(id, lg, p)
	c.ckpts.Write(a, 0)
	if a.Ckpt.Seq.Load() != upTo {
		return fmt.Errorf("agent %s: no checkpoint written at seq %d", id, upTo)
	}
	return nil
}

// checkpointLagStats reports how far the checkpoints lag the logs: the
// number of agents with one, and the mean and largest lag in entries.
func checkpointLagStats(t testing.TB, home string) (n int, mean float64, most int) {
	t.Helper()
	dirs := mustReadDir(t, filepath.Join(home, "agents"))
	var sum int
	for _, d := range dirs {
		dir := filepath.Join(home, "agents", d.Name())
		head, err := os.ReadFile(filepath.Join(dir, checkpoint.Name))
		if err != nil {
			continue
		}
		line, _, _ := bytes.Cut(head, []byte{'\n'})
		var h struct {
			Seq uint64 `json:"seq"` // the head line's (checkpoint/doc.go)
		}
		if json.Unmarshal(line, &h) != nil {
			continue
		}
		log, err := os.ReadFile(filepath.Join(dir, "events.jsonl"))
		if err != nil {
			continue
		}
		lag := bytes.Count(log, []byte{'\n'}) - int(h.Seq)
		n++
		sum += lag
		most = max(most, lag)
	}
	if n > 0 {
		mean = float64(sum) / float64(n)
	}
	return n, mean, most
}
