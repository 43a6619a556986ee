package tests

import (
	"bufio"
	"fmt"
	"net/http"
	"net/http/cookiejar"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// cpuOf is a process's user+system CPU time so far (from /proc).
func cpuOf(b *testing.B, pid int) time.Duration {
	b.Helper()
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		b.Fatal(err)
	}
	f := strings.Fields(string(raw[strings.LastIndexByte(string(raw), ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / 100 // USER_HZ
}

// BenchmarkConsoleStream measures what a connected web console costs the
// daemon: 1,000 agents, turns at 100 a second, the daemon's CPU per
// logged event without a console and with one browser's event stream
// (/api/events with deltas) open, b.N turns each:
//
//	go test -run '^$' -bench ConsoleStream -benchtime 1000x ./tests/
func BenchmarkConsoleStream(b *testing.B) {
	d := newTestDaemon(b, modeBinary)
	d.args = []string{"--http", "127.0.0.1:0"}
	d.Start()
	const agents = 1000
	ids := make([]string, agents)
	for i := range ids {
		ids[i] = d.createAgent(fmt.Sprintf("a%d", i), "inproc", "echo", "")
	}
	turn := 0
	run := func(n int) (cpu time.Duration, events int) {
		before := cpuOf(b, d.Pid())
		tick := time.NewTicker(10 * time.Millisecond) // 100 turns a second
		defer tick.Stop()
		for range n {
			<-tick.C
			d.callN("agent.send", map[string]any{"agent_id": ids[turn%agents], "message": "hi"})
			turn++
		}
		return cpuOf(b, d.Pid()) - before, n * eventsPerTurn(b, d, ids[0])
	}
	b.StopTimer()
	link := d.callN("console.pair", nil)["url"].(string)
	jar, _ := cookiejar.New(nil)
	cl := &http.Client{Jar: jar}
	if res, err := cl.Get(link); err != nil || res.StatusCode != 200 {
		b.Fatalf("pairing: %v %v", res, err)
	}
	base := link[:strings.Index(link, "/pair")]
	// Rounds without and with a console, alternating, so that a drift of
	// the machine falls on both.
	var cpuA, cpuB time.Duration
	var evA, evB, streamed int
	const rounds = 4
	for range rounds {
		c, e := run(max(1, b.N/rounds))
		cpuA, evA = cpuA+c, evA+e
		res, err := cl.Get(base + "/api/events?deltas=1")
		if err != nil {
			b.Fatal(err)
		}
		got := make(chan int, 1)
		go func() {
			n := 0
			sc := bufio.NewScanner(res.Body)
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "data: ") {
					n++
				}
			}
			got <- n
		}()
		b.StartTimer()
		c, e = run(max(1, b.N/rounds))
		b.StopTimer()
		res.Body.Close()
		cpuB, evB, streamed = cpuB+c, evB+e, streamed+<-got
	}
	added := float64((cpuB - cpuA).Microseconds()) / float64(evB)
	b.ReportMetric(float64(cpuA.Microseconds())/float64(evA), "cpu-µs/event-without")
	b.ReportMetric(float64(cpuB.Microseconds())/float64(evB), "cpu-µs/event-with")
	b.ReportMetric(added, "added-cpu-µs/event")
	b.Logf("%d turns each way, %d events logged with the console, %d frames streamed to it", b.N, evB, streamed)
}

// eventsPerTurn counts the entries one echo turn logs (its log's entries
// over its turns).
func eventsPerTurn(b *testing.B, d *testDaemon, id string) int {
	log := readLogB(b, d, id)
	turns := strings.Count(log, `"event":"turn.start"`)
	if turns == 0 {
		return 2
	}
	return (strings.Count(log, "\n") - 2) / turns // less agent.created and session.created
}

func readLogB(b *testing.B, d *testDaemon, id string) string {
	raw, err := os.ReadFile(d.Home + "/agents/" + id + "/events.jsonl")
	if err != nil {
		b.Fatal(err)
	}
	return string(raw)
}
