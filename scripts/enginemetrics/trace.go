package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// traceTest is the test the trace runs (tests/trace_send_test.go); its
// subtests are "socket" and "core".
const traceTest = "TestTraceSendCrossesPackages"

// traceSettle is how long the test waits after each send (its
// WARREN_TRACE_SETTLE): twice the one second after which the engine's
// timers write session.json and checkpoint.json and retire the log's
// pending file (config.DefaultSessionSaveDelay, eventlog.DefaultPendingIdle).
const traceSettle = "2s"

// Trace runs the trace test's subtest (socket or core) under coverage
// with 1 and with 2 sends and returns the packages, relative to the
// module, that have a block run a different number of times.
func Trace(module, subtest, dir string) ([]string, error) {
	var profiles [2]map[string]int
	for i := range profiles {
		file := filepath.Join(dir, fmt.Sprintf("%s-%d.cover", subtest, i+1))
		cmd := exec.Command("go", "test", "-run", "^"+traceTest+"$/^"+subtest+"$", "-count=1",
			"-covermode=count", "-coverpkg="+module+"/...", "-coverprofile="+file, "./tests/")
		cmd.Env = append(os.Environ(), "WARREN_TRACE_SENDS="+strconv.Itoa(i+1), "WARREN_TRACE_SETTLE="+traceSettle)
		if out, err := cmd.CombinedOutput(); err != nil {
			return nil, fmt.Errorf("%s: %v\n%s", strings.Join(cmd.Args, " "), err, out)
		}
		f, err := os.Open(file)
		if err != nil {
			return nil, err
		}
		profiles[i], err = ReadProfile(f)
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", file, err)
		}
	}
	var out []string
	for _, p := range DiffPackages(profiles[0], profiles[1]) {
		out = append(out, strings.TrimPrefix(strings.TrimPrefix(p, module), "/"))
	}
	return out, nil
}

// ReadProfile reads a coverage profile into the count of each block
// ("file:start.col,end.col"), summing the lines of a block that appears
// more than once.
func ReadProfile(r io.Reader) (map[string]int, error) {
	counts := map[string]int{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || strings.HasPrefix(line, "mode:") {
			continue
		}
		// file:5.2,7.3 numStmts count
		f := strings.Fields(line)
		if len(f) != 3 {
			return nil, fmt.Errorf("malformed line %q", line)
		}
		n, err := strconv.Atoi(f[2])
		if err != nil {
			return nil, fmt.Errorf("malformed line %q", line)
		}
		counts[f[0]] += n
	}
	return counts, sc.Err()
}

// DiffPackages lists, sorted, the import paths of the packages that have a
// block whose count differs between two profiles.
func DiffPackages(a, b map[string]int) []string {
	pkgs := map[string]bool{}
	note := func(block string) {
		file, _, _ := strings.Cut(block, ":")
		pkgs[path.Dir(file)] = true
	}
	for block, n := range a {
		if b[block] != n {
			note(block)
		}
	}
	for block, n := range b {
		if _, ok := a[block]; !ok && n != 0 {
			note(block)
		}
	}
	out := make([]string, 0, len(pkgs))
	for p := range pkgs {
		out = append(out, p)
	}
	sort.Strings(out)
	return out
}
