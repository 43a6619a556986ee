package openai_test

// Provider CPU benchmarks: the openai provider against an in-memory
// transport that returns a pre-rendered stream, so the figures are the
// provider's own work (encoding the request, reading the stream, the tool
// loop) and not a server's.
//
//	go test -run '^$' -bench 'BenchmarkProvider' -benchmem ./provider/openai/
//
// turn/chunks=N: one turn whose answer streams in N chunks; per-chunk cost
// = (chunks=1000 - chunks=1) / 999. history=N: a turn on a session that
// already holds N turns; encoded_B/req is what the request had to encode
// (the rest comes from the cached prefix), sent_B/req the whole body.

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/provider/llm"
	"github.com/warren-dev/warren/provider/openai"
)

// replay is a RoundTripper answering every request with the same stream.
type replay struct{ body []byte }

func (r *replay) RoundTrip(req *http.Request) (*http.Response, error) {
	_, _ = io.Copy(io.Discard, req.Body)
	req.Body.Close()
	return &http.Response{StatusCode: 200, Status: "200 OK", Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1,
		Header: http.Header{"Content-Type": []string{"text/event-stream"}}, Body: io.NopCloser(bytes.NewReader(r.body)), Request: req}, nil
}

// stream renders a Chat Completions stream of n text chunks.
func stream(n int) []byte {
	var b strings.Builder
	b.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"role":"assistant","content":""},"finish_reason":null}]}` + "\n\n")
	for i := 0; i < n; i++ {
		b.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{"content":" token"},"finish_reason":null}]}` + "\n\n")
	}
	b.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[{"index":0,"delta":{},"finish_reason":"stop"}]}` + "\n\n")
	b.WriteString(`data: {"id":"chatcmpl-1","object":"chat.completion.chunk","created":1,"model":"m","choices":[],"usage":{"prompt_tokens":10,"completion_tokens":5,"total_tokens":15}}` + "\n\n")
	b.WriteString("data: [DONE]\n\n")
	return []byte(b.String())
}

func benchProvider(body []byte) *llm.Provider {
	return openai.New(llm.Options{Name: "bench", Client: &http.Client{Transport: &replay{body: body}},
		Settings: func() llm.Settings { return llm.Settings{BaseURL: "http://bench.invalid/v1"} }})
}

func BenchmarkProvider(b *testing.B) {
	for _, n := range []int{1, 100, 1000} {
		b.Run(fmt.Sprintf("turn/chunks=%d", n), func(b *testing.B) {
			p := benchProvider(stream(n))
			s, _ := p.Create(context.Background(), provider.Spec{Model: "m", System: "sys"})
			tio := provider.TurnIO{OnChunk: func(string) {}}
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime()
			for i := 0; i < b.N; i++ {
				// A fresh session every 50 turns keeps the history short.
				if i%50 == 0 {
					s, _ = p.Create(context.Background(), provider.Spec{Model: "m", System: "sys"})
				}
				if _, err := s.Send(context.Background(), "hello", tio); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/1000, "cpu_us/turn")
		})
	}
	for _, hist := range []int{10, 100, 1000} {
		b.Run(fmt.Sprintf("history=%d", hist), func(b *testing.B) {
			p := benchProvider(stream(20))
			turns := make([]provider.Turn, hist)
			for i := range turns {
				turns[i] = provider.Turn{Message: strings.Repeat("question ", 20), Response: strings.Repeat("answer ", 40),
					Calls: []provider.ToolCall{{ID: fmt.Sprintf("c%d", i), Tool: "send_message",
						Args: map[string]any{"recipient": "bob", "text": "hi"}, Result: map[string]any{"message_id": "m1"}}}}
			}
			var s provider.Session
			var stats interface{ Stats() (int, int) }
			tio := provider.TurnIO{OnChunk: func(string) {}}
			fresh := func() {
				// A session holding exactly hist turns, its history encoded
				// once by a first request (as in a live session).
				s, _ = p.Create(context.Background(), provider.Spec{Model: "m", System: "sys", History: turns})
				stats = s.(interface{ Stats() (int, int) })
				if _, err := s.Send(context.Background(), "warm-up", tio); err != nil {
					b.Fatal(err)
				}
			}
			var enc, sent int
			var cpu time.Duration
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if i%10 == 0 {
					b.StopTimer()
					fresh()
					b.StartTimer()
				}
				c0 := cpuTime()
				if _, err := s.Send(context.Background(), "hello", tio); err != nil {
					b.Fatal(err)
				}
				cpu += cpuTime() - c0
				e, st := stats.Stats()
				enc += e
				sent += st
			}
			b.ReportMetric(float64(cpu)/float64(b.N)/1000, "cpu_us/turn")
			b.ReportMetric(float64(enc)/float64(b.N), "encoded_B/req")
			b.ReportMetric(float64(sent)/float64(b.N), "sent_B/req")
		})
	}
}

// cpuTime is the process's user+system CPU time.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
