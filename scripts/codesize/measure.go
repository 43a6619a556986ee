package main

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/scanner"
	"go/token"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Report is what Measure found.
type Report struct {
	Packages []Package // by directory
	Funcs    []Func    // in file order
}

// Package is the size of one directory's Go files.
type Package struct {
	Dir      string // relative to the root, with slashes ("." for the root)
	Files    int    // non-test files
	Code     int    // code lines of non-test files
	TestCode int    // code lines of _test.go files
}

// Func is one function or method declaration.
type Func struct {
	Name       string // "pkg Func" or "pkg (*T).Method", as gocyclo names them
	File       string // relative to the root, with slashes
	Line       int    // of the func keyword
	Lines      int    // from the func keyword to the closing brace
	Complexity int    // cyclomatic, as gocyclo counts it
	Test       bool   // declared in a _test.go file
}

// Measure reads every Go file below root (see the command's doc).
func Measure(root string) (*Report, error) {
	paths, err := goFiles(root)
	if err != nil {
		return nil, err
	}
	pkgs := map[string]*Package{}
	r := &Report{}
	fset := token.NewFileSet()
	for _, path := range paths {
		src, err := os.ReadFile(path)
		if err != nil {
			return nil, err
		}
		f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
		if err != nil {
			return nil, fmt.Errorf("parse %s: %w", path, err)
		}
		if ast.IsGenerated(f) {
			continue
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return nil, err
		}
		rel = filepath.ToSlash(rel)
		dir := filepath.ToSlash(filepath.Dir(rel))
		p := pkgs[dir]
		if p == nil {
			p = &Package{Dir: dir}
			pkgs[dir] = p
		}
		test := strings.HasSuffix(path, "_test.go")
		lines := CodeLines(src)
		if test {
			p.TestCode += lines
		} else {
			p.Files++
			p.Code += lines
		}
		r.Funcs = append(r.Funcs, funcs(fset, f, rel, test)...)
	}
	for _, p := range pkgs {
		r.Packages = append(r.Packages, *p)
	}
	sort.Slice(r.Packages, func(i, j int) bool { return r.Packages[i].Dir < r.Packages[j].Dir })
	return r, nil
}

// CodeLines counts the lines of src that hold a token other than a
// comment; a token spanning lines (a raw string) counts each of them.
func CodeLines(src []byte) int {
	fset := token.NewFileSet()
	file := fset.AddFile("", fset.Base(), len(src))
	var s scanner.Scanner
	s.Init(file, src, nil, 0) // comments are skipped
	code := map[int]bool{}
	for {
		pos, tok, lit := s.Scan()
		if tok == token.EOF {
			break
		}
		if tok == token.SEMICOLON && lit == "\n" {
			continue // inserted at a line's end, not written
		}
		first := file.Line(pos)
		last := first + strings.Count(lit, "\n")
		for l := first; l <= last; l++ {
			code[l] = true
		}
	}
	return len(code)
}

// funcs lists the function declarations of f.
func funcs(fset *token.FileSet, f *ast.File, rel string, test bool) []Func {
	var out []Func
	for _, d := range f.Decls {
		fd, ok := d.(*ast.FuncDecl)
		if !ok || fd.Body == nil {
			continue
		}
		start, end := fset.Position(fd.Pos()), fset.Position(fd.End())
		out = append(out, Func{
			Name:       f.Name.Name + " " + funcName(fd),
			File:       rel,
			Line:       start.Line,
			Lines:      end.Line - start.Line + 1,
			Complexity: Complexity(fd),
			Test:       test,
		})
	}
	return out
}

// funcName is "F" for a function, "(T).M" or "(*T).M" for a method.
func funcName(fd *ast.FuncDecl) string {
	if fd.Recv == nil || len(fd.Recv.List) == 0 {
		return fd.Name.Name
	}
	return "(" + recvType(fd.Recv.List[0].Type) + ")." + fd.Name.Name
}

func recvType(e ast.Expr) string {
	switch t := e.(type) {
	case *ast.StarExpr:
		return "*" + recvType(t.X)
	case *ast.IndexExpr: // T[P]
		return recvType(t.X)
	case *ast.IndexListExpr: // T[P, Q]
		return recvType(t.X)
	case *ast.Ident:
		return t.Name
	}
	return "?"
}

// Complexity is the cyclomatic complexity of fn as gocyclo counts it.
func Complexity(fn ast.Node) int {
	c := 1
	ast.Inspect(fn, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.IfStmt, *ast.ForStmt, *ast.RangeStmt:
			c++
		case *ast.CaseClause:
			if n.List != nil { // not default
				c++
			}
		case *ast.CommClause:
			if n.Comm != nil { // not default
				c++
			}
		case *ast.BinaryExpr:
			if n.Op == token.LAND || n.Op == token.LOR {
				c++
			}
		}
		return true
	})
	return c
}
