package agentproc

import (
	"bufio"
	"errors"
	"io"
)

// ErrLineTooLong is ReadLine's error for a line over its bound.
var ErrLineTooLong = errors.New("line too long")

// ReadLine returns the next line of an agent's output without its
// newline, holding at most max bytes (ErrLineTooLong past that; the rest
// of the line is not consumed). A final line without a newline is
// returned before io.EOF.
func ReadLine(r *bufio.Reader, max int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := r.ReadSlice('\n')
		n := len(chunk)
		if err == nil {
			n-- // the newline
		}
		if len(line)+n > max {
			return nil, ErrLineTooLong
		}
		switch {
		case err == nil:
			return append(line, chunk[:n]...), nil
		case errors.Is(err, bufio.ErrBufferFull):
			line = append(line, chunk...)
		case errors.Is(err, io.EOF) && len(line)+len(chunk) > 0:
			return append(line, chunk...), nil
		default:
			return nil, err
		}
	}
}
