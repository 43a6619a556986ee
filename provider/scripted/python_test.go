package scripted

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/warren-dev/warren/provider"
)

// TestMain fails the package at once, saying why, when python3 is missing:
// the tests drive Python scripts, and without python3 some of them used to
// wait for the go test timeout (issue 14).
func TestMain(m *testing.M) {
	if _, err := exec.LookPath(DefaultPython); err != nil {
		fmt.Fprintf(os.Stderr, "provider/scripted tests need python3 on PATH (%v); install python3\n", err)
		os.Exit(1)
	}
	os.Exit(m.Run())
}

// A .py script with no Python interpreter fails fast naming python3: at
// create time (CheckModel) and at the first turn, permanently (issue 14).
func TestMissingPythonFailsFastNamingPython3(t *testing.T) {
	t.Parallel()
	e := newEnv(t)
	path := e.script("agent.py", histScript)
	p := e.provider(Options{Python: "warren-no-such-python3"})
	err := p.CheckModel(path)
	if !errors.Is(err, ErrNoPython) || !strings.Contains(err.Error(), "python3") {
		t.Fatalf("CheckModel = %v, want ErrNoPython naming python3", err)
	}
	s := e.create(p, e.spec(path))
	_, err = s.Send(context.Background(), "one", provider.TurnIO{Tools: pidTools(nil, nil)})
	if tr, _ := provider.IsTransient(err); tr || !errors.Is(err, ErrNoPython) || !strings.Contains(err.Error(), "python3") {
		t.Fatalf("Send = %v, want a permanent ErrNoPython naming python3", err)
	}
	if err := e.provider(Options{}).CheckModel(path); err != nil {
		t.Fatalf("CheckModel with python3 on PATH = %v", err)
	}
}
