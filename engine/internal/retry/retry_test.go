package retry

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/warren-dev/warren/provider"
)

func policy(slept *[]time.Duration) Policy {
	return Policy{MaxRetries: 2, Base: time.Second, Timeout: time.Minute, Jitter: func() float64 { return 0.5 },
		Sleep: func(_ context.Context, d time.Duration) error { *slept = append(*slept, d); return nil }}
}

// Transient errors are retried with doubling delays (at least Retry-After)
// up to MaxRetries, each announced first; then the error is returned and
// the session discarded.
func TestTransientErrorsRetriedThenGivenUp(t *testing.T) {
	var slept []time.Duration
	var announced []int
	tries := 0
	out := policy(&slept).Run(context.Background(), func() Try {
		tries++
		ra := time.Duration(0)
		if tries == 2 {
			ra = 10 * time.Second
		}
		return Try{Err: provider.Transient(errors.New("busy"), ra)}
	}, func() bool { return false }, func(n int, err error, d time.Duration) error {
		announced = append(announced, n)
		return nil
	})
	if tries != 3 || out.Attempts != 3 || !out.Discard || out.Err == nil || len(announced) != 2 {
		t.Fatalf("tries %d, outcome %+v, announced %v", tries, out, announced)
	}
	if len(slept) != 2 || slept[0] != time.Second || slept[1] != 10*time.Second {
		t.Fatalf("delays %v, want 1s then the 10s Retry-After", slept)
	}
}

// A permanent error, output already delivered, a suspension, a cancelled
// context and a failed announcement end the loop at once.
func TestWhatIsNotRetried(t *testing.T) {
	var slept []time.Duration
	p := policy(&slept)
	no := func() bool { return false }
	ok := func(int, error, time.Duration) error { return nil }
	if out := p.Run(context.Background(), func() Try { return Try{Err: provider.Permanent(errors.New("bad"))} }, no, ok); out.Attempts != 1 || out.Discard {
		t.Fatalf("permanent: %+v", out)
	}
	if out := p.Run(context.Background(), func() Try { return Try{Err: provider.Transient(errors.New("x"), 0)} },
		func() bool { return true }, ok); out.Attempts != 1 || !out.Discard {
		t.Fatalf("delivered: %+v", out)
	}
	if out := p.Run(context.Background(), func() Try { return Try{Err: provider.ErrRunSuspended} }, no, ok); !errors.Is(out.Err, provider.ErrRunSuspended) || !out.Discard {
		t.Fatalf("suspended: %+v", out)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if out := p.Run(ctx, func() Try { return Try{Err: errors.New("x")} }, no, ok); !errors.Is(out.Err, context.Canceled) || !out.Discard {
		t.Fatalf("cancelled: %+v", out)
	}
	logErr := errors.New("log full")
	if out := p.Run(context.Background(), func() Try { return Try{Err: provider.Transient(errors.New("x"), 0)} }, no,
		func(int, error, time.Duration) error { return logErr }); !errors.Is(out.Err, logErr) || out.Discard {
		t.Fatalf("announcement failed: %+v", out)
	}
	if len(slept) != 0 {
		t.Fatalf("slept %v; nothing was retried", slept)
	}
}

// A timed-out attempt is transient, names the timeout and discards the
// session even when a retry then succeeds; so does a failed drain.
func TestTimeoutAndDrainDiscard(t *testing.T) {
	var slept []time.Duration
	tries := 0
	var seen error
	out := policy(&slept).Run(context.Background(), func() Try {
		tries++
		if tries == 1 {
			return Try{Err: errors.New("deadline"), TimedOut: true}
		}
		return Try{Response: "ok"}
	}, func() bool { return false }, func(_ int, err error, _ time.Duration) error { seen = err; return nil })
	if out.Response != "ok" || out.Attempts != 2 || !out.Discard || !strings.Contains(seen.Error(), "turn timed out after 1m0s") {
		t.Fatalf("outcome %+v, announced %v", out, seen)
	}
	out = policy(&slept).Run(context.Background(), func() Try { return Try{Err: errors.New("drain"), DrainFailed: true} },
		func() bool { return false }, func(int, error, time.Duration) error { return nil })
	if !out.Discard || out.Attempts != 1 {
		t.Fatalf("drain failed: %+v", out)
	}
}

func TestBackoff(t *testing.T) {
	if d := Backoff(0, 1, 0.5); d != 500*time.Millisecond {
		t.Fatalf("default base: %v", d)
	}
	if d := Backoff(time.Second, 3, 0); d != 2*time.Second {
		t.Fatalf("third attempt, least jitter: %v", d)
	}
	if d := Backoff(time.Minute, 20, 0.9); d != 5*time.Minute {
		t.Fatalf("cap: %v", d)
	}
}
