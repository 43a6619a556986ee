// Command enginemetrics prints the structure figures of package engine
// that issue 30 quotes, so that they can be taken again after its
// refactor:
//
//	go run ./scripts/enginemetrics [-v] [-skip-trace]
//
// from the repository root. -v lists what each figure counts; -skip-trace
// leaves out the last figure, which runs a test under coverage four times
// (about a minute).
//
// The figures:
//
//  1. Packages under engine/internal: the directories there holding a
//     non-test .go file.
//  2. One-statement forwarders in engine/*.go (the non-test files
//     directly in engine/), out of the functions and methods there with a
//     body. A forwarder is a function whose body is exactly one statement,
//     either a return of one result that is a call, possibly under
//     parentheses, a dereference, field selections or a type assertion
//     (return c.x.F(a); return T(x); return *c.cfg.Load(); return f().y),
//     or an expression statement that is a call. Returning a field
//     (return c.bootID), a composite literal or an address is not
//     forwarding. The "return *c.cfg.Load()" case is what makes issue 30's
//     180 of 278: a plain "return <call>" gives 179.
//  3. Interfaces declared in engine, engine/internal/... and toolexec (at
//     package level, with at least one method, not constraints) that
//     exactly one named type of the module's non-test code implements
//     (the type or a pointer to it; interface types are not counted). The
//     module is type-checked from source with go/types, its dependencies
//     read from the export data of "go list -export"; the _test.go files
//     of each package are checked again as its test variant (and external
//     test package) to tell the implementers tests add. A generic
//     interface or type is instantiated with every type argument list the
//     module instantiates anything with (types.Info.Instances) that meets
//     its constraints; when no list does, a type implements it if it has
//     methods of the same names with as many parameters and results
//     (marked "by method names").
//  4. context.Background() and context.TODO() calls in the non-test
//     files under engine/ (subpackages included), found syntactically
//     through the name each file imports "context" as. Issue 30 says 9:
//     the count of those that are not the parent argument of a
//     context.With... call, which the report gives too.
//  5. Packages of the module crossed by one agent.send whose turn makes
//     one send_message tool call. TestTraceSendCrossesPackages
//     (tests/trace_send_test.go) runs with WARREN_TRACE_SENDS=1 and then
//     2 under "go test -covermode=count -coverpkg=<module>/...": a package
//     counts when one of its blocks ran a different number of times in
//     the two runs, that is when the extra send ran code of it. Each
//     send is followed by the recipient's wake turn showing the message
//     and by WARREN_TRACE_SETTLE=2s, so the session.json and
//     checkpoint.json writes and the pending-file retirement that the
//     engine's timers do about a second after a send belong to it. The
//     figure is through the socket (an in-process daemon); the same
//     through the engine's Core directly is given after it.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"go/token"
	"io"
	"math"
	"os"
	"strings"
)

func main() {
	verbose := flag.Bool("v", false, "list what each figure counts")
	skipTrace := flag.Bool("skip-trace", false, "leave out the packages one send crosses (runs a test 4 times)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: go run ./scripts/enginemetrics [-v] [-skip-trace]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() != 0 {
		flag.Usage()
		os.Exit(2)
	}
	if err := run(os.Stdout, *verbose, *skipTrace); err != nil {
		fmt.Fprintf(os.Stderr, "enginemetrics: %v\n", err)
		os.Exit(1)
	}
}

func run(w io.Writer, verbose, skipTrace bool) error {
	module, err := modulePath("go.mod")
	if err != nil {
		return fmt.Errorf("run from the repository root: %w", err)
	}
	r := report{w: w, verbose: verbose}
	for _, step := range []func() error{r.internalPackages, r.forwarders, func() error { return r.interfaces(module) }, r.contexts} {
		if err := step(); err != nil {
			return err
		}
	}
	if skipTrace {
		return nil
	}
	return r.trace(module)
}

// report writes the figures, one step each.
type report struct {
	w       io.Writer
	verbose bool
}

// list writes items, one a line, under -v.
func (r report) list(items []string) {
	if r.verbose {
		for _, s := range items {
			fmt.Fprintf(r.w, "  %s\n", s)
		}
	}
}

// internalPackages: 1. the packages under engine/internal.
func (r report) internalPackages() error {
	dirs, err := packageDirs("engine/internal")
	if err != nil {
		return err
	}
	fmt.Fprintf(r.w, "engine/internal packages: %d\n", len(dirs))
	r.list(dirs)
	return nil
}

// forwarders: 2. the one-statement forwarders in engine/*.go.
func (r report) forwarders() error {
	fset := token.NewFileSet()
	files, err := goFiles("engine", false)
	if err != nil {
		return err
	}
	asts, err := parseFiles(fset, files)
	if err != nil {
		return err
	}
	var all, fwd []Func
	for _, f := range asts {
		a, fw := Forwarders(fset, f)
		all, fwd = append(all, a...), append(fwd, fw...)
	}
	fmt.Fprintf(r.w, "forwarders in engine/*.go: %d of %d (%d%%)\n", len(fwd), len(all), percent(len(fwd), len(all)))
	var names []string
	for _, f := range fwd {
		names = append(names, f.Pos+" "+f.Name)
	}
	r.list(names)
	return nil
}

// interfaces: 3. the interfaces declared in the engine with a single
// production implementer.
func (r report) interfaces(module string) error {
	ifaces, typeErrs, err := Interfaces(module, func(rel string) bool {
		return rel == "engine" || strings.HasPrefix(rel, "engine/internal/") || rel == "toolexec"
	})
	if err != nil {
		return err
	}
	for _, e := range typeErrs {
		fmt.Fprintf(os.Stderr, "enginemetrics: type error (the figures may be off): %s\n", e)
	}
	single := 0
	for _, it := range ifaces {
		if len(it.Prod) == 1 {
			single++
		}
	}
	fmt.Fprintf(r.w, "single-implementer interfaces: %d of the %d in engine, engine/internal/... and toolexec\n", single, len(ifaces))
	for _, it := range ifaces {
		if len(it.Prod) == 1 || r.verbose {
			fmt.Fprintf(r.w, "  %s: %s\n", it.Name, implementers(it))
		}
	}
	return nil
}

// contexts: 4. context.Background and context.TODO in the engine's
// non-test code.
func (r report) contexts() error {
	fset := token.NewFileSet()
	files, err := goFiles("engine", true)
	if err != nil {
		return err
	}
	asts, err := parseFiles(fset, files)
	if err != nil {
		return err
	}
	var calls []ContextCall
	for _, f := range asts {
		calls = append(calls, ContextCalls(fset, f)...)
	}
	direct := 0
	var where []string
	for _, c := range calls {
		s := c.Pos + " " + c.Call
		if c.Parent {
			s += " (parent of a context.With... call)"
		} else {
			direct++
		}
		where = append(where, s)
	}
	fmt.Fprintf(r.w, "context.Background/TODO in engine non-test code: %d (%d not the parent of a context.With... call)\n", len(calls), direct)
	r.list(where)
	return nil
}

// trace: 5. the packages one send crosses, through the socket and
// through the Core.
func (r report) trace(module string) error {
	dir, err := os.MkdirTemp("", "enginemetrics")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	socket, err := Trace(module, "socket", dir)
	if err != nil {
		return err
	}
	core, err := Trace(module, "core", dir)
	if err != nil {
		return err
	}
	internal := 0
	for _, p := range socket {
		if strings.HasPrefix(p, "engine/internal/") {
			internal++
		}
	}
	fmt.Fprintf(r.w, "packages crossed by agent.send with one send_message: %d, %d of them under engine/internal (through the engine's Core directly: %d)\n",
		len(socket), internal, len(core))
	if r.verbose {
		fmt.Fprintf(r.w, "  socket: %s\n  core: %s\n", strings.Join(socket, " "), strings.Join(core, " "))
	} else {
		fmt.Fprintf(r.w, "  %s\n", strings.Join(socket, " "))
	}
	return nil
}

// implementers describes an interface's implementers for the report.
func implementers(it Iface) string {
	s := "none"
	if len(it.Prod) > 0 {
		s = strings.Join(it.Prod, ", ")
	}
	if len(it.Tests) > 0 {
		s += "; tests add " + strings.Join(it.Tests, ", ")
	}
	if it.Structural {
		s += " (by method names)"
	}
	return s
}

func percent(n, of int) int {
	if of == 0 {
		return 0
	}
	return int(math.Round(100 * float64(n) / float64(of)))
}

// modulePath reads the module path from a go.mod file.
func modulePath(gomod string) (string, error) {
	f, err := os.Open(gomod)
	if err != nil {
		return "", err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "module "); ok {
			return strings.Trim(strings.TrimSpace(rest), `"`), nil
		}
	}
	if err := sc.Err(); err != nil {
		return "", err
	}
	return "", fmt.Errorf("%s: no module line", gomod)
}
