// Command codesize prints the size and complexity figures of a Go tree:
// code lines per package, the functions over a length, and the most
// complex functions, so that anyone can reproduce the figures that the
// engineering notes and issue 12 quote.
//
//	go run ./scripts/codesize [-lines 100] [-top 10] [-cyclo 25] [-tests] [-fail] [dir]
//
// dir defaults to the current directory; every .go file below it counts
// except under testdata, vendor and directories whose name starts with
// "." or "_", and generated files ("Code generated ... DO NOT EDIT.").
//
// The figures:
//   - Code lines: lines that hold a Go token other than a comment (a raw
//     string spanning lines counts each of its lines). Test files
//     (_test.go) are counted apart.
//   - Function length: the lines from "func" to the closing brace, the doc
//     comment excluded.
//   - Cyclomatic complexity as gocyclo (github.com/fzipp/gocyclo) counts
//     it: 1, plus one per if, for, range, non-default case and select
//     case, && and ||; function literals count toward the function that
//     holds them.
//
// Functions of test files are left out of the lists unless -tests is
// given. With -fail the command exits 1 when a listed function is over
// -lines or over -cyclo.
package main

import (
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

func main() {
	maxLines := flag.Int("lines", 100, "list the functions longer than this many lines")
	top := flag.Int("top", 10, "list this many of the most complex functions")
	maxCyclo := flag.Int("cyclo", 25, "list every function whose complexity is over this, too")
	tests := flag.Bool("tests", false, "list functions of test files too")
	fail := flag.Bool("fail", false, "exit 1 when a listed function is over -lines or -cyclo")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: go run ./scripts/codesize [flags] [dir]\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	root := "."
	switch flag.NArg() {
	case 0:
	case 1:
		root = flag.Arg(0)
	default:
		flag.Usage()
		os.Exit(2)
	}
	r, err := Measure(root)
	if err != nil {
		fmt.Fprintf(os.Stderr, "codesize: %v\n", err)
		os.Exit(2)
	}
	over := r.Print(os.Stdout, Limits{Lines: *maxLines, Top: *top, Cyclo: *maxCyclo, Tests: *tests})
	if *fail && over > 0 {
		os.Exit(1)
	}
}

// Limits says what Report.Print lists.
type Limits struct {
	Lines int  // functions longer than this
	Top   int  // this many of the most complex
	Cyclo int  // and every one more complex than this
	Tests bool // functions of test files too
}

// Print writes the report and returns how many functions it listed as
// over Limits.Lines or Limits.Cyclo.
func (r *Report) Print(w io.Writer, l Limits) int {
	fmt.Fprintf(w, "code lines per package (lines with code, comments and blank lines left out)\n")
	fmt.Fprintf(w, "  %-40s %6s %7s %7s\n", "package", "files", "code", "tests")
	var files, code, test int
	for _, p := range r.Packages {
		fmt.Fprintf(w, "  %-40s %6d %7d %7d\n", p.Dir, p.Files, p.Code, p.TestCode)
		files, code, test = files+p.Files, code+p.Code, test+p.TestCode
	}
	fmt.Fprintf(w, "  %-40s %6d %7d %7d\n", "total", files, code, test)

	funcs := r.Funcs
	if !l.Tests {
		funcs = nil
		for _, f := range r.Funcs {
			if !f.Test {
				funcs = append(funcs, f)
			}
		}
	}
	over := 0
	long := sortedBy(funcs, func(f Func) int { return f.Lines })
	fmt.Fprintf(w, "\nfunctions over %d lines%s\n", l.Lines, testsNote(l.Tests))
	n := 0
	for _, f := range long {
		if f.Lines > l.Lines {
			fmt.Fprintf(w, "  %4d  %s  %s:%d\n", f.Lines, f.Name, f.File, f.Line)
			n++
		}
	}
	if n == 0 {
		fmt.Fprintf(w, "  none\n")
	}
	over += n

	complex := sortedBy(funcs, func(f Func) int { return f.Complexity })
	fmt.Fprintf(w, "\ncyclomatic complexity: the top %d and every function over %d%s\n", l.Top, l.Cyclo, testsNote(l.Tests))
	for i, f := range complex {
		if i >= l.Top && f.Complexity <= l.Cyclo {
			break
		}
		fmt.Fprintf(w, "  %4d  %s  %s:%d\n", f.Complexity, f.Name, f.File, f.Line)
		if f.Complexity > l.Cyclo {
			over++
		}
	}
	return over
}

func testsNote(tests bool) string {
	if tests {
		return " (test files included)"
	}
	return " (test files left out)"
}

// sortedBy returns fs sorted by key, largest first (ties by place).
func sortedBy(fs []Func, key func(Func) int) []Func {
	out := append([]Func(nil), fs...)
	sort.SliceStable(out, func(i, j int) bool {
		if ki, kj := key(out[i]), key(out[j]); ki != kj {
			return ki > kj
		}
		return out[i].where() < out[j].where()
	})
	return out
}

func (f Func) where() string { return fmt.Sprintf("%s:%09d", f.File, f.Line) }

// skipDir reports whether a directory is left out of the walk.
func skipDir(name string) bool {
	return name == "testdata" || name == "vendor" || name == "node_modules" ||
		(len(name) > 1 && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_")))
}

// goFiles lists the .go files below root that count, in lexical order.
func goFiles(root string) ([]string, error) {
	var out []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if path != root && skipDir(d.Name()) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") && d.Type().IsRegular() {
			out = append(out, path)
		}
		return nil
	})
	return out, err
}
