package tests

import (
	"bufio"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/warren-dev/warren/protocol"
	"github.com/warren-dev/warren/server"
)

// TestSocketUnavailableInflightBound fills one native connection with
// DefaultMaxInflight long-lived requests (event subscriptions): the next
// request on it is answered at once with code 6, the subscriptions go on,
// and other connections are served.
func TestSocketUnavailableInflightBound(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode procMode) {
		t.Parallel()
		d := startTestDaemon(t, mode)
		conn, err := net.Dial("unix", d.Sock)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(time.Minute))
		var batch []byte
		for i := 0; i < server.DefaultMaxInflight; i++ {
			f, err := protocol.EncodeNativeRequest(&protocol.Request{ID: int64(i), Method: "events.subscribe"})
			if err != nil {
				t.Fatal(err)
			}
			batch = append(batch, f...)
		}
		over, _ := protocol.EncodeNativeRequest(&protocol.Request{ID: "over", Method: "daemon.status"})
		if _, err := conn.Write(append(batch, over...)); err != nil {
			t.Fatal(err)
		}
		r := bufio.NewReader(conn)
		payload, err := protocol.ReadNativeFrame(r, protocol.MaxFrame)
		if err != nil {
			t.Fatal(err)
		}
		f, err := protocol.DecodeNativeFrame(payload)
		if err != nil {
			t.Fatal(err)
		}
		if f.Kind != protocol.KindError || f.Error.Code != protocol.CodeUnavailable || fmt.Sprint(f.ID) != "over" {
			t.Fatalf("request over the in-flight bound: %+v, want code 6 for id over", f)
		}
		// The subscriptions are live: an event reaches them.
		d.createAgent("wake", "inproc", "echo", "")
		payload, err = protocol.ReadNativeFrame(r, protocol.MaxFrame)
		if err != nil {
			t.Fatal(err)
		}
		if f, err = protocol.DecodeNativeFrame(payload); err != nil || f.Kind != protocol.KindEvent {
			t.Fatalf("subscription frame: %+v, %v", f, err)
		}
		stillServing(t, d, "an in-flight refusal")
	})
}

// TestSocketUnavailableConnectionBound opens DefaultMaxConns connections:
// one more is refused with a code-6 error line and closed; after the
// others close, the daemon serves again.
func TestSocketUnavailableConnectionBound(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode procMode) {
		t.Parallel()
		d := startTestDaemon(t, mode)
		var conns []net.Conn
		defer func() {
			for _, c := range conns {
				c.Close()
			}
		}()
		// Each held connection is proven accepted (and counted) by a reply
		// on it: a native request whose answer we read, keeping it open.
		for i := 0; i < server.DefaultMaxConns; i++ {
			c, err := net.Dial("unix", d.Sock)
			if err != nil {
				t.Fatalf("connection %d: %v", i, err)
			}
			conns = append(conns, c)
			_ = c.SetDeadline(time.Now().Add(time.Minute))
			req, _ := protocol.EncodeNativeRequest(&protocol.Request{ID: int64(i), Method: "daemon.status"})
			if _, err := c.Write(req); err != nil {
				t.Fatal(err)
			}
			if _, err := protocol.ReadNativeFrame(bufio.NewReader(c), protocol.MaxFrame); err != nil {
				t.Fatalf("connection %d: %v", i, err)
			}
		}
		_, err := protocol.CallJSON(procCtx(t), d.Sock, "agent.list", nil)
		wantCode(t, fmt.Sprintf("connection %d", server.DefaultMaxConns+1), err, protocol.CodeUnavailable)
		for _, c := range conns {
			c.Close()
		}
		conns = nil
		// The slots free as the daemon notices the closes: poll with a bound.
		deadline := time.Now().Add(30 * time.Second)
		for {
			_, err := protocol.CallJSON(procCtx(t), d.Sock, "agent.list", nil)
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the daemon does not serve after the connections closed: %v", err)
			}
			time.Sleep(5 * time.Millisecond) // no signal for "the daemon saw the close"
		}
	})
}
