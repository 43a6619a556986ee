package protocol

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"testing"
)

// TestCallJSONReplyCutShort: a reply line that ends without its newline
// (the server went away mid-write) is an error, never taken for a reply,
// even when the part received happens to be valid JSON.
func TestCallJSONReplyCutShort(t *testing.T) {
	dir, err := os.MkdirTemp("", "w")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "s.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		_, _ = io.ReadAll(c)
		_, _ = c.Write([]byte(`{"id":1,"result":{"events":[]}}`)) // no newline: cut
		c.Close()
	}()
	_, err = CallJSON(context.Background(), sock, "agent.log", map[string]any{})
	if err == nil || !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("a reply without its newline: err = %v, want a cut-short error", err)
	}
}
