package sse

import (
	"errors"
	"io"
	"strings"
	"testing"
)

type ev struct{ typ, data string }

func readAll(t *testing.T, in string, max int) ([]ev, *Reader, error) {
	t.Helper()
	r := NewReader(strings.NewReader(in), max)
	var out []ev
	for {
		e, err := r.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return out, r, nil
			}
			return out, r, err
		}
		out = append(out, ev{e.Type, string(e.Data)})
	}
}

func TestEventsCommentsAndMultiLineData(t *testing.T) {
	in := ": OPENROUTER PROCESSING\n\n" +
		"data: {\"a\":1}\n\n" +
		"event: content_block_delta\r\ndata: {\"b\":2}\r\n\r\n" +
		"data: line1\ndata: line2\n\n" +
		"data:nospace\n\n" +
		"id: 7\nretry: 10\n\n" +
		"garbage line\n" +
		"data: [DONE]\n\n"
	got, r, err := readAll(t, in, 1024)
	if err != nil {
		t.Fatal(err)
	}
	want := []ev{{"", `{"a":1}`}, {"content_block_delta", `{"b":2}`}, {"", "line1\nline2"}, {"", "nospace"}, {"", "[DONE]"}}
	if len(got) != len(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("event %d: got %q, want %q", i, got[i], want[i])
		}
	}
	if r.Comments != 1 || r.Other != 1 {
		t.Errorf("comments %d other %d, want 1 and 1", r.Comments, r.Other)
	}
}

func TestEventTypeDoesNotLeakIntoNextEvent(t *testing.T) {
	got, _, err := readAll(t, "event: ping\ndata: {}\n\ndata: x\n\n", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[0].typ != "ping" || got[1].typ != "" {
		t.Fatalf("got %q", got)
	}
}

func TestUnterminatedLastEventIsReturned(t *testing.T) {
	got, _, err := readAll(t, "data: a\n\ndata: [DONE]", 100)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 2 || got[1].data != "[DONE]" {
		t.Fatalf("got %q", got)
	}
}

func TestLineTooLongIsAnErrorNotAnAllocation(t *testing.T) {
	// An endless line: the reader must stop at the limit.
	src := io.MultiReader(strings.NewReader("data: "), endless{})
	r := NewReader(src, 1<<20)
	_, err := r.Next()
	if !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("err = %v, want ErrLineTooLong", err)
	}
	if cap(r.line) > 3<<20 {
		t.Fatalf("buffered %d bytes for a 1 MiB limit", cap(r.line))
	}
}

func TestLineAtTheLimitIsAccepted(t *testing.T) {
	data := strings.Repeat("x", 100-len("data: "))
	got, _, err := readAll(t, "data: "+data+"\r\n\r\n", 100)
	if err != nil || len(got) != 1 || got[0].data != data {
		t.Fatalf("got %d events, err %v", len(got), err)
	}
	_, _, err = readAll(t, "data: "+data+"x\n\n", 100)
	if !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("one byte over: err = %v", err)
	}
	_, _, err = readAll(t, "data: "+data+"x", 100)
	if !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("one byte over at EOF: err = %v", err)
	}
}

type endless struct{}

func (endless) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 'a'
	}
	return len(p), nil
}

func BenchmarkNext(b *testing.B) {
	line := "event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"hello\"}}\n\n"
	in := strings.Repeat(line, 1000)
	b.ReportAllocs()
	b.SetBytes(int64(len(in)))
	for i := 0; i < b.N; i++ {
		r := NewReader(strings.NewReader(in), 1<<20)
		for {
			if _, err := r.Next(); err != nil {
				break
			}
		}
	}
}

func TestResetReadsANewStream(t *testing.T) {
	r := NewReader(strings.NewReader(": c\ndata: one\n\n"), 100)
	if e, err := r.Next(); err != nil || string(e.Data) != "one" || r.Comments != 1 {
		t.Fatalf("first stream: %q %v", e.Data, err)
	}
	r.Reset(strings.NewReader("event: x\ndata: two\n\n"))
	if e, err := r.Next(); err != nil || string(e.Data) != "two" || e.Type != "x" || r.Comments != 0 {
		t.Fatalf("after Reset: %q %v comments %d", e.Data, err, r.Comments)
	}
}

func TestReleaseDropsLongLineBuffers(t *testing.T) {
	long := strings.Repeat("x", 3<<20)
	r := NewReader(strings.NewReader("data: "+long+"\n\n"), 4<<20)
	ev, err := r.Next()
	if err != nil || len(ev.Data) != len(long) {
		t.Fatalf("%d bytes, %v", len(ev.Data), err)
	}
	if cap(r.line) <= keepBuffer && cap(r.data) <= keepBuffer {
		t.Fatal("the long line grew no buffer")
	}
	r.Release()
	if cap(r.line) > keepBuffer || cap(r.data) > keepBuffer {
		t.Fatalf("kept %d and %d bytes", cap(r.line), cap(r.data))
	}
	r.Reset(strings.NewReader("data: again\n\n"))
	if ev, err := r.Next(); err != nil || string(ev.Data) != "again" {
		t.Fatalf("after Release: %q %v", ev.Data, err)
	}
}
