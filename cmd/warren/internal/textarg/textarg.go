// Package textarg reads the text argument of agent send and agent resume
// (MESSAGE or RESPONSE): the argument itself, standard input for "-", or a
// file, taken as is and bounded by what one request to the daemon can
// carry; an error names the source and the limits.
package textarg

import (
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/warren-dev/warren/cmd/warren/internal/exit"
	"github.com/warren-dev/warren/protocol"
)

// MaxBytes is the largest MESSAGE or RESPONSE the CLI sends: a request
// is one frame of at most protocol.MaxFrame bytes (16 MiB), and the rest of
// the request needs some room. The daemon's own limit,
// limits.message_bytes (1 MiB by default, 8 MiB at most), is lower: the
// daemon's error names it.
const MaxBytes = protocol.MaxFrame - 64<<10

// Read reads a MESSAGE or RESPONSE: the argument itself, standard
// input (stdin) when it is "-", or the file --file names (file "" and arg given).
// what names it in errors ("MESSAGE"). The text is taken as is (a final
// newline included).
func Read(stdin io.Reader, what, arg, file string) (string, error) {
	var r io.Reader
	var from string
	switch {
	case file != "":
		f, err := os.Open(file)
		if err != nil {
			return "", &exit.Error{Code: exit.DaemonErr, Err: err, Msg: fmt.Sprintf("read the %s from --file: %v", what, err)}
		}
		defer f.Close()
		r, from = f, file
	case arg == "-":
		r, from = stdin, "standard input"
	default:
		if len(arg) > MaxBytes {
			return "", tooLarge(what, "the command line", len(arg))
		}
		return arg, nil
	}
	var b bytes.Buffer
	n, err := b.ReadFrom(io.LimitReader(r, MaxBytes+1))
	if err != nil {
		return "", &exit.Error{Code: exit.DaemonErr, Err: err, Msg: fmt.Sprintf("read the %s from %s: %v", what, from, err)}
	}
	if n > MaxBytes {
		return "", tooLarge(what, from, int(n))
	}
	return b.String(), nil
}

func tooLarge(what, from string, n int) error {
	return &exit.Error{Code: exit.DaemonErr, Msg: fmt.Sprintf(
		"the %s from %s is over %d bytes (read %d): one request to the daemon carries at most %d MiB, and the daemon "+
			"takes at most limits.message_bytes (1 MiB by default, 8 MiB at most, in config.json); send a shorter text, "+
			"or write it to a file and tell the agent where it is", what, from, MaxBytes, n, protocol.MaxFrame>>20)}
}
