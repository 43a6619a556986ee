package tests

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/vmihailenco/msgpack/v5"

	"github.com/warren-dev/warren/protocol"
)

// rawExchange writes body (from a goroutine: the daemon may close before
// reading it all), half-closes, and reads to EOF. A reset by the daemon
// (it closed with unread input) counts as a close.
func rawExchange(t testing.TB, sock string, body []byte, halfClose bool) []byte {
	t.Helper()
	conn, err := net.DialUnix("unix", nil, &net.UnixAddr{Name: sock, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Minute))
	go func() {
		_, _ = conn.Write(body)
		if halfClose {
			_ = conn.CloseWrite()
		}
	}()
	out, err := io.ReadAll(conn)
	if err != nil && !errors.Is(err, syscall.ECONNRESET) {
		t.Fatalf("reading the reply: %v (got %q)", err, out)
	}
	return out
}

// stillServing checks the daemon answers a fresh request on both framings.
func stillServing(t testing.TB, d *testDaemon, after string) {
	t.Helper()
	if _, err := protocol.CallJSON(procCtx(t), d.Sock, "agent.list", nil); err != nil {
		t.Fatalf("after %s the daemon no longer serves JSON: %v\n%s", after, err, d.Output())
	}
	d.dropClient()
	if _, err := d.Client().Call(procCtx(t), "daemon.status", nil); err != nil {
		t.Fatalf("after %s the daemon no longer serves msgpack: %v\n%s", after, err, d.Output())
	}
}

// jsonErrorCode decodes a one-line JSON error reply and returns its code.
func jsonErrorCode(t testing.TB, what string, raw []byte) float64 {
	t.Helper()
	line, _, _ := bytes.Cut(raw, []byte("\n"))
	var m struct {
		ID    any `json:"id"`
		Error *struct {
			Code    float64 `json:"code"`
			Message string  `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(line, &m); err != nil || m.Error == nil || m.Error.Message == "" {
		t.Fatalf("%s: reply %q is not a JSON error line", what, raw)
	}
	return m.Error.Code
}

// TestSocketMalformedJSON sends broken JSON-framing input: each gets a
// code-2 error line (or, for an empty body, a clean close) and the daemon
// keeps serving.
func TestSocketMalformedJSON(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode procMode) {
		t.Parallel()
		d := startTestDaemon(t, mode)
		for _, c := range []struct{ name, body string }{
			{"truncated", `{"id":1,"method":"agent.li`},
			{"invalid json", `{"id":1,,"method":"agent.list"}`},
			{"not an object", ` [1,2,3]`},
			{"string body", "\n\"agent.list\""},
			{"method not a string", `{"id":1,"method":5,"params":{}}`},
			{"missing method", `{"id":1,"params":{}}`},
			{"params not an object", `{"id":1,"method":"agent.list","params":[1]}`},
			{"id an object", `{"id":{"a":1},"method":"agent.list"}`},
			{"trailing garbage", `{"id":1,"method":"agent.list"} xyz`},
			{"two requests", `{"id":1,"method":"agent.list"}` + "\n" + `{"id":2,"method":"agent.list"}`},
			{"bad utf8 and controls", "{\"id\":1,\"method\":\"agent.\xff\x00list\"}"},
			{"deep nesting", `{"id":1,"method":"agent.list","params":{"a":` + string(bytes.Repeat([]byte("["), 100000)) + `}}`},
		} {
			raw := rawExchange(t, d.Sock, []byte(c.body+"\n"), true)
			if code := jsonErrorCode(t, c.name, raw); code != 2 {
				t.Fatalf("%s: code %v, want 2 (%q)", c.name, code, raw)
			}
			stillServing(t, d, c.name)
		}
		// A first byte that selects no framing: a JSON error line, then close.
		rng := rand.New(rand.NewSource(1))
		for i := 0; i < 20; i++ {
			junk := make([]byte, 1+rng.Intn(4096))
			rng.Read(junk)
			if junk[0] == 0 || protocol.IsJSONStart(junk[0]) {
				junk[0] = 0xff
			}
			raw := rawExchange(t, d.Sock, junk, true)
			if code := jsonErrorCode(t, "random bytes", raw); code != 2 {
				t.Fatalf("random bytes: code %v, want 2", code)
			}
		}
		stillServing(t, d, "random bytes")
		// Random bytes after a '{': an error line.
		for i := 0; i < 20; i++ {
			junk := make([]byte, 1+rng.Intn(4096))
			rng.Read(junk)
			junk[0] = '{'
			raw := rawExchange(t, d.Sock, junk, true)
			if code := jsonErrorCode(t, "random JSON-looking bytes", raw); code != 2 {
				t.Fatalf("random bytes after '{': code %v, want 2", code)
			}
		}
		stillServing(t, d, "random JSON-looking bytes")
		// An empty body after JSON whitespace: closed (an error line is fine too).
		if raw := rawExchange(t, d.Sock, []byte("\n"), true); len(raw) > 0 {
			jsonErrorCode(t, "whitespace only", raw)
		}
		// Oversized: more than 16 MiB of body. An error line or a clean close.
		big := make([]byte, protocol.MaxFrame+1024)
		copy(big, `{"id":1,"method":"agent.list","params":{"pad":"`)
		for i := 48; i < len(big); i++ {
			big[i] = 'a'
		}
		if raw := rawExchange(t, d.Sock, big, true); len(raw) > 0 {
			if code := jsonErrorCode(t, "oversized", raw); code != 2 {
				t.Fatalf("oversized JSON body: code %v, want 2", code)
			}
		}
		stillServing(t, d, "an oversized JSON body")
	})
}

// nativeFrame prefixes payload with its 4-byte big-endian length.
func nativeFrame(payload []byte) []byte {
	b := make([]byte, 4, 4+len(payload))
	binary.BigEndian.PutUint32(b, uint32(len(payload)))
	return append(b, payload...)
}

func mp(t testing.TB, v any) []byte {
	t.Helper()
	b, err := msgpack.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestSocketMalformedNative sends broken native frames. An undecodable or
// mistyped frame gets a code-2 error and the same connection goes on
// serving; an oversized or truncated frame closes the connection; the
// daemon keeps serving throughout.
func TestSocketMalformedNative(t *testing.T) {
	forEachMode(t, func(t *testing.T, mode procMode) {
		t.Parallel()
		d := startTestDaemon(t, mode)
		conn, err := net.Dial("unix", d.Sock)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(time.Minute))
		r := bufio.NewReader(conn)
		readFrame := func(what string) *protocol.Frame {
			t.Helper()
			payload, err := protocol.ReadNativeFrame(r, protocol.MaxFrame)
			if err != nil {
				t.Fatalf("%s: reading the reply: %v\n%s", what, err, d.Output())
			}
			f, err := protocol.DecodeNativeFrame(payload)
			if err != nil {
				t.Fatalf("%s: decoding the reply: %v", what, err)
			}
			return f
		}
		bad := []struct {
			name    string
			payload []byte
		}{
			{"invalid msgpack", []byte{0xc1, 0xc1, 0xc1}},
			{"truncated msgpack map", mp(t, map[string]any{"id": 1, "method": "agent.list"})[:5]},
			{"not a map", mp(t, []any{1, "agent.list"})},
			{"method not a string", mp(t, map[string]any{"id": 1, "method": 5})},
			{"missing method", mp(t, map[string]any{"id": 1, "params": map[string]any{}})},
			{"params not a map", mp(t, map[string]any{"id": 1, "method": "agent.list", "params": "x"})},
			{"extension type", append([]byte{0x81, 0xa2, 'i', 'd', 0xd4, 0x01}, 0x00)},
			{"random bytes", func() []byte { b := make([]byte, 300); rand.New(rand.NewSource(2)).Read(b); return b }()},
		}
		for i, c := range bad {
			// Each bad frame is followed on the same connection by a good
			// request, which must be answered.
			good, err := protocol.EncodeNativeRequest(&protocol.Request{ID: int64(1000 + i), Method: "daemon.status"})
			if err != nil {
				t.Fatal(err)
			}
			if _, err := conn.Write(append(nativeFrame(c.payload), good...)); err != nil {
				t.Fatal(err)
			}
			f := readFrame(c.name)
			if f.Kind != protocol.KindError || f.Error.Code != 2 {
				t.Fatalf("%s: reply %+v, want a code-2 error", c.name, f)
			}
			f = readFrame(c.name + " follow-up")
			if f.Kind != protocol.KindResult || fmt.Sprint(f.ID) != fmt.Sprint(1000+i) {
				t.Fatalf("%s: follow-up answer %+v", c.name, f)
			}
		}
		// Wrong param types inside a valid request: code 2 with the id.
		req, _ := protocol.EncodeNativeRequest(&protocol.Request{ID: "w", Method: "agent.inspect",
			Params: map[string]any{"agent_id": []any{1, 2}}})
		if _, err := conn.Write(req); err != nil {
			t.Fatal(err)
		}
		if f := readFrame("mistyped param"); f.Kind != protocol.KindError || f.Error.Code != 2 || f.ID != "w" {
			t.Fatalf("mistyped param: %+v", f)
		}
		// Empty payload: an error frame (the connection may close).
		if raw := rawExchange(t, d.Sock, nativeFrame(nil), true); len(raw) > 0 {
			wantNativeError(t, "empty payload", raw, 2)
		}
		// A declared length over 16 MiB: error frame with a nil id, then close.
		hdr := make([]byte, 4)
		binary.BigEndian.PutUint32(hdr, protocol.MaxFrame+1)
		// The first byte must be 0x00 to select the framing: send a small
		// valid frame first, then the oversized header.
		first, _ := protocol.EncodeNativeRequest(&protocol.Request{ID: int64(1), Method: "daemon.status"})
		raw := rawExchange(t, d.Sock, append(first, hdr...), false)
		if !bytes.Contains(raw, []byte("code")) {
			t.Fatalf("oversized frame: reply %q has no error frame", raw)
		}
		wantNativeErrorAnywhere(t, "oversized frame", raw, 2)
		// Truncated frame then EOF: the connection is closed cleanly.
		trunc := append(nativeFrame(mp(t, map[string]any{"id": 1, "method": "agent.list"})), 0, 0, 0, 50, 1, 2, 3)
		raw = rawExchange(t, d.Sock, trunc, true)
		if _, err := protocol.ReadNativeFrame(bytes.NewReader(raw), protocol.MaxFrame); err != nil {
			t.Fatalf("truncated frame: the complete request before it was not answered: %q", raw)
		}
		stillServing(t, d, "malformed native frames")
	})
}

func wantNativeError(t testing.TB, what string, raw []byte, code int) {
	t.Helper()
	payload, err := protocol.ReadNativeFrame(bytes.NewReader(raw), protocol.MaxFrame)
	if err != nil {
		t.Fatalf("%s: reply %q: %v", what, raw, err)
	}
	f, err := protocol.DecodeNativeFrame(payload)
	if err != nil || f.Kind != protocol.KindError || f.Error.Code != code {
		t.Fatalf("%s: reply %+v (%v), want error code %d", what, f, err, code)
	}
}

// wantNativeErrorAnywhere finds an error frame with the code among the
// frames in raw.
func wantNativeErrorAnywhere(t testing.TB, what string, raw []byte, code int) {
	t.Helper()
	r := bytes.NewReader(raw)
	for {
		payload, err := protocol.ReadNativeFrame(r, protocol.MaxFrame)
		if err != nil {
			t.Fatalf("%s: no error frame with code %d in %q", what, code, raw)
		}
		f, err := protocol.DecodeNativeFrame(payload)
		if err == nil && f.Kind == protocol.KindError && f.Error.Code == code {
			return
		}
	}
}
