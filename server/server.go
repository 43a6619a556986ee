package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/warren-dev/warren/protocol"
)

// Defaults applied to zero Config fields.
const (
	DefaultMaxConns     = 256
	DefaultMaxInflight  = 128
	DefaultReadTimeout  = 30 * time.Second
	DefaultIdleTimeout  = time.Hour
	DefaultWriteTimeout = time.Minute
	// refusalWait bounds how long a connection that is being refused (peer
	// uid, connection limit) may take to send its first byte, which picks
	// the framing of the refusal.
	refusalWait = time.Second
	// maxRefusing bounds the goroutines answering refused connections;
	// beyond it refused connections are closed without a reply.
	maxRefusing = 16
	// maxDrain bounds the input discarded before closing a connection
	// after an error reply.
	maxDrain = protocol.MaxFrame + protocol.HeaderSize
)

// ErrServerClosed is returned by Listen after Shutdown.
var ErrServerClosed = errors.New("server is shut down")

// Config is the server's policy. Zero fields take the Default* values; a
// negative timeout disables that timeout.
type Config struct {
	// SocketPath is the Unix socket to create (at most 107 bytes).
	SocketPath string
	// MaxConns bounds open connections (0: DefaultMaxConns). A connection
	// over the bound gets a code-6 error frame and is closed.
	MaxConns int
	// MaxInflight bounds concurrent requests per native connection
	// (0: DefaultMaxInflight); a request over the bound is answered with
	// code 6 at once (the connection goes on).
	MaxInflight int
	// ReadTimeout bounds reading one request: the whole JSON body, or one
	// native frame once its length prefix arrived.
	ReadTimeout time.Duration
	// IdleTimeout closes a native connection with no request in flight that
	// sends nothing for this long, and bounds the wait for a connection's
	// first byte.
	IdleTimeout time.Duration
	// WriteTimeout bounds writing one frame; a client that does not read is
	// disconnected.
	WriteTimeout time.Duration
	// MaxFrame bounds a JSON request body or native frame payload
	// (0 or more than protocol.MaxFrame: protocol.MaxFrame).
	MaxFrame int
	// StreamingMethods names the methods answered with chunk/event frames
	// and a done frame instead of a result.
	StreamingMethods map[string]bool
	// AllowUID decides whether a peer uid (SO_PEERCRED) may connect. Nil
	// allows only the server process's own uid.
	AllowUID func(uid int) bool
}

func (c Config) withDefaults() Config {
	if c.MaxConns <= 0 {
		c.MaxConns = DefaultMaxConns
	}
	if c.MaxInflight <= 0 {
		c.MaxInflight = DefaultMaxInflight
	}
	c.ReadTimeout = timeoutOrDefault(c.ReadTimeout, DefaultReadTimeout)
	c.IdleTimeout = timeoutOrDefault(c.IdleTimeout, DefaultIdleTimeout)
	c.WriteTimeout = timeoutOrDefault(c.WriteTimeout, DefaultWriteTimeout)
	if c.MaxFrame <= 0 || c.MaxFrame > protocol.MaxFrame {
		c.MaxFrame = protocol.MaxFrame
	}
	if c.AllowUID == nil {
		own := os.Getuid()
		c.AllowUID = func(uid int) bool { return uid == own }
	}
	return c
}

// timeoutOrDefault maps 0 to def and negative values to 0 (no timeout).
func timeoutOrDefault(d, def time.Duration) time.Duration {
	switch {
	case d == 0:
		return def
	case d < 0:
		return 0
	}
	return d
}

// Handler serves requests. It must honour ctx (cancelled on shutdown, on a
// cancel frame, and when the connection fails) and return a result or an
// error; return a *protocol.Error to choose the error code (any other error
// is sent as code 3). A streaming method emits frames on out before
// returning; its result is ignored. Handle is called concurrently.
type Handler interface {
	Handle(ctx context.Context, req *protocol.Request, out Stream) (any, error)
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, req *protocol.Request, out Stream) (any, error)

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, req *protocol.Request, out Stream) (any, error) {
	return f(ctx, req, out)
}

// Server serves a Handler on a Unix socket. See the package doc.
type Server struct {
	cfg Config
	h   Handler
	log hclog.Logger

	base     context.Context // cancelled by Shutdown: all request contexts derive from it
	stop     context.CancelFunc
	refusing chan struct{} // semaphore for refusal goroutines
	slots    chan struct{} // semaphore for connections

	mu       sync.Mutex
	ln       *net.UnixListener
	sockInfo os.FileInfo
	closed   bool
	conns    map[*net.UnixConn]func() // conn → kick (wake its reader)
	wg       sync.WaitGroup           // connection goroutines
	served   chan struct{}            // closed when Serve's accept loop ends
	serving  bool
}

// New returns a server; call Listen, then Serve. A nil logger logs nothing.
func New(cfg Config, h Handler, logger hclog.Logger) *Server {
	if logger == nil {
		logger = hclog.NewNullLogger()
	}
	base, stop := context.WithCancel(context.Background())
	cfg = cfg.withDefaults()
	return &Server{
		cfg:      cfg,
		h:        h,
		log:      logger,
		base:     base,
		stop:     stop,
		refusing: make(chan struct{}, maxRefusing),
		slots:    make(chan struct{}, cfg.MaxConns),
		conns:    map[*net.UnixConn]func(){},
		served:   make(chan struct{}),
	}
}

// Listen creates the socket (mode 0600, umask-safe). A path longer than the
// platform limit is an error wrapping protocol.ErrSocketPathTooLong. A stale
// socket file at the path is replaced; nothing else is removed.
func (s *Server) Listen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return ErrServerClosed
	}
	if s.ln != nil {
		return nil
	}
	ln, fi, err := listenUnix(s.cfg.SocketPath)
	if err != nil {
		return err
	}
	s.ln, s.sockInfo = ln, fi
	s.log.Info("listening", "socket", s.cfg.SocketPath)
	return nil
}

// Addr returns the socket path.
func (s *Server) Addr() string { return s.cfg.SocketPath }

// Serve accepts connections until ctx is cancelled or Shutdown is called
// (both stop the server the same way), then waits for the connections to
// finish and returns nil. It calls Listen if needed; called after Shutdown
// it returns nil at once.
func (s *Server) Serve(ctx context.Context) error {
	if err := s.Listen(); err != nil {
		if errors.Is(err, ErrServerClosed) {
			return nil
		}
		return err
	}
	s.mu.Lock()
	if s.serving {
		s.mu.Unlock()
		return errors.New("server: Serve called twice")
	}
	s.serving = true
	ln := s.ln
	s.mu.Unlock()

	stopOnCtx := context.AfterFunc(ctx, s.beginShutdown)
	defer stopOnCtx()
	backoff := 5 * time.Millisecond
	for {
		c, err := ln.AcceptUnix()
		if err != nil {
			if s.base.Err() != nil {
				break
			}
			var ne net.Error
			if errors.As(err, &ne) && !errors.Is(err, net.ErrClosed) {
				// EMFILE and friends: back off, keep serving.
				s.log.Warn("accept failed; retrying", "error", err, "backoff", backoff)
				t := time.NewTimer(backoff)
				select {
				case <-t.C:
				case <-s.base.Done():
					t.Stop()
				}
				backoff = min(2*backoff, time.Second)
				continue
			}
			s.beginShutdown()
			s.wg.Wait()
			close(s.served)
			return fmt.Errorf("accept on %s: %w", s.cfg.SocketPath, err)
		}
		backoff = 5 * time.Millisecond
		s.accept(c)
	}
	s.wg.Wait()
	close(s.served)
	return nil
}

// accept starts serving c, or refuses it when the connection bound is
// reached.
func (s *Server) accept(c *net.UnixConn) {
	select {
	case s.slots <- struct{}{}:
	default:
		s.log.Warn("connection limit reached; refusing connection", "max_conns", s.cfg.MaxConns)
		s.refuse(c, protocol.Errorf(protocol.CodeUnavailable,
			"too many connections to the daemon (limit %d); retry later", s.cfg.MaxConns))
		return
	}
	if !s.track(c) {
		<-s.slots
		c.Close()
		return
	}
	go func() {
		defer s.wg.Done()
		defer func() { <-s.slots }()
		defer s.untrack(c)
		s.serveConn(c)
	}()
}

// track registers c; false once shutting down.
func (s *Server) track(c *net.UnixConn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.wg.Add(1)
	s.conns[c] = nil
	return true
}

func (s *Server) untrack(c *net.UnixConn) {
	s.mu.Lock()
	delete(s.conns, c)
	s.mu.Unlock()
	c.Close()
}

// setKick records how to wake c's reader at shutdown; if shutdown already
// began it runs kick at once.
func (s *Server) setKick(c *net.UnixConn, kick func()) {
	s.mu.Lock()
	closed := s.closed
	if !closed {
		s.conns[c] = kick
	}
	s.mu.Unlock()
	if closed {
		kick()
	}
}

// beginShutdown stops accepting, cancels every request context and wakes
// every connection reader. Idempotent.
func (s *Server) beginShutdown() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	s.stop()
	ln := s.ln
	kicks := make([]func(), 0, len(s.conns))
	for _, k := range s.conns {
		if k != nil {
			kicks = append(kicks, k)
		}
	}
	s.mu.Unlock()
	if ln != nil {
		ln.Close()
		removeIfOurs(s.cfg.SocketPath, s.sockInfo)
	}
	for _, k := range kicks {
		k()
	}
}

// Shutdown stops accepting connections, cancels the contexts of in-flight
// requests (whose clients get the handlers' replies, code 6 for handlers
// that fail with a plain context error), and waits for every connection to
// end. If ctx ends first, it closes the remaining connections and returns
// ctx.Err(). It removes the socket file if it is still the server's. Do not
// call it synchronously from a Handler: it waits for handlers.
func (s *Server) Shutdown(ctx context.Context) error {
	s.beginShutdown()
	s.mu.Lock()
	serving := s.serving
	s.mu.Unlock()
	done := s.served
	if !serving {
		ch := make(chan struct{})
		go func() { s.wg.Wait(); close(ch) }()
		done = ch
	}
	select {
	case <-done:
		return nil
	case <-ctx.Done():
	}
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	return ctx.Err()
}
