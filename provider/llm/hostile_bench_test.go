package llm_test

// BenchmarkHostileTurnMemory measures what one hostile turn makes the
// daemon hold (issue 31 D3): an OpenAI-compatible server that answers every
// step with a call of an unknown tool whose arguments are 15 MB
// (unknown-args=15MB/steps=N; the turn ends with a text answer after N
// steps), and one that answers with a valid 60 MB text (text=60MB). One
// iteration is one turn, against an in-process server that reads and
// drops the requests and sends pre-rendered streams. Reported per turn:
//
//	peak-heap-MB  the largest heap (live and not yet collected objects),
//	              sampled every millisecond during the turn
//	peak-RSS-MB   the process's peak resident set during the turn (VmHWM
//	              after resetting it; the server's own bytes included)
//	max-req-MB    the largest request body the turn sent
//	B/op          (with -benchmem) all bytes allocated by the turn
//
// The file uses only the provider's public API, so it runs on an older
// commit too (for a before/after comparison):
//
//	go test -run '^$' -bench BenchmarkHostileTurnMemory -benchmem -benchtime 1x ./provider/llm/
//
// The steps=100 case is for the bounded code only: without the bounds its
// requests reach 1.5 GB and the turn sends 75 GB.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/llm"
	"github.com/warren-dev/warren/provider/openai"
)

func BenchmarkHostileTurnMemory(b *testing.B) {
	call := hostileCallStream("no_such_tool", 15<<20)
	done := []byte(openaiText("done"))
	for _, steps := range []int{10, 20, 100} {
		b.Run(fmt.Sprintf("unknown-args=15MB/steps=%d", steps), func(b *testing.B) {
			benchHostile(b, func(n int) []byte {
				if n < steps {
					return call
				}
				return done
			})
		})
	}
	text := hostileTextStream(60 << 20)
	b.Run("text=60MB", func(b *testing.B) {
		benchHostile(b, func(int) []byte { return text })
	})
}

// hostileCallStream is a Chat Completions stream of one call of tool
// whose arguments ({"x":"aaa..."}) are size bytes, in one chunk.
func hostileCallStream(tool string, size int) []byte {
	args := `{"x":"` + strings.Repeat("a", size-8) + `"}`
	return []byte(openaiCall(tool, args, 0))
}

// hostileTextStream is a Chat Completions stream of size bytes of text in
// 64 KiB deltas.
func hostileTextStream(size int) []byte {
	chunk := strings.Repeat("t", 64<<10)
	var b strings.Builder
	for sent := 0; sent < size; sent += len(chunk) {
		fmt.Fprintf(&b, "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":%q},\"finish_reason\":null}]}\n\n", chunk)
	}
	b.WriteString("data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\n\ndata: [DONE]\n\n")
	return []byte(b.String())
}

func benchHostile(b *testing.B, reply func(n int) []byte) {
	var n, maxReq atomic.Int64
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		size, _ := io.Copy(io.Discard, r.Body)
		for {
			m := maxReq.Load()
			if size <= m || maxReq.CompareAndSwap(m, size) {
				break
			}
		}
		w.Header().Set("Content-Type", "text/event-stream")
		_, _ = w.Write(reply(int(n.Add(1) - 1)))
	}))
	defer srv.Close()
	p := openai.New(llm.Options{Name: "hos", Settings: func() llm.Settings {
		return llm.Settings{BaseURL: srv.URL + "/v1", Timeout: time.Minute}
	}})
	var peakHeap, peakRSS float64
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		n.Store(0)
		s, err := p.Create(context.Background(), provider.Spec{AgentID: "a1", Model: "m", System: "sys"})
		if err != nil {
			b.Fatal(err)
		}
		runtime.GC()
		resetPeakRSS()
		stop := sampleHeap()
		_, err = s.Send(context.Background(), "hi", provider.TurnIO{Tools: &calls{}})
		heap := stop()
		if err != nil && i == 0 {
			b.Logf("the turn failed: %.300s", err)
		}
		peakHeap = max(peakHeap, heap)
		peakRSS = max(peakRSS, peakRSSBytes())
		_ = s.(interface{ Stop() error }).Stop()
	}
	b.ReportMetric(peakHeap/(1<<20), "peak-heap-MB")
	b.ReportMetric(peakRSS/(1<<20), "peak-RSS-MB")
	b.ReportMetric(float64(maxReq.Load())/(1<<20), "max-req-MB")
}

// sampleHeap samples the heap's object bytes every millisecond until the
// returned function is called; that returns the largest sample.
func sampleHeap() func() float64 {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() float64 {
		metrics.Read(sample)
		return float64(sample[0].Value.Uint64())
	}
	var mu sync.Mutex
	peak := read()
	quit := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-t.C:
				v := read()
				mu.Lock()
				peak = max(peak, v)
				mu.Unlock()
			}
		}
	}()
	return func() float64 {
		close(quit)
		wg.Wait()
		return max(peak, read())
	}
}

// resetPeakRSS resets the process's VmHWM (Linux; elsewhere nothing).
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSSBytes is the process's VmHWM (0 where there is none).
func peakRSSBytes() float64 {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			return kb * 1024
		}
	}
	return 0
}
