package server

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/warren-dev/warren/protocol"
)

// wantClosed reads c until the server closes it (EOF or reset); a bound of
// 20 s turns a connection left open into a failure, not a hang.
func wantClosed(t *testing.T, c net.Conn, what string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
	_, err := io.Copy(io.Discard, c)
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("%s: not closed by the server: %v", what, err)
	}
}

// wantOpen checks that the server has not closed c: a closed connection
// reads EOF at once, an open one times out.
func wantOpen(t *testing.T, c net.Conn, what string) {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(50 * time.Millisecond))
	_, err := c.Read(make([]byte, 1))
	if !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("%s: want it still open, read gave %v", what, err)
	}
}

// TestSilentConnectionsHoldNoSlot: connections that have sent nothing do
// not count against MaxConns; past MaxPending the oldest of them is closed
// and the newest stay open, while a real client is served.
func TestSilentConnectionsHoldNoSlot(t *testing.T) {
	ts := startServer(t, func(c *Config) {
		c.MaxConns = 2
		c.MaxPending = 4
		c.FirstByteTimeout = -1 // only eviction closes them here
		c.FirstRequestTimeout = -1
	})
	var silent []net.Conn
	for i := 0; i < 10; i++ {
		silent = append(silent, dialRaw(t, ts.path))
	}
	// The client's own connection is the 11th pending one: it evicts one
	// more before its request arrives.
	if _, err := dialClient(t, ts.path).Call(context.Background(), "trivial", nil); err != nil {
		t.Fatalf("a client is locked out by silent connections: %v", err)
	}
	for i, c := range silent[:7] {
		wantClosed(t, c, "old silent connection "+string(rune('0'+i)))
	}
	for i, c := range silent[7:] {
		wantOpen(t, c, "newest silent connection "+string(rune('7'+i)))
	}
	if !strings.Contains(ts.logs.String(), "closing the oldest") {
		t.Error("evictions not logged")
	}
}

// TestFirstByteDeadline: a connection that sends nothing is closed after
// FirstByteTimeout, not after the (hour-long) idle timeout.
func TestFirstByteDeadline(t *testing.T) {
	ts := startServer(t, func(c *Config) { c.FirstByteTimeout = 50 * time.Millisecond })
	wantClosed(t, dialRaw(t, ts.path), "silent connection")
}

// TestFirstRequestDeadlineStopsSlowloris: a client dribbling its first
// request byte by byte is cut off at FirstRequestTimeout although every
// byte comes well within the read and idle timeouts.
func TestFirstRequestDeadlineStopsSlowloris(t *testing.T) {
	ts := startServer(t, func(c *Config) {
		c.FirstRequestTimeout = 200 * time.Millisecond
		c.ReadTimeout = time.Hour
	})
	for _, framing := range []string{"json", "native"} {
		conn := dialRaw(t, ts.path)
		first := []byte("{")
		if framing == "native" {
			first = []byte{0, 0, 0, 100} // a header promising 100 bytes
		}
		if _, err := conn.Write(first); err != nil {
			t.Fatal(err)
		}
		stop := make(chan struct{})
		dribbled := make(chan struct{})
		go func() {
			defer close(dribbled)
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for {
				select {
				case <-stop:
					return
				case <-tick.C:
					if _, err := conn.Write([]byte(" ")); err != nil {
						return // the server closed it
					}
				}
			}
		}()
		r := bufio.NewReader(conn)
		_ = conn.SetReadDeadline(time.Now().Add(20 * time.Second))
		var msg string
		if framing == "json" {
			lines := readJSONLines(t, r)
			if len(lines) != 1 {
				t.Fatalf("json: %v", lines)
			}
			e, _ := lines[0]["error"].(map[string]any)
			msg, _ = e["message"].(string)
		} else {
			f := readNative(t, r)
			if f.Kind != protocol.KindError {
				t.Fatalf("native: %+v", f)
			}
			msg = f.Error.Message
		}
		if !strings.Contains(msg, "of connecting") {
			t.Fatalf("%s: message %q does not name the first-request bound", framing, msg)
		}
		close(stop)
		<-dribbled
		conn.Close()
	}
}

// TestControlMethodsUseReserve: with every slot taken, a connection whose
// first request is a control method is still served (up to the reserve);
// any other method is refused with code 6.
func TestControlMethodsUseReserve(t *testing.T) {
	ts := startServer(t, func(c *Config) {
		c.MaxConns = 1
		c.ControlMethods = map[string]bool{"echo": true, "wait": true}
		c.ControlReserve = 1
	})
	ctx := context.Background()
	hold := dialClient(t, ts.path)
	if _, err := hold.Call(ctx, "trivial", nil); err != nil {
		t.Fatal(err)
	}
	_, err := dialClient(t, ts.path).Call(ctx, "trivial", nil)
	wantCode(t, err, protocol.CodeUnavailable)
	// A JSON connection releases its place before the client sees EOF.
	lines := jsonExchange(t, ts.path, []byte(`{"id":1,"method":"echo","params":{"v":"y"}}`))
	if len(lines) != 1 || lines[0]["result"] == nil {
		t.Fatalf("JSON control method with every slot taken: %v", lines)
	}
	// The reserve bounds the control requests in flight: while one holds
	// the place, another is refused.
	busy := dialRaw(t, ts.path)
	writeNative(t, busy, &protocol.Request{ID: int64(1), Method: "wait", Params: map[string]any{"tag": "w"}})
	if tag := <-ts.fake.started; tag != "w" {
		t.Fatalf("started %q", tag)
	}
	_, err = dialClient(t, ts.path).Call(ctx, "echo", nil)
	wantCode(t, err, protocol.CodeUnavailable)
	// A connection on a reserved place serves its one request: a second
	// one sent before the answer is refused, saying why.
	writeNative(t, busy, &protocol.Request{ID: int64(2), Method: "echo"})
	br := bufio.NewReader(busy)
	_ = busy.SetReadDeadline(time.Now().Add(20 * time.Second))
	f := readNative(t, br)
	if f.Kind != protocol.KindError || f.Error.Code != protocol.CodeUnavailable || !strings.Contains(f.Error.Message, "one request") {
		t.Fatalf("second request on a reserved place: %+v", f)
	}
	close(ts.fake.release)
	if f := readNative(t, br); f.Kind != protocol.KindResult || fmt.Sprint(f.Result) != "map[tag:w]" {
		t.Fatalf("the reserved place's request: %+v", f)
	}
	wantClosed(t, busy, "a connection whose reserved-place request was answered")
}

// TestAnsweredControlConnectionsHoldNoReservedPlace (D4): connections
// that got a control request answered on a reserved place and are left
// open by their clients hold no place: the server closes each once it is
// answered, so any number of them, one after the other, are served, and
// the next control request still is.
func TestAnsweredControlConnectionsHoldNoReservedPlace(t *testing.T) {
	ts := startServer(t, func(c *Config) {
		c.MaxConns = 2
		c.ControlMethods = map[string]bool{"echo": true}
		c.ControlReserve = 1
		c.IdleTimeout = time.Hour
	})
	ctx := context.Background()
	for i := 0; i < 2; i++ {
		if _, err := dialClient(t, ts.path).Call(ctx, "echo", nil); err != nil {
			t.Fatalf("slot %d: %v", i, err)
		}
	}
	var open []*net.UnixConn
	for i := 0; i < 20; i++ {
		c := dialRaw(t, ts.path)
		open = append(open, c)
		writeNative(t, c, &protocol.Request{ID: int64(i), Method: "echo", Params: map[string]any{"i": int64(i)}})
		_ = c.SetReadDeadline(time.Now().Add(20 * time.Second))
		f := readNative(t, bufio.NewReader(c))
		if f.Kind != protocol.KindResult {
			t.Fatalf("control connection %d past the slots (its predecessors answered and left open): %+v", i, f)
		}
	}
	for i, c := range open {
		wantClosed(t, c, fmt.Sprintf("answered control connection %d", i))
	}
	if _, err := dialClient(t, ts.path).Call(ctx, "echo", nil); err != nil {
		t.Fatalf("control request after the flood: %v", err)
	}
	_, err := dialClient(t, ts.path).Call(ctx, "trivial", nil)
	wantCode(t, err, protocol.CodeUnavailable)
}
