package engine

// Listings of a deep tree (issue 31, D5): the real daemon binary on a
// home holding one chain of agents with 64-character names, 3,000 deep
// (deeper than limits.tree_depth lets anyone create now; a home an older
// daemon wrote may hold one). It reports the time to serve, the time to
// list every agent (following agent.list's pages; an older binary answers
// in one reply, or fails), the largest reply and the peak RSS after the
// listing.
//
//	go test -run '^$' -bench BenchmarkDeepChainList -benchtime 1x ./engine/
//	WARREN_BENCH_BINARY=/path/to/older/warren ... (before/after)

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/protocol"
	"github.com/warren-dev/warren/schema"
)

func BenchmarkDeepChainList(b *testing.B) {
	bin := os.Getenv("WARREN_BENCH_BINARY")
	if bin == "" {
		bin = buildWarren(b)
	}
	const depth = 3000
	home := filepath.Join(benchDir(b), "h")
	if err := genChain(home, depth); err != nil {
		b.Fatal(err)
	}
	for i := 0; i < b.N; i++ {
		serve, list, reply, pages, peak, err := listDeepChain(b, bin, home, depth)
		if err != nil {
			b.Logf("listing failed: %v", err)
			b.ReportMetric(1, "failed")
		}
		b.ReportMetric(serve.Seconds(), "s_to_serve")
		b.ReportMetric(list.Seconds(), "s_to_list")
		b.ReportMetric(float64(reply)/(1<<20), "largest_reply_MB")
		b.ReportMetric(float64(pages), "pages")
		b.ReportMetric(float64(peak)/(1<<20), "peak_rss_MB")
	}
}

// genChain writes a home of one chain of n agents (64-character names),
// each the child of the one before.
func genChain(home string, n int) error {
	fsys := faultfs.OS{}
	parent := ""
	t0 := time.Date(2026, 11, 1, 0, 0, 0, 0, time.UTC)
	for i := 0; i < n; i++ {
		id := genAgentID(i)
		lg, err := eventlog.Open(fsys, filepath.Join(home, "agents", id, "events.jsonl"), eventlog.Options{PendingIdle: -1})
		if err != nil {
			return err
		}
		var p *string
		if parent != "" {
			p = &parent
		}
		name := fmt.Sprintf("a%063d", i)
		_, err = lg.AppendBatch([]eventlog.Record{
			{Event: schema.AgentCreated, Data: schema.AgentCreatedData{AgentID: id, Name: name, ParentID: p, Provider: "inproc",
				Model: "echo", Metadata: map[string]string{}, CreatedAt: t0.Add(time.Duration(i) * time.Millisecond).Format(time.RFC3339Nano)}},
			{Event: schema.SessionCreated, Data: schema.SessionCreatedData{Provider: "inproc", Model: "echo", Handle: "h" + id}},
		})
		if cerr := lg.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return err
		}
		parent = id
	}
	return nil
}

// listDeepChain starts bin on home, lists every agent and stops it.
func listDeepChain(b *testing.B, bin, home string, n int) (serve, list time.Duration, largest, pages int, peak int64, listErr error) {
	b.Helper()
	cfg := `{"limits":{"tree_depth":1024}}` + "\n"
	if err := os.WriteFile(filepath.Join(home, "config.json"), []byte(cfg), 0o600); err != nil {
		b.Fatal(err)
	}
	sock := filepath.Join(home, "daemon.sock")
	var out strings.Builder
	cmd := exec.Command(bin, "daemon", "start", "--foreground", "--home", home, "--log-level", "warn")
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	defer func() {
		_ = cmd.Process.Kill()
		<-exited
	}()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	var cl *protocol.Client
	for cl == nil {
		select {
		case err := <-exited:
			b.Fatalf("the daemon exited before serving: %v\n%s", err, out.String())
		default:
		}
		if c, err := protocol.Dial(ctx, sock); err == nil {
			if _, err := c.Call(ctx, "daemon.status", nil); err == nil {
				cl = c
				break
			}
			c.Close()
		}
		time.Sleep(2 * time.Millisecond) // polling a socket that does not exist yet: nothing to wait on
	}
	defer cl.Close()
	serve = time.Since(start)
	t0 := time.Now()
	seen := 0
	params := map[string]any{}
	for {
		res, err := cl.Call(ctx, "agent.list", params)
		if err != nil {
			listErr = err
			break
		}
		pages++
		if raw, err := json.Marshal(res); err == nil && len(raw) > largest {
			largest = len(raw)
		}
		agents, _ := res["agents"].([]any)
		seen += len(agents)
		next, _ := res["next"].(string)
		if next == "" {
			break
		}
		params = map[string]any{"after": next}
	}
	list = time.Since(t0)
	peak, _ = procMem(cmd.Process.Pid)
	if listErr == nil && seen != n {
		listErr = fmt.Errorf("listed %d agents of %d", seen, n)
	}
	return serve, list, largest, pages, peak, listErr
}
