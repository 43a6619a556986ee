package engine

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/config"
	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/schedule"
)

// updateGolden rewrites testdata/golden/*.jsonl from the current code:
//
//	go test -run TestGoldenLogs ./engine/ -update-golden
var updateGolden = flag.Bool("update-golden", false, "rewrite the golden logs in testdata/golden")

// TestGoldenLogs drives one fixed set of operations (a lead that spawns a
// worker, messages, metadata, a subscription, an operator wait answered by
// token id, a clean restart, a crash mid-turn and its recovery, a cancel
// and a termination) and compares every log the daemon wrote, byte for
// byte, with the recorded ones in testdata/golden. It guards refactors: the
// same operations must write the same bytes. Random ids (agent, message,
// run, call and token ids, session handles, boot ids) differ per run, so
// each distinct 32-digit hex id is replaced by a name in order of first
// appearance across the logs (and the CRC, which covers those ids, by
// "crc" after it has been checked by the reader); the clock is fixed.
func TestGoldenLogs(t *testing.T) {
	got := goldenRun(t)
	dir := filepath.Join("testdata", "golden")
	if *updateGolden {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		old, _ := filepath.Glob(filepath.Join(dir, "*.jsonl"))
		for _, f := range old {
			_ = os.Remove(f)
		}
		for name, text := range got {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		return
	}
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no golden logs in %s (run with -update-golden): %v", dir, err)
	}
	want := map[string]string{}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		want[filepath.Base(f)] = string(b)
	}
	for name := range want {
		if _, ok := got[name]; !ok {
			t.Errorf("log %s is recorded but was not written", name)
		}
	}
	for name, text := range got {
		w, ok := want[name]
		if !ok {
			t.Errorf("log %s was written but is not recorded (-update-golden if intended)", name)
			continue
		}
		if text != w {
			t.Errorf("log %s differs from testdata/golden/%s:\n%s", name, name, firstDiff(w, text))
		}
	}
}

// goldenRun performs the operations and returns the normalized logs by
// file name (agent name + ".jsonl", and "user.jsonl").
func goldenRun(t *testing.T) map[string]string {
	t.Helper()
	fs := faultfs.NewMem()
	prov := inproc.New("inproc", inproc.Options{NativeResume: true})
	cfg := config.Default()
	cfg.RetryBaseDelay = time.Millisecond
	clock := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	blockCrash := make(chan struct{})
	crashStarted := make(chan *inproc.Turn, 1)

	prov.Register("golden-lead", func(ctx context.Context, tr *inproc.Turn) (string, error) {
		switch tr.Prompt {
		case "start":
			if _, err := tr.Call("spawn_agent", map[string]any{"name": "worker", "instructions": "Do the work and report.",
				"metadata": map[string]any{"role": "builder"}, "model": "golden-worker"}); err != nil {
				return "", err
			}
			return "spawned", nil
		case "delegate":
			if _, err := tr.Call("subscribe", map[string]any{"agent_name": "worker", "transition": "busy->idle"}); err != nil {
				return "", err
			}
			if _, err := tr.Call("set_agent_metadata", map[string]any{"agent_name": "worker", "key": "phase", "value": "delegated"}); err != nil {
				return "", err
			}
			if _, err := tr.Call("send_message", map[string]any{"recipient": "worker", "text": "build the thing"}); err != nil {
				return "", err
			}
			return "delegated", nil
		case "crash":
			crashStarted <- tr
			<-blockCrash
			return "never", nil
		default:
			res, err := tr.Call("check_inbox", map[string]any{})
			if err != nil {
				return "", err
			}
			return fmt.Sprintf("inbox: %v", res["messages"] != nil), nil
		}
	})
	prov.Register("golden-worker", func(ctx context.Context, tr *inproc.Turn) (string, error) {
		res, err := tr.Call("await_input", map[string]any{"kind": "approval", "prompt": "ship it?", "timeout": 3600})
		if err != nil {
			return "", err
		}
		if _, err := tr.Call("send_message", map[string]any{"recipient": "lead", "text": fmt.Sprintf("built: %v", res["response"])}); err != nil {
			return "", err
		}
		return "built", nil
	})

	var c *Core
	start := func() {
		var err error
		c, err = NewCore(context.Background(), withDefaults(CoreOptions{
			FS: fs, Home: "/home", Providers: map[string]provider.Provider{"inproc": prov},
			DefaultProvider: "inproc", DefaultModel: "echo", Config: cfg, NoWake: true,
			Logger: hclog.NewNullLogger(), Clock: schedule.NewFake(clock), // fixed: never advanced
			Sleep:  func(ctx context.Context, d time.Duration) error { return nil },
			Jitter: func() float64 { return 0.5 }, SessionSaveDelay: -1, CheckpointEvery: -1,
		}))
		if err != nil {
			t.Fatalf("NewCore: %v", err)
		}
		if _, err := c.Recover(context.Background()); err != nil {
			t.Fatalf("Recover: %v", err)
		}
	}
	closeCore := func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	ctx := context.Background()
	must := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}

	start()
	lead, err := c.CreateAgent(ctx, CreateSpec{Name: "lead", Instructions: "Lead the team.", Provider: "inproc", Model: "golden-lead",
		Metadata: map[string]string{"team": "golden"}})
	must("create lead", err)
	res, err := c.Send(ctx, lead, "start", "", "", nil)
	must("send start", err)
	if res.Response != "spawned" {
		t.Fatalf("lead start = %+v", res)
	}
	res, err = c.Send(ctx, lead, "delegate", "", "", nil)
	must("send delegate", err)
	if res.Response != "delegated" {
		t.Fatalf("lead delegate = %+v", res)
	}
	worker, err := c.Resolve("worker")
	must("resolve worker", err)
	res, err = c.Send(ctx, worker, "go", "", "", nil)
	must("send go", err)
	if res.Status != "suspended" {
		t.Fatalf("worker go = %+v", res)
	}
	waits := c.Waits()
	if len(waits) != 1 {
		t.Fatalf("waits = %+v", waits)
	}
	closeCore() // a clean restart with the wait pending
	start()
	waits = c.Waits()
	if len(waits) != 1 {
		t.Fatalf("waits after restart = %+v", waits)
	}
	res, err = c.ResumeByID(ctx, worker, waits[0].TokenID, "yes")
	must("resume", err)
	if res.Response != "built" {
		t.Fatalf("resume = %+v", res)
	}
	res, err = c.Send(ctx, lead, "report", "", "", nil)
	must("send report", err)

	// A turn cut by a crash: the run is interrupted at the next start.
	go func() { _, _ = c.Send(ctx, lead, "crash", "", "", nil) }()
	<-crashStarted
	fs.Crash()
	c.Abandon()
	close(blockCrash)
	fs.Reboot(faultfs.RebootOptions{Mode: faultfs.ProcessCrash})
	start()
	_, err = c.Send(ctx, worker, "again", "", "", nil)
	must("send again", err)
	must("cancel", c.Cancel(ctx, worker))
	must("terminate worker", c.Terminate(context.Background(), worker))
	must("terminate lead", c.Terminate(context.Background(), lead))
	closeCore()

	return goldenLogs(t, fs, map[string]string{lead: "lead", worker: "worker"})
}

var hexID = regexp.MustCompile(`tok_[0-9a-f]{16}|[0-9a-f]{32}`)

// goldenLogs reads every log (checked by the reader, CRCs included) and
// returns them normalized (see TestGoldenLogs).
func goldenLogs(t *testing.T, fs faultfs.FS, names map[string]string) map[string]string {
	t.Helper()
	ids := map[string]string{}
	norm := func(s string) string {
		return hexID.ReplaceAllStringFunc(s, func(id string) string {
			if n, ok := names[id]; ok {
				return "<" + n + ">"
			}
			if _, ok := ids[id]; !ok {
				ids[id] = fmt.Sprintf("<id%d>", len(ids)+1)
			}
			return ids[id]
		})
	}
	crc := regexp.MustCompile(`"crc":"[0-9a-f]{8}"`)
	out := map[string]string{}
	ordered := make([]string, 0, len(names))
	for id := range names {
		ordered = append(ordered, id)
	}
	sort.Slice(ordered, func(i, j int) bool { return names[ordered[i]] < names[ordered[j]] })
	paths := []struct{ file, path string }{{"user.jsonl", "/home/user.jsonl"}}
	for _, id := range ordered {
		paths = append(paths, struct{ file, path string }{names[id] + ".jsonl", filepath.Join("/home/agents", id, "events.jsonl")})
	}
	for _, p := range paths {
		if _, err := eventlog.ReadAll(fs, p.path); err != nil {
			t.Fatalf("%s: %v", p.file, err)
		}
		b, err := faultfs.ReadFile(fs, p.path)
		if err != nil {
			t.Fatalf("%s: %v", p.file, err)
		}
		out[p.file] = crc.ReplaceAllString(norm(string(b)), `"crc":"crc"`)
	}
	return out
}

// firstDiff shows the first differing line of two texts.
func firstDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	for i := 0; i < len(w) || i < len(g); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			return fmt.Sprintf("line %d:\n  want %s\n  got  %s", i+1, wl, gl)
		}
	}
	return "(equal)"
}
