package agentproc

import (
	"bufio"
	"errors"
	"io"
	"strings"
	"testing"
)

// TestReadLine: lines without their newline, lines longer than the
// reader's buffer assembled, a last line without a newline before io.EOF,
// and ErrLineTooLong past max (a line of exactly max bytes is fine).
func TestReadLine(t *testing.T) {
	long := strings.Repeat("x", 100) // over the 16-byte buffer below
	r := bufio.NewReaderSize(strings.NewReader("a\n\n"+long+"\nlast"), 16)
	for _, want := range []string{"a", "", long, "last"} {
		got, err := ReadLine(r, 100)
		if err != nil || string(got) != want {
			t.Fatalf("ReadLine = %q, %v; want %q", got, err, want)
		}
	}
	if _, err := ReadLine(r, 100); !errors.Is(err, io.EOF) {
		t.Fatalf("at the end: %v, want io.EOF", err)
	}
	r = bufio.NewReaderSize(strings.NewReader(long+"y\n"), 16)
	if _, err := ReadLine(r, 100); !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("a line of 101 bytes with max 100: %v, want ErrLineTooLong", err)
	}
	r = bufio.NewReaderSize(strings.NewReader(long+"y"), 16)
	if _, err := ReadLine(r, 100); !errors.Is(err, ErrLineTooLong) {
		t.Fatalf("a last line of 101 bytes with max 100: %v, want ErrLineTooLong", err)
	}
}
