package server

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/warren-dev/warren/protocol"
)

// FuzzServerInput sends arbitrary bytes on a real connection (then
// half-closes) and checks that the server answers or closes, never panics,
// and still serves a well-formed request afterwards.
func FuzzServerInput(f *testing.F) {
	native, _ := protocol.EncodeNativeRequest(&protocol.Request{ID: int64(1), Method: "greet", Params: protocol.Params{"name": "x"}})
	f.Add(native)
	f.Add(append(native, native...))
	f.Add([]byte(`{"id":1,"method":"stream","params":{"n":2}}`))
	f.Add([]byte(`{"id":1,"method":"greet","params":{"name":[]}}`))
	f.Add([]byte("\x00\x00\x00\x05\xdf\xff\xff\xff\xff"))
	f.Add([]byte("\x00\xff\xff\xff"))
	f.Add([]byte(" [1]"))
	f.Add([]byte("hello"))
	f.Fuzz(func(t *testing.T, data []byte) {
		ts := startServer(t, func(c *Config) {
			c.ReadTimeout = 500 * time.Millisecond
			c.MaxFrame = 1 << 16
		})
		conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: ts.path, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		_, _ = conn.Write(data)
		_ = conn.CloseWrite()
		_, _ = io.Copy(io.Discard, conn)
		conn.Close()
		if _, err := protocol.CallJSON(context.Background(), ts.path, "trivial", nil); err != nil {
			t.Fatalf("server stopped serving after input %q: %v", data, err)
		}
	})
}
