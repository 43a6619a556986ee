package server

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/hashicorp/go-hclog"
	"github.com/warren-dev/warren/protocol"
)

func TestShutdownCancelsInFlightAndWaits(t *testing.T) {
	ts := startServer(t, nil)
	ctx := context.Background()
	idle := dialClient(t, ts.path)
	if _, err := idle.Call(ctx, "trivial", nil); err != nil {
		t.Fatal(err)
	}
	busy := dialClient(t, ts.path)
	nativeErr := make(chan error, 1)
	go func() {
		_, err := busy.Call(ctx, "wait", map[string]any{"tag": "native"})
		nativeErr <- err
	}()
	jsonErr := make(chan error, 1)
	go func() {
		jsonErr <- protocol.StreamJSON(ctx, ts.path, "block", map[string]any{"tag": "json"}, func(protocol.Frame) error { return nil })
	}()
	for i := 0; i < 2; i++ {
		<-ts.fake.started
	}
	ts.stop(t) // Shutdown, then Serve returns nil
	// Both handlers saw their context cancelled and the clients got code 6.
	if tag := <-ts.fake.ctxDone; tag != "json" {
		t.Fatal(tag)
	}
	if pe := wantCode(t, <-nativeErr, protocol.CodeUnavailable); !strings.Contains(pe.Message, "shutting down") {
		t.Fatalf("message %q", pe.Message)
	}
	wantCode(t, <-jsonErr, protocol.CodeUnavailable)
	if _, err := idle.Call(ctx, "trivial", nil); !errors.Is(err, protocol.ErrClientClosed) {
		t.Fatalf("call on a connection closed by shutdown = %v", err)
	}
	if _, err := os.Lstat(ts.path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("socket not removed: %v", err)
	}
	if _, err := protocol.Dial(ctx, ts.path); err == nil {
		t.Fatal("dial after shutdown succeeded")
	}
	if err := ts.Listen(); !errors.Is(err, ErrServerClosed) {
		t.Fatalf("Listen after shutdown = %v", err)
	}
}

func TestServeStopsWhenContextCancelled(t *testing.T) {
	path := filepath.Join(shortDir(t), "s")
	fake := newFake()
	s := New(Config{SocketPath: path}, fake, nil)
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	go func() { served <- s.Serve(ctx) }()
	c := dialClient(t, path)
	errc := make(chan error, 1)
	go func() { _, err := c.Call(context.Background(), "wait", nil); errc <- err }()
	<-fake.started
	cancel()
	if err := <-served; err != nil {
		t.Fatalf("Serve = %v", err)
	}
	wantCode(t, <-errc, protocol.CodeUnavailable)
}

func TestShutdownDeadlineClosesConnections(t *testing.T) {
	path := filepath.Join(shortDir(t), "s")
	release := make(chan struct{})
	started := make(chan struct{})
	// A handler that ignores its context.
	h := HandlerFunc(func(ctx context.Context, req *protocol.Request, out Stream) (any, error) {
		close(started)
		<-release
		return nil, nil
	})
	s := New(Config{SocketPath: path}, h, nil)
	served := make(chan error, 1)
	go func() { served <- s.Serve(context.Background()) }()
	c := dialClient(t, pathWhenListening(t, s, path))
	errc := make(chan error, 1)
	go func() { _, err := c.Call(context.Background(), "x", nil); errc <- err }()
	<-started
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := s.Shutdown(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("Shutdown with an expired context = %v", err)
	}
	if err := <-errc; !errors.Is(err, protocol.ErrClientClosed) {
		t.Fatalf("client of a force-closed connection got %v", err)
	}
	close(release)
	if err := <-served; err != nil {
		t.Fatal(err)
	}
}

// pathWhenListening waits for Serve's implicit Listen by calling Listen
// (idempotent) and returns path.
func pathWhenListening(t *testing.T, s *Server, path string) string {
	t.Helper()
	if err := s.Listen(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestListenSocketIsOwnerOnlyWhateverTheUmask(t *testing.T) {
	old := syscall.Umask(0)
	defer syscall.Umask(old)
	dir := shortDir(t)
	// A directory so deep that a private temporary directory inside it
	// would not fit the limit: the socket is bound in place, then chmodded.
	deep := filepath.Join(dir, strings.Repeat("d", protocol.MaxSocketPath-len(dir)-8))
	if err := os.Mkdir(deep, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{
		filepath.Join(dir, "d.sock"),
		filepath.Join(deep, "d.sock"),
	} {
		s := New(Config{SocketPath: path}, newFake(), nil)
		if err := s.Listen(); err != nil {
			t.Fatal(err)
		}
		fi, err := os.Lstat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode()&os.ModeSocket == 0 || fi.Mode().Perm() != 0o600 {
			t.Errorf("%d-byte path: mode %v, want socket 0600", len(path), fi.Mode())
		}
		if err := s.Shutdown(context.Background()); err != nil {
			t.Fatal(err)
		}
	}
	// No temporary directories are left behind.
	for _, d := range []string{dir, deep} {
		entries, _ := os.ReadDir(d)
		if len(entries) != map[string]int{dir: 1, deep: 0}[d] {
			t.Errorf("left behind in %s: %v", d, entries)
		}
	}
}

func TestListenRefusesLongPath(t *testing.T) {
	path := "/tmp/" + strings.Repeat("a", protocol.MaxSocketPath-4)
	err := New(Config{SocketPath: path}, newFake(), nil).Listen()
	if !errors.Is(err, protocol.ErrSocketPathTooLong) || !strings.Contains(err.Error(), "107") {
		t.Fatalf("Listen(%d-byte path) = %v, want ErrSocketPathTooLong naming 107", len(path), err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatal("something was created")
	}
	if _, err := protocol.Dial(context.Background(), path); !errors.Is(err, protocol.ErrSocketPathTooLong) {
		t.Fatalf("Dial = %v", err)
	}
}

func TestListenExistingPaths(t *testing.T) {
	dir := shortDir(t)
	// A regular file is never removed.
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("keep"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := New(Config{SocketPath: file}, newFake(), nil).Listen(); !errors.Is(err, ErrNotSocket) {
		t.Fatalf("Listen on a file = %v", err)
	}
	if b, _ := os.ReadFile(file); string(b) != "keep" {
		t.Fatal("file was touched")
	}
	// A live socket is not stolen.
	ts := startServer(t, nil)
	if err := New(Config{SocketPath: ts.path}, newFake(), nil).Listen(); !errors.Is(err, ErrSocketInUse) {
		t.Fatalf("Listen on a live socket = %v", err)
	}
	if _, err := dialClient(t, ts.path).Call(context.Background(), "trivial", nil); err != nil {
		t.Fatal(err)
	}
	// A stale socket (nobody listening) is replaced.
	stale := filepath.Join(dir, "stale.sock")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false)
	ln.Close()
	s := New(Config{SocketPath: stale}, newFake(), hclog.NewNullLogger())
	if err := s.Listen(); err != nil {
		t.Fatalf("Listen over a stale socket = %v", err)
	}
	go s.Serve(context.Background())
	if _, err := dialClient(t, stale).Call(context.Background(), "trivial", nil); err != nil {
		t.Fatal(err)
	}
	if err := s.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
}

func TestShutdownLeavesAReplacedSocketAlone(t *testing.T) {
	ts := startServer(t, nil)
	// Someone else's socket now lives at the path.
	if err := os.Remove(ts.path); err != nil {
		t.Fatal(err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: ts.path, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ts.stop(t)
	if _, err := os.Lstat(ts.path); err != nil {
		t.Fatalf("shutdown removed a socket that is not its own: %v", err)
	}
}

// TestShutdownClosesTheSocketBeforeCancelling: by the time shutdown
// cancels a request, the socket takes no connection, so a client whose
// stream just ended and that dials to learn why finds the daemon gone
// (the CLI's "the daemon stopped"), not a listener about to close.
func TestShutdownClosesTheSocketBeforeCancelling(t *testing.T) {
	path := filepath.Join(shortDir(t), "d.sock")
	started := make(chan struct{})
	dialed := make(chan error, 1)
	h := HandlerFunc(func(ctx context.Context, req *protocol.Request, out Stream) (any, error) {
		close(started)
		<-ctx.Done()
		c, err := net.Dial("unix", path)
		if err == nil {
			c.Close()
		}
		dialed <- err
		return nil, nil
	})
	srv := New(Config{SocketPath: path, StreamingMethods: map[string]bool{"watch": true}}, h, hclog.NewNullLogger())
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(context.Background()) }()
	cl := dialClient(t, path)
	go func() { _ = cl.Stream(context.Background(), "watch", nil, func(protocol.Frame) error { return nil }) }()
	<-started
	if err := srv.Shutdown(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := <-served; err != nil {
		t.Fatalf("Serve after shutdown: %v", err)
	}
	if err := <-dialed; err == nil {
		t.Fatal("a request cancelled by shutdown could still connect to the socket")
	}
}
