package server

import (
	"bufio"
	"context"
	"errors"
	"io"
	"math/rand"
	"net"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/warren-dev/warren/protocol"
)

func TestUnknownFramingAndRandomBytes(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.ReadTimeout = 2 * time.Second })
	wantJSONError(t, jsonExchange(t, ts.path, []byte("GET / HTTP/1.0\r\n\r\n")), nil, 2, "unrecognised framing: first byte 0x47")
	rng := rand.New(rand.NewSource(1))
	for i := 0; i < 200; i++ {
		buf := make([]byte, 1+rng.Intn(300))
		rng.Read(buf)
		switch i % 3 {
		case 0:
			buf[0] = 0 // native framing, garbage after
		case 1:
			buf[0] = '{' // JSON framing, garbage after
		}
		conn := dialRaw(t, ts.path)
		if _, err := conn.Write(buf); err != nil {
			t.Fatal(err)
		}
		conn.CloseWrite()
		// Whatever the reply, the server ends the exchange.
		if _, err := bufio.NewReader(conn).ReadString(0xff); err == nil {
			continue
		}
		conn.Close()
	}
	c := dialClient(t, ts.path)
	if _, err := c.Call(context.Background(), "trivial", nil); err != nil {
		t.Fatalf("server stopped serving after random input: %v", err)
	}
}

func TestPeerUIDRefused(t *testing.T) {
	var mu sync.Mutex
	var seen []int
	ts := startServer(t, func(c *Config) {
		c.AllowUID = func(uid int) bool {
			mu.Lock()
			seen = append(seen, uid)
			mu.Unlock()
			return false
		}
	})
	lines := jsonExchange(t, ts.path, []byte(`{"id":1,"method":"trivial"}`))
	wantJSONError(t, lines, nil, 2, "permission denied: peer uid")
	c := dialClient(t, ts.path)
	_, err := c.Call(context.Background(), "trivial", nil)
	if pe := wantCode(t, err, protocol.CodeInvalid); !strings.Contains(pe.Message, "permission denied") {
		t.Fatalf("message %q", pe.Message)
	}
	if !errors.Is(err, protocol.ErrClientClosed) {
		t.Errorf("refusal should close the client: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(seen) != 2 || seen[0] != os.Getuid() {
		t.Fatalf("AllowUID saw %v, want our uid %d twice", seen, os.Getuid())
	}
	if !strings.Contains(ts.logs.String(), "refusing connection from another user") {
		t.Error("refusal not logged")
	}
}

func TestConnectionLimit(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxConns = 2 })
	ctx := context.Background()
	a, b := dialClient(t, ts.path), dialClient(t, ts.path)
	for _, c := range []*protocol.Client{a, b} {
		if _, err := c.Call(ctx, "trivial", nil); err != nil {
			t.Fatal(err)
		}
	}
	over := dialClient(t, ts.path)
	_, err := over.Call(ctx, "trivial", nil)
	if pe := wantCode(t, err, protocol.CodeUnavailable); !strings.Contains(pe.Message, "too many connections") {
		t.Fatalf("message %q", pe.Message)
	}
	lines := jsonExchange(t, ts.path, []byte(`{"id":1,"method":"trivial"}`))
	wantJSONError(t, lines, nil, 6, "limit 2")
	// The admitted connections are unaffected.
	if _, err := a.Call(ctx, "trivial", nil); err != nil {
		t.Fatal(err)
	}
}

func TestConnectionFloodIsBounded(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.MaxConns = 1 })
	hold := dialClient(t, ts.path)
	if _, err := hold.Call(context.Background(), "trivial", nil); err != nil {
		t.Fatal(err)
	}
	// Many silent connections over the limit: each is answered or closed,
	// never left hanging.
	var conns []net.Conn
	for i := 0; i < 100; i++ {
		conns = append(conns, dialRaw(t, ts.path))
	}
	for _, c := range conns {
		c.(*net.UnixConn).CloseWrite()
		var buf [512]byte
		for {
			if _, err := c.Read(buf[:]); err != nil {
				break
			}
		}
	}
	if _, err := hold.Call(context.Background(), "trivial", nil); err != nil {
		t.Fatal(err)
	}
}

func TestIdleTimeoutClosesSilentConnection(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.IdleTimeout = 50 * time.Millisecond })
	conn := dialRaw(t, ts.path)
	r := bufio.NewReader(conn)
	writeNative(t, conn, &protocol.Request{ID: int64(1), Method: "trivial"})
	if f := readNative(t, r); f.Kind != protocol.KindResult {
		t.Fatal(f)
	}
	// Send nothing more: the server says why and closes.
	f := readNative(t, r)
	if f.Kind != protocol.KindError || f.ID != nil || f.Error.Code != protocol.CodeUnavailable || !strings.Contains(f.Error.Message, "without requests") {
		t.Fatalf("frame %+v", f)
	}
	wantEOF(t, r)
}

func TestIdleTimeoutSparesRequestsInFlight(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.IdleTimeout = 20 * time.Millisecond })
	conn := dialRaw(t, ts.path)
	r := bufio.NewReader(conn)
	writeNative(t, conn, &protocol.Request{ID: int64(1), Method: "wait"})
	<-ts.fake.started
	// Several idle periods pass while the request runs: the blocked read
	// below is released only by the idle close, which must come after the
	// reply.
	timer := time.NewTimer(100 * time.Millisecond)
	<-timer.C
	close(ts.fake.release)
	if f := readNative(t, r); f.Kind != protocol.KindResult || f.ID != int64(1) {
		t.Fatalf("in-flight request lost to the idle timeout: %+v", f)
	}
	if f := readNative(t, r); f.Kind != protocol.KindError || f.Error.Code != protocol.CodeUnavailable {
		t.Fatalf("frame %+v", f)
	}
	wantEOF(t, r)
}

func TestReadTimeout(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.ReadTimeout = 50 * time.Millisecond })
	// Native: a header promising more than is sent.
	conn := dialRaw(t, ts.path)
	if _, err := conn.Write([]byte{0, 0, 0, 10, 0x80}); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(conn)
	f := readNative(t, r)
	if f.Kind != protocol.KindError || f.Error.Code != 2 || !strings.Contains(f.Error.Message, "not received within") {
		t.Fatalf("frame %+v", f)
	}
	wantEOF(t, r)
	// JSON: a client that never half-closes.
	conn = dialRaw(t, ts.path)
	if _, err := conn.Write([]byte(`{"id":1,"method":"trivial"}`)); err != nil {
		t.Fatal(err)
	}
	wantJSONError(t, readJSONLines(t, conn), nil, 2, "half-close")
}

func TestWriteTimeoutDropsClientThatDoesNotRead(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.WriteTimeout = 50 * time.Millisecond })
	for _, framing := range []string{"json", "native"} {
		conn := dialRaw(t, ts.path)
		if framing == "json" {
			conn.Write([]byte(`{"id":1,"method":"flood"}`))
			conn.CloseWrite()
		} else {
			writeNative(t, conn, &protocol.Request{ID: int64(1), Method: "flood"})
		}
		// Never read: the handler's writes time out and it is told the
		// client is gone.
		if err := <-ts.fake.floodErr; !errors.Is(err, ErrClientGone) {
			t.Fatalf("%s: flood stopped with %v, want ErrClientGone", framing, err)
		}
	}
	if _, err := dialClient(t, ts.path).Call(context.Background(), "trivial", nil); err != nil {
		t.Fatal(err)
	}
}

// TestLongRandomInput is the long soak profile (WARREN_LONG=1): many
// connections of random bytes in both framings, then the server must still
// serve.
func TestLongRandomInput(t *testing.T) {
	n := 300
	if os.Getenv("WARREN_LONG") == "1" {
		n = 20000
	}
	ts := startServer(t, func(c *Config) { c.ReadTimeout = time.Second; c.MaxFrame = 1 << 16 })
	rng := rand.New(rand.NewSource(7))
	for i := 0; i < n; i++ {
		buf := make([]byte, 1+rng.Intn(2000))
		rng.Read(buf)
		if i%2 == 0 {
			buf[0] = 0
			// Often a plausible length, so payloads reach the decoder.
			if len(buf) >= 4 && i%4 == 0 {
				buf[1], buf[2], buf[3] = 0, byte((len(buf)-4)>>8), byte(len(buf)-4)
			}
		} else if i%3 == 0 {
			buf[0] = '{'
		}
		conn, err := net.Dial("unix", ts.path)
		if err != nil {
			t.Fatal(err)
		}
		conn.Write(buf)
		conn.(*net.UnixConn).CloseWrite()
		io.Copy(io.Discard, conn)
		conn.Close()
	}
	if _, err := dialClient(t, ts.path).Call(context.Background(), "trivial", nil); err != nil {
		t.Fatal(err)
	}
}
