package textarg

import (
	"errors"
	"strings"
	"testing"

	"github.com/warren-dev/warren/cmd/warren/internal/exit"
)

// TestReadTakesTheTextAsIsAndRefusesOverTheLimit: "-" reads standard
// input whole (a final newline kept); an argument over MaxBytes is an
// error (status 1) naming where the text came from.
func TestReadTakesTheTextAsIsAndRefusesOverTheLimit(t *testing.T) {
	if got, err := Read(strings.NewReader("plan\nthe release\n"), "MESSAGE", "-", ""); err != nil || got != "plan\nthe release\n" {
		t.Errorf("Read(-) = %q, %v", got, err)
	}
	if got, err := Read(nil, "MESSAGE", "hi", ""); err != nil || got != "hi" {
		t.Errorf("Read(hi) = %q, %v", got, err)
	}
	_, err := Read(nil, "RESPONSE", strings.Repeat("x", MaxBytes+1), "")
	var ee *exit.Error
	if !errors.As(err, &ee) || ee.Code != exit.DaemonErr || !strings.Contains(ee.Msg, "the RESPONSE from the command line is over") {
		t.Errorf("Read of %d bytes = %v, want a status-1 error naming the command line", MaxBytes+1, err)
	}
}
