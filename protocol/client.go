package protocol

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"time"
)

// ErrClientClosed is returned (wrapped) by calls on a Client whose
// connection is closed or broken.
var ErrClientClosed = errors.New("connection to the daemon is closed")

// ErrSocketPathTooLong is returned (wrapped) for a Unix socket path longer
// than the platform limit.
var ErrSocketPathTooLong = errors.New("unix socket path too long")

// MaxSocketPath is the longest Unix socket path accepted on Linux, in bytes
// (sun_path is 108 bytes including the terminating NUL).
const MaxSocketPath = 107

// CheckSocketPath returns an error wrapping ErrSocketPathTooLong when path is
// longer than MaxSocketPath, and an error for an empty path.
func CheckSocketPath(path string) error {
	if path == "" {
		return errors.New("unix socket path is empty")
	}
	if len(path) > MaxSocketPath {
		return fmt.Errorf("%w: %q is %d bytes, the platform limit is %d bytes; use a shorter home directory", ErrSocketPathTooLong, path, len(path), MaxSocketPath)
	}
	return nil
}

// Client is a native-framing connection to the daemon. Calls from many
// goroutines are multiplexed on the one connection by request id; a reader
// goroutine dispatches response frames to the waiting callers.
type Client struct {
	conn net.Conn
	wmu  sync.Mutex // serialises frame writes

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]*pendingCall
	err     error // set once the connection is finished
	done    chan struct{}
}

// pendingCall queues the frames for one request until its caller takes them.
type pendingCall struct {
	mu     sync.Mutex
	frames []*Frame
	err    error         // connection failure
	signal chan struct{} // capacity 1: "frames or err changed"
}

func (p *pendingCall) push(f *Frame, err error) {
	p.mu.Lock()
	if f != nil {
		p.frames = append(p.frames, f)
	}
	if err != nil && p.err == nil {
		p.err = err
	}
	p.mu.Unlock()
	select {
	case p.signal <- struct{}{}:
	default:
	}
}

// next returns the next queued frame, or the connection error, or neither.
func (p *pendingCall) next() (*Frame, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.frames) > 0 {
		f := p.frames[0]
		p.frames[0] = nil
		p.frames = p.frames[1:]
		return f, nil
	}
	return nil, p.err
}

// Dial connects to the daemon's socket with the native framing. It checks
// with SO_PEERCRED that the server runs as this process's effective uid
// before it sends anything (an error wrapping ErrUntrustedServer
// otherwise).
func Dial(ctx context.Context, socketPath string) (*Client, error) {
	if err := CheckSocketPath(socketPath); err != nil {
		return nil, err
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socketPath)
	if err != nil {
		return nil, fmt.Errorf("connect to daemon at %s: %w (is the daemon running?)", socketPath, err)
	}
	if err := CheckServer(conn, socketPath); err != nil {
		conn.Close()
		return nil, err
	}
	c := &Client{conn: conn, pending: map[uint64]*pendingCall{}, done: make(chan struct{})}
	go c.readLoop()
	return c, nil
}

// Close closes the connection; pending calls fail with ErrClientClosed.
func (c *Client) Close() error {
	err := c.conn.Close()
	<-c.done
	return err
}

func (c *Client) readLoop() {
	defer close(c.done)
	r := bufio.NewReaderSize(c.conn, 64<<10)
	var err error
	for {
		// A server that refuses a connection before seeing its first byte
		// (for example at its connection limit) answers with a JSON error
		// line: surface that error rather than a bogus frame length.
		if b, perr := r.Peek(1); perr == nil && b[0] == '{' {
			err = jsonRefusal(r)
			break
		}
		var payload []byte
		payload, err = ReadNativeFrame(r, MaxFrame)
		if err != nil {
			break
		}
		var f *Frame
		f, err = DecodeNativeFrame(payload)
		if err != nil {
			break
		}
		id, ok := clientID(f.ID)
		if !ok {
			// An error frame with no id answers no single request (e.g. the
			// server refused the connection): it fails every call.
			if f.Kind == KindError {
				err = fmt.Errorf("%w: %w", ErrClientClosed, f.Error)
				break
			}
			continue
		}
		c.mu.Lock()
		p := c.pending[id]
		if p != nil && (f.Kind == KindResult || f.Kind == KindError || f.Kind == KindDone) {
			delete(c.pending, id)
		}
		c.mu.Unlock()
		if p != nil {
			p.push(f, nil)
		}
	}
	var pe *Error
	if !errors.As(err, &pe) {
		err = fmt.Errorf("%w: %v", ErrClientClosed, err)
	}
	c.conn.Close()
	c.mu.Lock()
	c.err = err
	pending := c.pending
	c.pending = map[uint64]*pendingCall{}
	c.mu.Unlock()
	for _, p := range pending {
		p.push(nil, err)
	}
}

// clientID converts an id echoed by the server back to the client's
// counter value.
func clientID(v any) (uint64, bool) {
	switch x := v.(type) {
	case int64:
		return uint64(x), x >= 0
	case uint64:
		return x, true
	}
	return 0, false
}

// start registers a new request and writes it.
func (c *Client) start(ctx context.Context, method string, params map[string]any) (uint64, *pendingCall, error) {
	p := &pendingCall{signal: make(chan struct{}, 1)}
	c.mu.Lock()
	if c.err != nil {
		err := c.err
		c.mu.Unlock()
		return 0, nil, err
	}
	c.nextID++
	id := c.nextID
	c.pending[id] = p
	c.mu.Unlock()
	frame, err := EncodeNativeRequest(&Request{ID: id, Method: method, Params: params})
	if err == nil {
		err = c.write(ctx, frame)
	}
	if err != nil {
		c.forget(id)
		return 0, nil, err
	}
	return id, p, nil
}

func (c *Client) write(ctx context.Context, frame []byte) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	dl, _ := ctx.Deadline()
	_ = c.conn.SetWriteDeadline(dl)
	interrupted := make(chan struct{})
	stop := context.AfterFunc(ctx, func() {
		_ = c.conn.SetWriteDeadline(time.Unix(1, 0))
		close(interrupted)
	})
	_, err := c.conn.Write(frame)
	if !stop() {
		// The interrupt ran (or is running): wait for it so it cannot
		// leave a past deadline behind for the next writer.
		<-interrupted
		_ = c.conn.SetWriteDeadline(time.Time{})
	}
	if err != nil {
		if ctx.Err() != nil {
			// A partial frame may have been written: the stream is no
			// longer usable.
			c.conn.Close()
			return ctx.Err()
		}
		c.conn.Close()
		return fmt.Errorf("%w: write: %v", ErrClientClosed, err)
	}
	return nil
}

func (c *Client) forget(id uint64) {
	c.mu.Lock()
	delete(c.pending, id)
	c.mu.Unlock()
}

// cancel abandons a request: it stops tracking it and asks the server to
// cancel it (best effort, in the background).
func (c *Client) cancel(id uint64) {
	c.forget(id)
	frame, err := EncodeNativeRequest(&Request{ID: id, Cancel: true})
	if err != nil {
		return
	}
	go func() { _ = c.write(context.Background(), frame) }()
}

// wait returns the next frame for p.
func (c *Client) wait(ctx context.Context, id uint64, p *pendingCall) (*Frame, error) {
	for {
		f, err := p.next()
		if f != nil {
			return f, nil
		}
		if err != nil {
			return nil, err
		}
		select {
		case <-p.signal:
		case <-ctx.Done():
			c.cancel(id)
			return nil, ctx.Err()
		}
	}
}

// Call sends one request and waits for its result. Daemon errors are
// returned as *Error. A nil result is returned as an empty map; a result
// that is not an object is an error.
func (c *Client) Call(ctx context.Context, method string, params map[string]any) (map[string]any, error) {
	id, p, err := c.start(ctx, method, params)
	if err != nil {
		return nil, err
	}
	for {
		f, err := c.wait(ctx, id, p)
		if err != nil {
			return nil, err
		}
		switch f.Kind {
		case KindError:
			return nil, f.Error
		case KindResult:
			return resultMap(method, f.Result)
		case KindDone:
			return map[string]any{}, nil
		}
		// chunk or event frames of a streaming method called with Call are
		// dropped.
	}
}

func resultMap(method string, v any) (map[string]any, error) {
	switch m := v.(type) {
	case nil:
		return map[string]any{}, nil
	case map[string]any:
		return m, nil
	}
	return nil, fmt.Errorf("result of %s is %s, not an object", method, typeName(v))
}

// Stream sends a request to a streaming method and passes each chunk and
// event frame to onFrame, in order, on the caller's goroutine. It returns
// nil at the done frame, the *Error of an error frame, or onFrame's error
// (after asking the server to cancel the request). A result frame (the
// method was not streaming) is passed to onFrame and ends the stream.
func (c *Client) Stream(ctx context.Context, method string, params map[string]any, onFrame func(Frame) error) error {
	id, p, err := c.start(ctx, method, params)
	if err != nil {
		return err
	}
	for {
		f, err := c.wait(ctx, id, p)
		if err != nil {
			return err
		}
		switch f.Kind {
		case KindError:
			return f.Error
		case KindDone:
			return nil
		}
		if err := onFrame(*f); err != nil {
			if f.Kind != KindResult {
				c.cancel(id)
			}
			return err
		}
		if f.Kind == KindResult {
			return nil
		}
	}
}

// jsonRefusal reads a JSON error line sent instead of native frames.
func jsonRefusal(r *bufio.Reader) error {
	line, err := readLine(r)
	if err != nil {
		return fmt.Errorf("%w: read: %v", ErrClientClosed, err)
	}
	f, err := DecodeJSONFrame(line)
	if err != nil || f.Kind != KindError {
		return fmt.Errorf("%w: the server sent JSON on a native connection: %.200s", ErrClientClosed, line)
	}
	return fmt.Errorf("%w: %w", ErrClientClosed, f.Error)
}
