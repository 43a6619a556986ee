package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
)

// Func is a function or method found by Forwarders.
type Func struct {
	Name string // "f", "T.m" or "(*T).m"
	Pos  string // file:line
}

// Forwarders returns the functions with a body in a parsed file and, of
// them, the one-statement forwarders (see the package doc).
func Forwarders(fset *token.FileSet, f *ast.File) (all, fwd []Func) {
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		fn := Func{Name: funcName(fd), Pos: position(fset, fd.Pos())}
		all = append(all, fn)
		if isForwarder(fd.Body) {
			fwd = append(fwd, fn)
		}
	}
	return all, fwd
}

func isForwarder(body *ast.BlockStmt) bool {
	if len(body.List) != 1 {
		return false
	}
	switch s := body.List[0].(type) {
	case *ast.ReturnStmt:
		return len(s.Results) == 1 && yieldsCall(s.Results[0])
	case *ast.ExprStmt:
		_, ok := ast.Unparen(s.X).(*ast.CallExpr)
		return ok
	}
	return false
}

// yieldsCall reports whether e is a call, possibly under parentheses, a
// dereference, field selections and type assertions: f(x), *p.Load(),
// g().field, h().(T). A conversion is a call syntactically.
func yieldsCall(e ast.Expr) bool {
	for {
		switch x := e.(type) {
		case *ast.CallExpr:
			return true
		case *ast.ParenExpr:
			e = x.X
		case *ast.StarExpr:
			e = x.X
		case *ast.SelectorExpr:
			e = x.X
		case *ast.TypeAssertExpr:
			e = x.X
		default:
			return false
		}
	}
}

func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	t := fd.Recv.List[0].Type
	star := false
	if s, ok := t.(*ast.StarExpr); ok {
		t, star = s.X, true
	}
	switch x := t.(type) { // drop type parameters: T[A] -> T
	case *ast.IndexExpr:
		t = x.X
	case *ast.IndexListExpr:
		t = x.X
	}
	recv := "?"
	if id, ok := t.(*ast.Ident); ok {
		recv = id.Name
	}
	if star {
		return "(*" + recv + ")." + fd.Name.Name
	}
	return recv + "." + fd.Name.Name
}

// ContextCall is one context.Background() or context.TODO() call.
type ContextCall struct {
	Pos    string // file:line
	Call   string // "context.Background()" or "context.TODO()"
	Parent bool   // it is the parent argument of a context.With* call
}

// ContextCalls finds the calls of the standard library's
// context.Background and context.TODO in a parsed file, through the name
// the file imports "context" as (shadowing is not looked for).
func ContextCalls(fset *token.FileSet, f *ast.File) []ContextCall {
	name := ""
	for _, im := range f.Imports {
		if p, _ := strconv.Unquote(im.Path.Value); p == "context" {
			name = "context"
			if im.Name != nil {
				name = im.Name.Name
			}
		}
	}
	if name == "" || name == "_" || name == "." {
		return nil
	}
	// ctxFunc returns the function name of a call of context.<fn>.
	ctxFunc := func(n ast.Node) (string, *ast.CallExpr) {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return "", nil
		}
		sel, ok := ast.Unparen(call.Fun).(*ast.SelectorExpr)
		if !ok {
			return "", nil
		}
		if id, ok := sel.X.(*ast.Ident); !ok || id.Name != name {
			return "", nil
		}
		return sel.Sel.Name, call
	}
	parents := map[ast.Node]bool{}
	var out []ContextCall
	ast.Inspect(f, func(n ast.Node) bool {
		fn, call := ctxFunc(n)
		switch {
		case strings.HasPrefix(fn, "With") && len(call.Args) > 0:
			parents[ast.Unparen(call.Args[0])] = true
		case (fn == "Background" || fn == "TODO") && len(call.Args) == 0:
			out = append(out, ContextCall{Pos: position(fset, call.Pos()), Call: "context." + fn + "()", Parent: parents[call]})
		}
		return true
	})
	return out
}

func position(fset *token.FileSet, p token.Pos) string {
	pos := fset.Position(p)
	return fmt.Sprintf("%s:%d", filepath.ToSlash(pos.Filename), pos.Line)
}

// goFiles lists the non-test .go files of dir, and of the directories
// below it when recursive (skipping testdata and names starting with "."
// or "_"), in lexical order.
func goFiles(dir string, recursive bool) ([]string, error) {
	var out []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			n := d.Name()
			if path != dir && (!recursive || n == "testdata" || strings.HasPrefix(n, ".") || strings.HasPrefix(n, "_")) {
				return filepath.SkipDir
			}
			return nil
		}
		if strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") {
			out = append(out, path)
		}
		return nil
	})
	return out, err
}

// parseFiles parses files (comments left out).
func parseFiles(fset *token.FileSet, files []string) ([]*ast.File, error) {
	var out []*ast.File
	for _, name := range files {
		f, err := parser.ParseFile(fset, name, nil, parser.SkipObjectResolution)
		if err != nil {
			return nil, err
		}
		out = append(out, f)
	}
	return out, nil
}

// packageDirs lists the directories below dir (dir itself left out) that
// hold a non-test .go file, relative to dir's parent and in lexical order.
func packageDirs(dir string) ([]string, error) {
	files, err := goFiles(dir, true)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, f := range files {
		if d := filepath.Dir(f); d != filepath.Clean(dir) {
			seen[filepath.ToSlash(d)] = true
		}
	}
	out := make([]string, 0, len(seen))
	for d := range seen {
		out = append(out, d)
	}
	sort.Strings(out)
	return out, nil
}
