package scripted

import (
	"bytes"
	"encoding/json"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// runHelper runs a Python program that uses the helper with the given
// stdin lines and returns its stdout lines, stderr and exit error.
func runHelper(t *testing.T, program string, stdin ...any) (out []map[string]any, stderr string, err error) {
	t.Helper()
	e := newEnv(t)
	path := e.script("prog.py", program)
	var in bytes.Buffer
	for _, line := range stdin {
		b, mErr := json.Marshal(line)
		if mErr != nil {
			t.Fatal(mErr)
		}
		in.Write(append(b, '\n'))
	}
	cmd := exec.Command("python3", path)
	cmd.Env = append(cmd.Environ(), "PYTHONPATH="+e.dir)
	cmd.Stdin = &in
	var so, se bytes.Buffer
	cmd.Stdout, cmd.Stderr = &so, &se
	err = cmd.Run()
	for _, l := range strings.Split(strings.TrimSpace(so.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if jErr := json.Unmarshal([]byte(l), &m); jErr != nil {
			t.Fatalf("helper wrote non-JSON %q", l)
		}
		out = append(out, m)
	}
	return out, se.String(), err
}

type obj = map[string]any

func TestHelperCallIDsCountFromOneAcrossTurns(t *testing.T) {
	t.Parallel()
	out, stderr, err := runHelper(t, `from warren_script import read_turn, call_tool, done
while True:
    m = read_turn()
    r = call_tool("t", name="x", v=m)
    done(r["got"])
`,
		obj{"type": "turn", "message": "a"}, obj{"type": "result", "id": 1, "data": obj{"got": "A"}},
		obj{"type": "turn", "message": "b"}, obj{"type": "result", "id": 2, "data": obj{"got": "B"}},
	)
	if err != nil {
		t.Fatalf("exit: %v\n%s", err, stderr) // EOF on stdin is a clean SystemExit
	}
	want := []obj{
		{"type": "call", "id": 1.0, "tool": "t", "args": obj{"name": "x", "v": "a"}},
		{"type": "done", "response": "A"},
		{"type": "call", "id": 2.0, "tool": "t", "args": obj{"name": "x", "v": "b"}},
		{"type": "done", "response": "B"},
	}
	if !jsonEqual(out, want) {
		t.Fatalf("out = %v\nwant  %v", out, want)
	}
}

func TestHelperMismatchedResultIDRaisesValueError(t *testing.T) {
	t.Parallel()
	_, stderr, err := runHelper(t, `from warren_script import read_turn, call_tool, done
read_turn()
call_tool("t")
`, obj{"type": "turn", "message": "a"}, obj{"type": "result", "id": 99, "data": obj{}})
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || !strings.Contains(stderr, "ValueError") {
		t.Fatalf("err %v stderr %s, want a ValueError exit", err, stderr)
	}
}

func TestHelperErrorResultRaisesRuntimeError(t *testing.T) {
	t.Parallel()
	out, stderr, err := runHelper(t, `from warren_script import read_turn, call_tool, done, error
read_turn()
try:
    call_tool("t")
except RuntimeError as e:
    error("caught: %s" % e)
`, obj{"type": "turn", "message": "a"}, obj{"type": "result", "id": 1, "error": "denied"})
	if err != nil {
		t.Fatalf("exit: %v\n%s", err, stderr)
	}
	if len(out) != 2 || out[1]["type"] != "error" || out[1]["message"] != "caught: denied" {
		t.Fatalf("out = %v", out)
	}
}

func TestHelperReplaysHistoryThenGoesLive(t *testing.T) {
	t.Parallel()
	history := []obj{
		{"message": "h1", "calls": []obj{{"tool": "t", "args": obj{}, "result": obj{"v": 1}}}, "response": "r1"},
		{"message": "h2", "calls": []obj{{"tool": "t", "args": obj{}, "error": "bad"}}, "response": "r2"},
		{"message": "h3", "calls": nil, "response": "r3"},
	}
	out, stderr, err := runHelper(t, `from warren_script import read_turn, call_tool, done, replaying
log = []
while True:
    m = read_turn()
    log.append((m, replaying()))
    if m != "h3":
        try:
            log.append(call_tool("t")["v"])
        except RuntimeError as e:
            log.append("err " + str(e))
    done(repr(log))
`, obj{"type": "turn", "message": "live", "history": history}, obj{"type": "result", "id": 1, "data": obj{"v": 9}})
	if err != nil {
		t.Fatalf("exit: %v\n%s", err, stderr)
	}
	// Replayed turns write nothing; the live call gets id 1.
	want := []obj{
		{"type": "call", "id": 1.0, "tool": "t", "args": obj{}},
		{"type": "done", "response": "[('h1', True), 1, ('h2', True), 'err bad', ('h3', True), ('live', False), 9]"},
	}
	if !jsonEqual(out, want) {
		t.Fatalf("out = %v\nwant  %v", out, want)
	}
}

func TestHelperSubstratAlias(t *testing.T) {
	t.Parallel()
	out, stderr, err := runHelper(t, `import substrat_script, warren_script
from substrat_script import read_turn, done
assert substrat_script.call_tool is warren_script.call_tool
done("alias " + read_turn())
`, obj{"type": "turn", "message": "ok"})
	if err != nil {
		t.Fatalf("exit: %v\n%s", err, stderr)
	}
	if len(out) != 1 || out[0]["response"] != "alias ok" {
		t.Fatalf("out = %v", out)
	}
}

func TestHelperFilesMatchEmbedded(t *testing.T) {
	dir := t.TempDir()
	if err := WriteHelpers(dir); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"warren_script.py", "substrat_script.py"} {
		got, err := helpers.ReadFile("python/" + name)
		if err != nil {
			t.Fatal(err)
		}
		written, err := exec.Command("cat", filepath.Join(dir, name)).Output()
		if err != nil || !bytes.Equal(got, written) {
			t.Fatalf("%s differs from the embedded copy (%v)", name, err)
		}
	}
}

func jsonEqual(a, b any) bool {
	x, err1 := json.Marshal(a)
	y, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(x, y)
}
