package schema

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// TestDocTableListsEveryEvent keeps doc.go's event table and the event name
// constants in step: every constant whose value looks like an event name
// has a row, and every row names a constant.
func TestDocTableListsEveryEvent(t *testing.T) {
	consts := eventConstants(t)
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, line := range strings.Split(string(doc), "\n") {
		fields := strings.Fields(strings.TrimPrefix(line, "//"))
		if strings.HasPrefix(line, "//\t") && len(fields) > 1 && eventPattern.MatchString(fields[0]) {
			rows = append(rows, fields[0])
		}
	}
	sort.Strings(consts)
	sort.Strings(rows)
	if strings.Join(consts, " ") != strings.Join(rows, " ") {
		t.Fatalf("doc.go table and events.go differ:\n table:     %v\n constants: %v", rows, consts)
	}
	if len(rows) < 25 {
		t.Fatalf("only %d events found; the table parser is broken", len(rows))
	}
}

func TestValidName(t *testing.T) {
	for name, want := range map[string]bool{
		"lead": true, "w1": true, "a.b-c_d": true, strings.Repeat("a", 64): true,
		"": false, "1st": false, "-x": false, "has space": false, strings.Repeat("a", 65): false, "USER!": false,
	} {
		if got := ValidName(name); got != want {
			t.Errorf("ValidName(%q) = %v, want %v", name, got, want)
		}
	}
}

// eventPattern is the shape of an event name.
var eventPattern = regexp.MustCompile(`^[a-z]+\.[a-z_]+$`)

// eventConstants returns the values of events.go's string constants that
// look like event names.
func eventConstants(t *testing.T) []string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), "events.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	var consts []string
	ast.Inspect(f, func(n ast.Node) bool {
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if v, err := strconv.Unquote(lit.Value); err == nil && eventPattern.MatchString(v) {
				consts = append(consts, v)
			}
		}
		return true
	})
	return consts
}

// TestEventNamesAreSpelledOnlyHere holds issue 12's rule that the log's
// vocabulary lives in this package: no code file of the module outside
// schema (tests left out) has a string literal equal to an event name;
// they use the constants. The one exception is "tool.call" as the name of
// the socket method (SPEC 8) that the MCP bridge calls, which happens to
// be spelled as the event its call logs.
func TestEventNamesAreSpelledOnlyHere(t *testing.T) {
	events := map[string]bool{}
	for _, e := range eventConstants(t) {
		events[e] = true
	}
	method := map[string]bool{"daemon/rpc.go": true, "daemon/rpc_agent.go": true, "daemon/agentsock.go": true, "mcpbridge/daemon.go": true,
		"worker/sockets.go": true}
	var found []string
	files := 0
	err := filepath.WalkDir("..", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel("..", path)
		if d.IsDir() {
			if rel == "schema" || rel != "." && strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, 0)
		if err != nil {
			return err
		}
		files++
		ast.Inspect(f, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			v, err := strconv.Unquote(lit.Value)
			if err == nil && events[v] && !(v == ToolCall && method[filepath.ToSlash(rel)]) {
				found = append(found, rel+": "+lit.Value)
			}
			return true
		})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if files < 200 {
		t.Fatalf("only %d code files walked; the walk is broken", files)
	}
	if len(found) > 0 {
		t.Fatalf("event names spelled outside schema (use the constants):\n%s", strings.Join(found, "\n"))
	}
}
