package protocol

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"time"
)

// The JSON-framing client (CallJSON, StreamJSON, and EncodeJSONRequest in
// json.go) is kept for tests: the CLI speaks the native framing, and the
// server and process-level tests use this client to speak the framing
// Substrat's clients use, as they do.

// CallJSON performs one request with the Substrat newline-JSON framing,
// exactly as Substrat's client does: connect, write one JSON line with id
// "req-1", half-close the write side, read the reply to EOF. Daemon errors
// are returned as *Error. For a streaming method the frames are dropped and
// the done frame gives an empty result. Like Dial, it sends nothing to a
// server that does not run as this process's effective uid.
func CallJSON(ctx context.Context, socketPath, method string, params map[string]any) (map[string]any, error) {
	var result map[string]any
	err := jsonRoundTrip(ctx, socketPath, method, params, func(f *Frame) (bool, error) {
		switch f.Kind {
		case KindResult:
			m, err := resultMap(method, f.Result)
			result = m
			return true, err
		case KindError:
			return true, f.Error
		case KindDone: // a streaming method called with CallJSON
			result = map[string]any{}
			return true, nil
		}
		return false, nil
	})
	if err != nil {
		return nil, err
	}
	return result, nil
}

// StreamJSON calls a streaming method with the newline-JSON framing and
// passes each chunk and event frame to onFrame. It returns nil at the done
// frame and the *Error of an error frame.
func StreamJSON(ctx context.Context, socketPath, method string, params map[string]any, onFrame func(Frame) error) error {
	return jsonRoundTrip(ctx, socketPath, method, params, func(f *Frame) (bool, error) {
		switch f.Kind {
		case KindError:
			return true, f.Error
		case KindDone:
			return true, nil
		}
		err := onFrame(*f)
		return err != nil || f.Kind == KindResult, err
	})
}

// jsonRoundTrip sends one request and feeds each reply line to handle until
// it reports the end.
func jsonRoundTrip(ctx context.Context, socketPath, method string, params map[string]any, handle func(*Frame) (bool, error)) error {
	if err := CheckSocketPath(socketPath); err != nil {
		return err
	}
	line, err := EncodeJSONRequest(&Request{ID: "req-1", Method: method, Params: params})
	if err != nil {
		return err
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "unix", socketPath)
	if err != nil {
		return fmt.Errorf("connect to daemon at %s: %w (is the daemon running?)", socketPath, err)
	}
	defer conn.Close()
	if err := CheckServer(conn, socketPath); err != nil {
		return err
	}
	stop := context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
	defer stop()
	if dl, ok := ctx.Deadline(); ok {
		_ = conn.SetDeadline(dl)
	}
	if _, err := conn.Write(line); err != nil {
		return ctxErr(ctx, fmt.Errorf("send request: %w", err))
	}
	if err := conn.(*net.UnixConn).CloseWrite(); err != nil {
		return ctxErr(ctx, fmt.Errorf("half-close: %w", err))
	}
	r := bufio.NewReaderSize(conn, 8<<10)
	for {
		l, err := readLine(r)
		if err == io.EOF {
			return fmt.Errorf("%w: the daemon closed the connection without a complete reply", ErrClientClosed)
		}
		if err != nil {
			return ctxErr(ctx, fmt.Errorf("read reply: %w", err))
		}
		if len(bytes.TrimSpace(l)) == 0 {
			continue
		}
		f, err := DecodeJSONFrame(l)
		if err != nil {
			return err
		}
		if end, err := handle(f); end || err != nil {
			return err
		}
	}
}

// readLine reads one newline-terminated line of at most MaxFrame bytes; a
// final line without its newline is an error (a reply cut short), never
// taken for a whole one.
func readLine(r *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		part, err := r.ReadSlice('\n')
		line = append(line, part...)
		if len(line) > MaxFrame+1 {
			return nil, fmt.Errorf("reply line longer than %d bytes", MaxFrame)
		}
		switch err {
		case nil:
			return line, nil
		case bufio.ErrBufferFull:
			continue
		case io.EOF:
			if len(line) > 0 {
				return nil, fmt.Errorf("reply cut short: the connection closed after %d bytes of a line: %w", len(line), io.ErrUnexpectedEOF)
			}
		}
		return nil, err
	}
}

func ctxErr(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return ctx.Err()
	}
	return err
}
