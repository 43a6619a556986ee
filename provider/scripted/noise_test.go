package scripted

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/warren-dev/warren/provider"
)

const noiseScript = `import sys, json
for line in sys.stdin:
    m = json.loads(line)
    n = int(m["message"])
    for i in range(n):
        sys.stdout.write("junk line %d of a script printing noise %s\n" % (i, "x" * 100))
    sys.stdout.write(json.dumps({"type": "done", "response": "survived %d" % n}) + "\n")
    sys.stdout.flush()
`

// TestNoiseIsLoggedThenCounted: a turn with a few hundred noise lines
// logs the first few and one summary line, and succeeds.
func TestNoiseIsLoggedThenCounted(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.create(e.provider(Options{}), e.spec(e.script("noise.py", noiseScript)))
	if resp := send(t, s, "500", nil); resp != "survived 500" {
		t.Fatalf("resp = %q", resp)
	}
	logs := e.logs.String()
	if n := strings.Count(logs, "ignoring line from scripted agent"); n != DefaultNoiseLogged {
		t.Fatalf("%d noise lines logged, want the first %d:\n%s", n, DefaultNoiseLogged, logs)
	}
	if !strings.Contains(logs, "lines=495") {
		t.Fatalf("no summary of the 495 lines not logged:\n%s", logs)
	}
	if n := strings.Count(logs, "\n"); n > DefaultNoiseLogged+5 {
		t.Fatalf("%d log lines for one noisy turn; the log must stay bounded:\n%s", n, logs)
	}
}

// TestNoiseFloodIsAProtocolError: a flood of noise fails the turn with
// ErrNoise, kills the process, and logs a bounded amount; the next turn
// starts a fresh process.
func TestNoiseFloodIsAProtocolError(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	s := e.create(e.provider(Options{}), e.spec(e.script("noise.py", noiseScript)))
	_, err := s.Send(context.Background(), "100000", provider.TurnIO{})
	if transient, _ := provider.IsTransient(err); !errors.Is(err, ErrNoise) || transient {
		t.Fatalf("a flood of 100000 noise lines: %v, want a permanent ErrNoise", err)
	}
	logs := e.logs.String()
	if len(logs) > 8<<10 {
		t.Fatalf("the flood wrote %d bytes of daemon log; it must stay bounded", len(logs))
	}
	if resp := send(t, s, "1", nil); resp != "survived 1" {
		t.Fatalf("next turn after the flood: %q", resp)
	}
}
