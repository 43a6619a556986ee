package schema

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
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
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "events.go", nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	event := regexp.MustCompile(`^[a-z]+\.[a-z_]+$`)
	var consts []string
	ast.Inspect(f, func(n ast.Node) bool {
		if lit, ok := n.(*ast.BasicLit); ok && lit.Kind == token.STRING {
			if v, err := strconv.Unquote(lit.Value); err == nil && event.MatchString(v) {
				consts = append(consts, v)
			}
		}
		return true
	})
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	var rows []string
	for _, line := range strings.Split(string(doc), "\n") {
		fields := strings.Fields(strings.TrimPrefix(line, "//"))
		if strings.HasPrefix(line, "//\t") && len(fields) > 1 && event.MatchString(fields[0]) {
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
