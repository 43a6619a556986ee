package protocol

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// fakeServer accepts one connection and runs serve on it.
func fakeServer(t *testing.T, serve func(c net.Conn)) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "w")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	path := filepath.Join(dir, "s")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		serve(c)
	}()
	return path
}

func TestClientSurfacesJSONRefusal(t *testing.T) {
	path := fakeServer(t, func(c net.Conn) {
		c.Write([]byte(`{"id":null,"error":{"code":6,"message":"too many connections to the daemon (limit 1); retry later"}}` + "\n"))
	})
	c, err := Dial(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	<-c.done // the reader has processed the refusal
	_, err = c.Call(context.Background(), "x", nil)
	var pe *Error
	if !errors.As(err, &pe) || pe.Code != CodeUnavailable || !strings.Contains(pe.Message, "too many connections") {
		t.Fatalf("Call = %v, want the server's code-6 error", err)
	}
	if !errors.Is(err, ErrClientClosed) {
		t.Fatalf("Call = %v, want ErrClientClosed too", err)
	}
}

func TestClientRejectsGarbageFromServer(t *testing.T) {
	path := fakeServer(t, func(c net.Conn) {
		c.Write([]byte{0, 0, 0, 2, 0xc1, 0xc1})
	})
	c, err := Dial(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	<-c.done
	if _, err := c.Call(context.Background(), "x", nil); !errors.Is(err, ErrClientClosed) {
		t.Fatalf("Call = %v, want ErrClientClosed", err)
	}
}

func TestDialErrors(t *testing.T) {
	_, err := Dial(context.Background(), "/nonexistent/w/daemon.sock")
	if err == nil || !strings.Contains(err.Error(), "is the daemon running?") {
		t.Fatalf("Dial = %v", err)
	}
	if _, err := CallJSON(context.Background(), strings.Repeat("x", 200), "m", nil); !errors.Is(err, ErrSocketPathTooLong) {
		t.Fatalf("CallJSON = %v", err)
	}
}
