package tests

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/warren-dev/warren/provider/llmfake"
)

// browser starts headless Chromium (Debian's chromium package, which
// .ci/run installs) and returns a context for its first tab.
func browser(t *testing.T) (context.Context, context.CancelFunc) {
	t.Helper()
	bin := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			bin = p
			break
		}
	}
	if bin == "" {
		t.Fatal("no chromium on PATH: install the Debian package chromium (.ci/run does)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(bin), chromedp.NoSandbox,
		chromedp.Flag("disable-dev-shm-usage", true), chromedp.WindowSize(1200, 900))
	actx, acancel := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	ctx, tcancel := context.WithTimeout(ctx, 3*time.Minute)
	return ctx, func() { tcancel(); cancel(); acancel() }
}

// shot saves a screenshot into docs/img when WARREN_SCREENSHOTS=1 (the
// README's images come from this test).
func shot(t *testing.T, ctx context.Context, name string) {
	t.Helper()
	if os.Getenv("WARREN_SCREENSHOTS") != "1" {
		return
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join("..", "docs", "img", name), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// click clicks sel, again if the page replaced the node in between (it
// re-renders its lists as events come).
func click(ctx context.Context, sel string) error {
	var err error
	for range 5 {
		if err = chromedp.Do(ctx, chromedp.WaitVisible(chromedp.CSS(sel)), chromedp.Click(chromedp.CSS(sel))); err == nil {
			return nil
		}
	}
	return err
}

// TestConsoleInABrowser is issue 35's browser proof, in headless Chromium
// against a real daemon and a scripted team: pair by the one-time link;
// see the tree grow live as the lead spawns a worker; watch the lead's
// transcript take a turn as it is logged; answer its approval wait from
// the page and see the run finish; a second tab that was answering the
// same wait gets the first answer's outcome, and the log has one
// token.consumed. A model's text (the fake OpenAI server's) streams into
// the transcript and the page's Cancel ends that turn. It also measures the lag from a turn's end (agent.send
// returned) to the page showing it.
func TestConsoleInABrowser(t *testing.T) {
	oa := llmfake.New(llmfake.OpenAI)
	defer oa.Close()
	oa.Respond(func(llmfake.Request) llmfake.Reply {
		return llmfake.Reply{Text: "Drafting the release notes now, section by section", Chunk: 4, Stall: true, StallAfter: 6}
	})
	d := newTestDaemon(t, modeBinary)
	llmHome(t, d, oa, nil, map[string]any{"resume": "manual"}) // an interrupted run waits for the page's Resume
	// A fixed port: the page reconnects to it after the restart below.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	d.args = []string{"--http", addr}
	d.Start()
	script := writeScripts(t, d.dir)
	lead := d.createAgent("lead", "scripted", script, "")
	pair := d.callN("console.pair", nil)
	link := pair["url"].(string)
	base := link[:strings.Index(link, "/pair")]

	ctx, cancel := browser(t)
	defer cancel()
	must := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		if err := chromedp.Do(ctx, actions...); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	must("pairing and the tree", chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS(`tr[data-agent="lead"]`)), chromedp.WaitVisible(chromedp.CSS(`#live.on`)))
	url, err := chromedp.Run(ctx, chromedp.Location())
	if err != nil || url != base+"/" {
		t.Fatalf("after pairing the page is %s", url)
	}

	// The tree grows live.
	d.callN("agent.send", map[string]any{"agent_id": lead, "message": "spawn w1"})
	must("the spawned worker's row", chromedp.WaitVisible(chromedp.CSS(`tr[data-agent="lead/w1"]`)))

	// The transcript follows the log.
	if err := click(ctx, `tr[data-agent="lead"]`); err != nil {
		t.Fatalf("opening the transcript: %v", err)
	}
	must("the transcript", chromedp.WaitVisible(chromedp.CSS(`#transcript .entry`)))
	var lag []time.Duration
	for i := range 10 {
		msg := fmt.Sprintf("hello-%d", i)
		d.callN("agent.send", map[string]any{"agent_id": lead, "message": msg})
		done := time.Now()
		must("the turn in the transcript", chromedp.WaitVisible(fmt.Sprintf(`//div[contains(@class,"entry") and contains(., "turn.complete") and contains(., %q)]`, msg)))
		lag = append(lag, time.Since(done))
	}
	slices.Sort(lag)
	t.Logf("turn.complete to the page: p50 %v, max %v", lag[len(lag)/2], lag[len(lag)-1])

	// A model's text streams into the transcript; Cancel ends the turn.
	writer := d.createAgent("writer", "openai", "", "")
	if err := click(ctx, `tr[data-agent="writer"]`); err != nil {
		t.Fatalf("the writer's row: %v", err)
	}
	go func() {
		_, _ = d.Client().Call(procCtx(t), "agent.send", map[string]any{"agent_id": writer, "message": "write the notes"})
	}()
	must("the streamed text", chromedp.WaitVisible(`//div[contains(@class,"live-text") and contains(., "Drafting the")]`))
	if err := click(ctx, `tr[data-agent="writer"] button.cancel`); err != nil {
		t.Fatalf("cancelling from the page: %v", err)
	}
	waitEvent(t, d, writer, "turn.cancelled", func(ev string, _ map[string]any) bool { return ev == "turn.cancelled" })
	if err := click(ctx, `tr[data-agent="lead"]`); err != nil {
		t.Fatalf("back to the lead: %v", err)
	}
	must("the lead's transcript", chromedp.WaitVisible(chromedp.CSS(`#transcript .entry`)))

	// A wait, answered from the page; a second tab answers it too.
	go func() {
		_, _ = d.Client().Call(procCtx(t), "agent.send", map[string]any{"agent_id": lead, "message": "ask deploy to production?"})
	}()
	must("the wait's card", chromedp.WaitVisible(chromedp.CSS(`.wait textarea`)))
	shot(t, ctx, "console.png")
	attr, err := chromedp.Run(ctx, chromedp.AttributeValue(chromedp.CSS(`.wait`), "data-token"))
	if err != nil || !attr.Exists {
		t.Fatalf("the wait's token id: %v", err)
	}
	token := attr.Value
	tab2, cancel2 := chromedp.NewContext(ctx)
	defer cancel2()
	if err := chromedp.Do(tab2, chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS(`.wait textarea`)),
		chromedp.SendKeys(chromedp.CSS(`.wait textarea`), "no, wait")); err != nil {
		t.Fatalf("the second tab: %v", err)
	}
	must("answering", chromedp.SendKeys(chromedp.CSS(`.wait textarea`), "ship it"), chromedp.Click(chromedp.CSS(`.wait button.answer`)),
		chromedp.WaitVisible(`//div[contains(@class,"outcome") and contains(., "answered")]`))
	waitEvent(t, d, lead, "the answered run's turn.complete", func(ev string, data map[string]any) bool {
		return ev == "turn.complete" && strings.Contains(mustJSON(t, data), "answer: ship it")
	})
	// The second tab's card stays (its text was typed) and is marked
	// ended once its page has seen the run go on; the page re-renders its
	// list on every event, so a click may find the node replaced: try
	// again then.
	if err := chromedp.Do(tab2, chromedp.WaitVisible(chromedp.CSS(`.wait.ended button.answer`))); err != nil {
		t.Fatalf("the second tab's card: %v", err)
	}
	if err := click(tab2, `.wait.ended button.answer`); err != nil {
		t.Fatalf("the second answer's click: %v", err)
	}
	if err := chromedp.Do(tab2, chromedp.WaitVisible(`//div[contains(@class,"outcome") and contains(., "already answered")]`)); err != nil {
		t.Fatalf("the second answer: %v", err)
	}
	second, err := chromedp.Run(tab2, chromedp.Text(chromedp.CSS(`.wait .outcome`)))
	if err != nil {
		t.Fatal(err)
	}
	if second != "already answered: ship it" {
		t.Fatalf("the second tab shows %q, want the first answer's outcome", second)
	}
	if n := strings.Count(readLog(t, d, lead), `"event":"token.consumed"`); n != 1 {
		t.Fatalf("token.consumed x%d", n)
	}
	if !strings.Contains(readLog(t, d, lead), token) {
		t.Fatalf("the card's token id %s is not the wait's", token)
	}

	// A run interrupted by a kill -9 (resume policy manual): the page,
	// reconnected by itself, offers Resume, and it re-runs the run.
	fifo := filepath.Join(d.dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	w1 := d.callN("agent.inspect", map[string]any{"agent_id": "lead/w1"})["agent_id"].(string)
	go func() {
		_, _ = d.Client().Call(procCtx(t), "agent.send", map[string]any{"agent_id": w1, "message": "fifo " + fifo})
	}()
	must("w1 running", chromedp.WaitVisible(`//tr[@data-agent="lead/w1"]//span[contains(@class,"status") and contains(., "running")]`))
	d.Kill()
	d.Start()
	if err := click(ctx, `tr[data-agent="lead/w1"] button.resume`); err != nil {
		t.Fatalf("the Resume button after the restart: %v", err)
	}
	waitEvent(t, d, w1, "run.resumed by the operator", func(ev string, data map[string]any) bool {
		return ev == "run.resumed" && data["by"] == "operator"
	})
	f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	_, _ = f.Write([]byte("go on"))
	f.Close()
	waitEvent(t, d, w1, "the resumed run's turn.complete", func(ev string, data map[string]any) bool {
		return ev == "turn.complete" && strings.Contains(mustJSON(t, data), "fifo: go on")
	})

	// The same page on a phone's screen.
	if os.Getenv("WARREN_SCREENSHOTS") == "1" {
		go func() {
			_, _ = d.Client().Call(procCtx(t), "agent.send", map[string]any{"agent_id": "lead/w1", "message": "ask merge the release branch?"})
		}()
		must("a phone's viewport", chromedp.EmulateViewport(390, 844, chromedp.EmulateScale(2)), chromedp.Navigate(base+"/"),
			chromedp.WaitVisible(chromedp.CSS(`tr[data-agent="lead/w1"]`)), chromedp.WaitVisible(`//div[contains(@class,"prompt") and contains(., "merge the release")]`))
		shot(t, ctx, "console-phone.png")
	}
}
