// Package sse reads server-sent events (the text/event-stream format of the
// WHATWG HTML standard) as LLM APIs stream them: "data:" lines (several in
// one event are joined with '\n'), "event:" lines, comment lines starting
// with ':' (skipped), blank lines ending an event, and LF or CRLF line ends.
// Memory is bounded: a line longer than the limit is an error wrapping
// ErrLineTooLong, read no further than the limit.
package sse

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
)

// ErrLineTooLong is wrapped by Next's error when a line exceeds the limit.
var ErrLineTooLong = errors.New("server-sent event line longer than the limit")

// Event is one dispatched event. Data is valid until the next call to Next.
type Event struct {
	// Type is the "event:" field ("" when the event had none).
	Type string
	// Data is the event's data lines joined with '\n'.
	Data []byte
}

// Reader reads events from a stream. It is not safe for concurrent use.
type Reader struct {
	br      *bufio.Reader
	maxLine int
	line    []byte
	data    []byte
	typ     string // the last event type seen (interned)
	// Comments counts the comment lines seen; Other counts lines that are
	// neither fields SSE knows nor comments (a server sending something
	// else than an event stream).
	Comments int
	Other    int
}

// NewReader returns a Reader over r that refuses lines longer than maxLine
// bytes (without the line end).
func NewReader(r io.Reader, maxLine int) *Reader {
	size := 64 << 10
	if maxLine < size {
		size = maxLine + 2
	}
	if size < 16 {
		size = 16
	}
	return &Reader{br: bufio.NewReaderSize(r, size), maxLine: maxLine}
}

// Reset makes the Reader read from r, keeping its buffers (a session reuses
// one Reader for all its responses).
func (r *Reader) Reset(src io.Reader) {
	r.br.Reset(src)
	r.line, r.data, r.typ = r.line[:0], r.data[:0], ""
	r.Comments, r.Other = 0, 0
}

// keepBuffer is the largest line or data buffer Release keeps.
const keepBuffer = 1 << 20

// Release lets go of the source and of the line and data buffers a long
// line grew past keepBuffer, so that a Reader kept between streams (an
// idle session's) does not hold them; Reset makes it usable again.
func (r *Reader) Release() {
	r.br.Reset(nil)
	if cap(r.line) > keepBuffer {
		r.line = nil
	}
	if cap(r.data) > keepBuffer {
		r.data = nil
	}
	r.line, r.data = r.line[:0], r.data[:0]
}

// readLine returns the next line without its end. At the end of the stream
// a last unterminated line is returned with a nil error, then io.EOF.
func (r *Reader) readLine() ([]byte, error) {
	r.line = r.line[:0]
	for {
		frag, err := r.br.ReadSlice('\n')
		if len(r.line)+len(frag) > r.maxLine+2 {
			return nil, fmt.Errorf("%w (%d bytes)", ErrLineTooLong, r.maxLine)
		}
		switch {
		case err == nil:
			if len(r.line) == 0 {
				return trimEnd(frag), nil // no copy on the common path
			}
			r.line = append(r.line, frag...)
			return trimEnd(r.line), nil
		case errors.Is(err, bufio.ErrBufferFull):
			r.line = append(r.line, frag...)
		case errors.Is(err, io.EOF):
			r.line = append(r.line, frag...)
			if len(r.line) == 0 {
				return nil, io.EOF
			}
			if len(r.line) > r.maxLine {
				return nil, fmt.Errorf("%w (%d bytes)", ErrLineTooLong, r.maxLine)
			}
			return trimEnd(r.line), nil
		default:
			return nil, err
		}
	}
}

func trimEnd(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte{'\n'})
	return bytes.TrimSuffix(b, []byte{'\r'})
}

// Next returns the next event with data. It returns io.EOF at the end of
// the stream (an event whose blank line never came is still returned
// first), and any read error of the underlying reader as it is.
func (r *Reader) Next() (Event, error) {
	r.data = r.data[:0]
	typ := ""
	have := false
	for {
		line, err := r.readLine()
		if err != nil {
			if errors.Is(err, io.EOF) && have {
				return Event{Type: typ, Data: r.data}, nil
			}
			return Event{}, err
		}
		if len(line) > r.maxLine {
			return Event{}, fmt.Errorf("%w (%d bytes)", ErrLineTooLong, r.maxLine)
		}
		if len(line) == 0 {
			if have {
				return Event{Type: typ, Data: r.data}, nil
			}
			typ = ""
			continue
		}
		if line[0] == ':' {
			r.Comments++
			continue
		}
		field, value := line, []byte(nil)
		if i := bytes.IndexByte(line, ':'); i >= 0 {
			field, value = line[:i], line[i+1:]
			if len(value) > 0 && value[0] == ' ' {
				value = value[1:]
			}
		}
		switch string(field) {
		case "data":
			if have {
				r.data = append(r.data, '\n')
			}
			r.data = append(r.data, value...)
			have = true
		case "event":
			if string(value) != r.typ { // a repeated type costs no allocation
				r.typ = string(value)
			}
			typ = r.typ
		case "id", "retry":
		default:
			r.Other++
		}
	}
}
