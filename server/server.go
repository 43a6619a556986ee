package server

import (
	"container/list"
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
	// DefaultFirstByteTimeout bounds the wait for a new connection's first
	// byte, DefaultFirstRequestTimeout the wait (from accept) for its
	// whole first request.
	DefaultFirstByteTimeout    = 5 * time.Second
	DefaultFirstRequestTimeout = 10 * time.Second
	// DefaultMaxPending bounds the connections that have not yet sent a
	// whole first request; over it the oldest of them is closed.
	DefaultMaxPending = 1024
	// DefaultControlReserve is how many ControlMethods requests may be
	// served at once beyond MaxConns.
	DefaultControlReserve = 8
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
	// MaxConns bounds the connections being served (0: DefaultMaxConns):
	// a connection takes a slot once its first request has arrived whole.
	// A request that finds no slot gets a code-6 error frame and its
	// connection is closed (but see ControlMethods).
	MaxConns int
	// MaxPending bounds the accepted connections whose first request has
	// not arrived whole yet (0: DefaultMaxPending). They hold no slot; when
	// a new connection would exceed the bound, the oldest of them is
	// closed, so silent or slow connections cannot lock clients out.
	MaxPending int
	// FirstByteTimeout bounds the wait for a connection's first byte
	// (0: DefaultFirstByteTimeout); FirstRequestTimeout bounds, from
	// accept, the arrival of its whole first request (0:
	// DefaultFirstRequestTimeout). A connection that misses either is
	// closed.
	FirstByteTimeout    time.Duration
	FirstRequestTimeout time.Duration
	// ControlMethods are served even when every slot is taken, when they
	// are a connection's first request: up to ControlReserve of them
	// (0: DefaultControlReserve) at once, each on a reserved place that
	// is given back, and its connection closed, as soon as it is answered
	// (package doc, "Reserved control places"). So the daemon's status and
	// shutdown stay reachable whatever other connections hold.
	ControlMethods map[string]bool
	ControlReserve int
	// MaxInflight bounds concurrent requests per native connection
	// (0: DefaultMaxInflight); a request over the bound is answered with
	// code 6 at once (the connection goes on).
	MaxInflight int
	// ReadTimeout bounds reading one request: the whole JSON body, or one
	// native frame once its length prefix arrived.
	ReadTimeout time.Duration
	// IdleTimeout closes a native connection with no request in flight that
	// sends nothing for this long (after its first request).
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
	if c.MaxPending <= 0 {
		c.MaxPending = DefaultMaxPending
	}
	if c.ControlReserve <= 0 {
		c.ControlReserve = DefaultControlReserve
	}
	c.FirstByteTimeout = timeoutOrDefault(c.FirstByteTimeout, DefaultFirstByteTimeout)
	c.FirstRequestTimeout = timeoutOrDefault(c.FirstRequestTimeout, DefaultFirstRequestTimeout)
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

// HandlerFunc adapts a function to Handler. The daemon implements Handler
// with a type; HandlerFunc is kept for tests and fakes (the server's tests,
// llmfake).
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
	slots    chan struct{} // semaphore for connections being served
	control  chan struct{} // semaphore for control requests beyond slots (reserved places)

	mu       sync.Mutex
	ln       *net.UnixListener
	sockInfo os.FileInfo
	closed   bool
	conns    map[*net.UnixConn]func() // conn → kick (wake its reader)
	pending  *list.List               // of *pendingConn, oldest first
	evicted  uint64                   // pending connections closed to admit newer ones
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
		control:  make(chan struct{}, cfg.ControlReserve),
		conns:    map[*net.UnixConn]func(){},
		pending:  list.New(),
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
			if s.base.Err() != nil || s.shuttingDown() {
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

// accept starts serving c as a pending connection (see pending.go).
func (s *Server) accept(c *net.UnixConn) {
	p := s.addPending(c)
	if p == nil {
		c.Close()
		return
	}
	go func() {
		defer s.wg.Done()
		defer s.untrack(c)
		s.serveConn(c, p)
	}()
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

// shuttingDown reports whether beginShutdown has run.
func (s *Server) shuttingDown() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.closed
}

// beginShutdown stops accepting (the socket first), then cancels every
// request context and wakes every connection reader. Idempotent.
func (s *Server) beginShutdown() {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return
	}
	s.closed = true
	ln := s.ln
	kicks := make([]func(), 0, len(s.conns))
	for _, k := range s.conns {
		if k != nil {
			kicks = append(kicks, k)
		}
	}
	s.mu.Unlock()
	// The socket goes before the requests are cancelled: a client whose
	// stream ends at the shutdown, and dials to learn why, finds no daemon
	// (otherwise its dial could still be queued on the listener).
	if ln != nil {
		ln.Close()
		removeIfOurs(s.cfg.SocketPath, s.sockInfo)
	}
	s.stop()
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
