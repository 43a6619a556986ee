package engine

import (
	"errors"
	"fmt"
	"testing"

	"github.com/warren-dev/warren/engine/internal/waits"
)

// Each kind of refusal of package waits becomes the Core's domain error
// of that kind with the refusal's text; other errors pass unchanged.
func TestWaitErrMapsEachRefusal(t *testing.T) {
	cause := errors.New("the cause")
	for kind, want := range map[waits.Kind]error{waits.Rejected: ErrTokenRejected, waits.WrongState: ErrWrongState,
		waits.Unavailable: ErrUnavailable} {
		err := waitErr(&waits.Refusal{Kind: kind, Err: fmt.Errorf("refused: %w", cause)})
		if !errors.Is(err, want) || !errors.Is(err, cause) || err.Error() != "refused: the cause" {
			t.Fatalf("kind %d: %v", kind, err)
		}
		if _, ok := err.(*domainError); !ok {
			t.Fatalf("kind %d: %T, want a domain error", kind, err)
		}
	}
	if err := waitErr(cause); err != cause {
		t.Fatalf("a plain error became %v", err)
	}
	if waitErr(nil) != nil {
		t.Fatal("nil became an error")
	}
}
