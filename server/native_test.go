package server

import (
	"bufio"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"

	"github.com/warren-dev/warren/protocol"
)

func TestNativeCall(t *testing.T) {
	ts := startServer(t, nil)
	c := dialClient(t, ts.path)
	ctx := context.Background()
	res, err := c.Call(ctx, "greet", map[string]any{"name": "bob", "times": 3})
	if err != nil || res["greeting"] != "hello bob x3" {
		t.Fatalf("Call = %v, %v", res, err)
	}
	res, err = c.Call(ctx, "echo", map[string]any{"n": -5, "big": uint64(1 << 60), "f": 2.5, "nested": map[string]any{"l": []any{"a", nil}}})
	if err != nil {
		t.Fatal(err)
	}
	if res["n"] != int64(-5) || res["big"] != uint64(1<<60) || res["f"] != 2.5 || res["nested"].(map[string]any)["l"].([]any)[0] != "a" {
		t.Fatalf("echo = %#v", res)
	}
	if res, err := c.Call(ctx, "nil", nil); err != nil || len(res) != 0 {
		t.Fatalf("nil result = %v, %v", res, err)
	}
	errCases := []struct {
		method  string
		params  map[string]any
		code    int
		mention string
	}{
		{"nope", nil, 4, "unknown method: nope"},
		{"greet", nil, 2, `missing required param "name"`},
		{"greet", map[string]any{"name": true}, 2, `param "name" must be a string, got a boolean`},
		{"greet", map[string]any{"name": "x", "times": "3"}, 2, `param "times" must be an integer`},
		{"fail", nil, 3, "disk on fire"},
		{"panic", nil, 3, "panicked"},
		{"badresult", nil, 3, "cannot encode the reply"},
	}
	for _, ec := range errCases {
		_, err := c.Call(ctx, ec.method, ec.params)
		if pe := wantCode(t, err, ec.code); !strings.Contains(pe.Message, ec.mention) {
			t.Errorf("%s: message %q does not mention %q", ec.method, pe.Message, ec.mention)
		}
	}
	// The connection survived every error.
	if _, err := c.Call(ctx, "trivial", nil); err != nil {
		t.Fatal(err)
	}
}

func TestNativePipelinedOutOfOrder(t *testing.T) {
	ts := startServer(t, nil)
	conn := dialRaw(t, ts.path)
	r := bufio.NewReader(conn)
	writeNative(t, conn, &protocol.Request{ID: int64(1), Method: "wait", Params: protocol.Params{"tag": "first"}})
	if tag := <-ts.fake.started; tag != "first" {
		t.Fatalf("started %q", tag)
	}
	writeNative(t, conn, &protocol.Request{ID: "two", Method: "greet", Params: protocol.Params{"name": "x"}})
	writeNative(t, conn, &protocol.Request{ID: int64(3), Method: "trivial"})
	// The later requests are answered while the first is still running.
	got := map[any]bool{}
	for i := 0; i < 2; i++ {
		f := readNative(t, r)
		if f.Kind != protocol.KindResult {
			t.Fatalf("frame %+v", f)
		}
		got[f.ID] = true
	}
	if !got["two"] || !got[int64(3)] {
		t.Fatalf("answered %v before the first request", got)
	}
	close(ts.fake.release)
	f := readNative(t, r)
	if f.ID != int64(1) || f.Result.(map[string]any)["tag"] != "first" {
		t.Fatalf("first answered with %+v", f)
	}
}

func TestNativeStreaming(t *testing.T) {
	ts := startServer(t, nil)
	c := dialClient(t, ts.path)
	ctx := context.Background()
	var got []string
	err := c.Stream(ctx, "stream", map[string]any{"n": 3}, func(f protocol.Frame) error {
		switch f.Kind {
		case protocol.KindChunk:
			got = append(got, f.Chunk)
		case protocol.KindEvent:
			got = append(got, fmt.Sprintf("event:%v", f.Event["seq"]))
		default:
			t.Errorf("unexpected frame %+v", f)
		}
		return nil
	})
	if err != nil || strings.Join(got, ",") != "c0,c1,c2,event:3" {
		t.Fatalf("Stream = %v, %v", got, err)
	}
	got = nil
	err = c.Stream(ctx, "streamfail", nil, func(f protocol.Frame) error { got = append(got, f.Chunk); return nil })
	wantCode(t, err, protocol.CodeNotFound)
	if strings.Join(got, ",") != "partial" {
		t.Fatalf("frames before the error: %v", got)
	}

	// Raw: every stream frame carries the request id, then done.
	conn := dialRaw(t, ts.path)
	r := bufio.NewReader(conn)
	writeNative(t, conn, &protocol.Request{ID: "s1", Method: "stream", Params: protocol.Params{"n": 1}})
	kinds := []protocol.FrameKind{protocol.KindChunk, protocol.KindEvent, protocol.KindDone}
	for _, k := range kinds {
		f := readNative(t, r)
		if f.Kind != k || f.ID != "s1" {
			t.Fatalf("frame %+v, want %v with id s1", f, k)
		}
	}
	// Stream errors on the native framing carry the id too.
	writeNative(t, conn, &protocol.Request{ID: "s2", Method: "streamfail"})
	readNative(t, r)
	if f := readNative(t, r); f.Kind != protocol.KindError || f.ID != "s2" || f.Error.Code != 1 {
		t.Fatalf("stream error frame %+v", f)
	}
}

func TestNativeCancelFrame(t *testing.T) {
	ts := startServer(t, nil)
	c := dialClient(t, ts.path)
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() {
		_, err := c.Call(ctx, "block", map[string]any{"tag": "b1"})
		errc <- err
	}()
	if tag := <-ts.fake.started; tag != "b1" {
		t.Fatal(tag)
	}
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("Call after cancel = %v", err)
	}
	// The cancel frame reached the server and cancelled the handler.
	if tag := <-ts.fake.ctxDone; tag != "b1" {
		t.Fatal(tag)
	}
	// An aborted stream cancels its request too.
	stop := errors.New("enough")
	err := c.Stream(context.Background(), "stream", map[string]any{"n": 2}, func(protocol.Frame) error { return stop })
	if !errors.Is(err, stop) {
		t.Fatalf("Stream = %v", err)
	}
	if _, err := c.Call(context.Background(), "trivial", nil); err != nil {
		t.Fatal(err)
	}
}

func TestHundredConnectionsHundredRequests(t *testing.T) {
	ts := startServer(t, nil)
	var wg sync.WaitGroup
	errs := make(chan error, 200)
	for i := 0; i < 100; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			c, err := protocol.Dial(context.Background(), ts.path)
			if err != nil {
				errs <- err
				return
			}
			defer c.Close()
			// 100 requests, ten at a time in flight on the one connection.
			var inner sync.WaitGroup
			for g := 0; g < 10; g++ {
				inner.Add(1)
				go func(g int) {
					defer inner.Done()
					for j := 0; j < 10; j++ {
						want := fmt.Sprintf("%d-%d-%d", i, g, j)
						res, err := c.Call(context.Background(), "echo", map[string]any{"v": want})
						if err != nil {
							errs <- err
							return
						}
						if res["v"] != want {
							errs <- fmt.Errorf("request %s answered with %v", want, res)
							return
						}
					}
				}(g)
			}
			inner.Wait()
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	// JSON: 100 concurrent connections x 10 sequential requests each.
	var jwg sync.WaitGroup
	jerrs := make(chan error, 100)
	for i := 0; i < 100; i++ {
		jwg.Add(1)
		go func(i int) {
			defer jwg.Done()
			for j := 0; j < 10; j++ {
				want := fmt.Sprintf("%d-%d", i, j)
				res, err := protocol.CallJSON(context.Background(), ts.path, "echo", map[string]any{"v": want})
				if err != nil || res["v"] != want {
					jerrs <- fmt.Errorf("JSON %s: %v %v", want, res, err)
					return
				}
			}
		}(i)
	}
	jwg.Wait()
	close(jerrs)
	for err := range jerrs {
		t.Error(err)
	}
}

func TestNativeOversizedFrame(t *testing.T) {
	for _, tc := range []struct {
		name  string
		limit int
		size  uint32
	}{
		{"default 16 MiB limit", 0, protocol.MaxFrame + 1},
		{"configured limit", 1024, 1025},
		{"max uint32", 0, 0xffffffff},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ts := startServer(t, func(c *Config) { c.MaxFrame = tc.limit })
			conn := dialRaw(t, ts.path)
			r := bufio.NewReader(conn)
			// A normal request first, so the oversized frame is not the
			// first on the connection.
			writeNative(t, conn, &protocol.Request{ID: int64(1), Method: "trivial"})
			readNative(t, r)
			var hdr [4]byte
			binary.BigEndian.PutUint32(hdr[:], tc.size)
			if _, err := conn.Write(hdr[:]); err != nil {
				t.Fatal(err)
			}
			f := readNative(t, r)
			if f.Kind != protocol.KindError || f.ID != nil || f.Error.Code != 2 || !strings.Contains(f.Error.Message, "exceeds") {
				t.Fatalf("frame %+v", f)
			}
			wantEOF(t, r)
		})
	}
}

func TestNativeMalformedFramesKeepConnection(t *testing.T) {
	ts := startServer(t, nil)
	conn := dialRaw(t, ts.path)
	r := bufio.NewReader(conn)
	bad := map[string][]byte{
		"not msgpack":     {0xc1, 0xc1},
		"array payload":   {0x92, 0x01, 0x02},
		"truncated map":   {0x82, 0xa2, 'i', 'd'},
		"huge map header": {0xdf, 0xff, 0xff, 0xff, 0xff},
		"empty frame":     {},
		"method is int":   {0x82, 0xa2, 'i', 'd', 0x07, 0xa6, 'm', 'e', 't', 'h', 'o', 'd', 0x05},
	}
	for name, payload := range bad {
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], uint32(len(payload)))
		if _, err := conn.Write(append(hdr[:], payload...)); err != nil {
			t.Fatal(err)
		}
		f := readNative(t, r)
		if f.Kind != protocol.KindError || f.Error.Code != 2 {
			t.Fatalf("%s: frame %+v", name, f)
		}
		if name == "method is int" && f.ID != int64(7) {
			t.Errorf("%s: id %v not echoed", name, f.ID)
		}
	}
	// Params of the wrong type.
	writeNative(t, conn, &protocol.Request{ID: int64(9), Method: "greet", Params: protocol.Params{"name": []any{1}}})
	if f := readNative(t, r); f.Kind != protocol.KindError || f.Error.Code != 2 || f.ID != int64(9) {
		t.Fatalf("wrong type: %+v", f)
	}
	writeNative(t, conn, &protocol.Request{ID: int64(10), Method: "trivial"})
	if f := readNative(t, r); f.Kind != protocol.KindResult || f.ID != int64(10) {
		t.Fatalf("after malformed frames: %+v", f)
	}
}

func TestNativeTruncatedFrames(t *testing.T) {
	ts := startServer(t, nil)
	frame, _ := protocol.EncodeNativeRequest(&protocol.Request{ID: int64(1), Method: "trivial"})
	for cut := 1; cut < len(frame); cut++ {
		conn := dialRaw(t, ts.path)
		if _, err := conn.Write(frame[:cut]); err != nil {
			t.Fatal(err)
		}
		conn.CloseWrite()
		// The server closes without a reply and without crashing.
		wantEOF(t, conn)
	}
	c := dialClient(t, ts.path)
	if _, err := c.Call(context.Background(), "trivial", nil); err != nil {
		t.Fatal(err)
	}
}

func TestNativeInflightLimit(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxInflight = 2 })
	conn := dialRaw(t, ts.path)
	r := bufio.NewReader(conn)
	writeNative(t, conn, &protocol.Request{ID: int64(1), Method: "block", Params: protocol.Params{"tag": "1"}})
	writeNative(t, conn, &protocol.Request{ID: int64(2), Method: "block", Params: protocol.Params{"tag": "2"}})
	<-ts.fake.started
	<-ts.fake.started
	writeNative(t, conn, &protocol.Request{ID: int64(3), Method: "trivial"})
	f := readNative(t, r)
	if f.Kind != protocol.KindError || f.ID != int64(3) || f.Error.Code != protocol.CodeUnavailable || !strings.Contains(f.Error.Message, "limit 2") {
		t.Fatalf("frame %+v", f)
	}
	// Cancel frames still get through and free a slot.
	writeNative(t, conn, &protocol.Request{ID: int64(1), Cancel: true})
	if f := readNative(t, r); f.ID != int64(1) || f.Kind != protocol.KindError || f.Error.Code != protocol.CodeUnavailable {
		t.Fatalf("cancelled request ended with %+v", f)
	}
	writeNative(t, conn, &protocol.Request{ID: int64(4), Method: "trivial"})
	if f := readNative(t, r); f.ID != int64(4) || f.Kind != protocol.KindResult {
		t.Fatalf("after a slot freed: %+v", f)
	}
}

func TestStreamAfterReturnIsRefused(t *testing.T) {
	path := shortDir(t) + "/s"
	kept := make(chan Stream, 2)
	h := HandlerFunc(func(ctx context.Context, req *protocol.Request, out Stream) (any, error) {
		kept <- out
		return nil, nil
	})
	s := New(Config{SocketPath: path, StreamingMethods: map[string]bool{"s": true}}, h, nil)
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	go s.Serve(context.Background())
	defer s.Shutdown(context.Background())
	c := dialClient(t, path)
	if err := c.Stream(context.Background(), "s", nil, func(protocol.Frame) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if _, err := protocol.CallJSON(context.Background(), path, "s", nil); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < 2; i++ {
		out := <-kept
		if err := out.Chunk("late"); !errors.Is(err, ErrStreamEnded) {
			t.Fatalf("Chunk after return = %v", err)
		}
		if err := out.Event(map[string]any{}); !errors.Is(err, ErrStreamEnded) {
			t.Fatalf("Event after return = %v", err)
		}
	}
}
