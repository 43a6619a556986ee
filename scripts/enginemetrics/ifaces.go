package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"go/ast"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
)

// Iface is an interface of the engine and the named types of the module
// that implement it.
type Iface struct {
	Name       string   // "engine/internal/mail.Env"
	Prod       []string // implementers in non-test code ("engine.mailEnv")
	Tests      []string // more implementers declared in _test.go files
	Structural bool     // matched by method names (see the package doc)
}

// listed is what go list tells of a package.
type listed struct {
	ImportPath, Dir, Export, ForTest   string
	GoFiles, TestGoFiles, XTestGoFiles []string
	Error                              *struct{ Err string }
}

// checked is one type-checked package: the production code of a module
// package, or its test variant (with its _test.go files of the same
// package), or its external test package.
type checked struct {
	path string // import path ("p" for p's variants too)
	pkg  *types.Package
	info *types.Info
	test bool // a test variant or external test package
}

// universe holds the module's packages type-checked from source, the
// others read from the compiler's export data.
type universe struct {
	module string
	fset   *token.FileSet
	prod   map[string]*checked // by import path
	tests  []*checked          // test variants and external test packages
	errs   []string            // type errors (reported, not fatal)
}

// Interfaces finds the interfaces declared in the packages that isEngine
// selects and the named types of the module implementing each.
func Interfaces(module string, isEngine func(rel string) bool) ([]Iface, []string, error) {
	u, err := load(module)
	if err != nil {
		return nil, nil, err
	}
	prodArgs := typeArgs(u.prodChecked())
	allArgs := typeArgs(append(u.prodChecked(), u.tests...))
	type typeIn struct {
		in *checked
		tn *types.TypeName
	}
	var prodTypes, testTypes []typeIn
	for _, d := range u.prodChecked() {
		for _, tn := range namedTypes(u.fset, d, false) {
			prodTypes = append(prodTypes, typeIn{d, tn})
		}
	}
	for _, d := range u.tests {
		for _, tn := range namedTypes(u.fset, d, true) {
			testTypes = append(testTypes, typeIn{d, tn})
		}
	}
	var out []Iface
	for _, c := range u.prodChecked() {
		if !isEngine(u.rel(c.path)) {
			continue
		}
		scope := c.pkg.Scope()
		for _, name := range scope.Names() {
			obj, ok := scope.Lookup(name).(*types.TypeName)
			if !ok || obj.IsAlias() || !isMethodSet(obj.Type()) {
				continue
			}
			it := Iface{Name: u.rel(c.path) + "." + name}
			for _, t := range prodTypes {
				if ok, structural := implements(t.tn, obj, prodArgs); ok {
					it.Prod = append(it.Prod, u.rel(t.in.path)+"."+t.tn.Name())
					it.Structural = it.Structural || structural
				}
			}
			for _, t := range testTypes {
				// The interface as this test package sees it: the test
				// variant's own when it is the interface's package.
				iobj := obj
				if t.in.path == c.path {
					if o, ok := testScope(t.in, c.path).Lookup(name).(*types.TypeName); ok {
						iobj = o
					}
				}
				if ok, structural := implements(t.tn, iobj, allArgs); ok {
					it.Tests = append(it.Tests, u.rel(t.in.path)+"."+t.tn.Name())
					it.Structural = it.Structural || structural
				}
			}
			sort.Strings(it.Prod)
			sort.Strings(it.Tests)
			out = append(out, it)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, u.errs, nil
}

// testScope is the scope holding the package under test's declarations:
// the test variant's own, or, for an external test package, that of the
// variant it imports.
func testScope(d *checked, path string) *types.Scope {
	if d.pkg.Path() == path {
		return d.pkg.Scope()
	}
	for _, im := range d.pkg.Imports() {
		if im.Path() == path {
			return im.Scope()
		}
	}
	return types.NewScope(nil, token.NoPos, token.NoPos, "")
}

// isMethodSet reports whether t is an interface that a type can implement
// (not a constraint with a type set) with at least one method.
func isMethodSet(t types.Type) bool {
	it, ok := t.Underlying().(*types.Interface)
	return ok && it.IsMethodSet() && it.NumMethods() > 0
}

// namedTypes lists the named non-interface types a package declares, at
// package level or in functions; with onlyTests, those of _test.go files.
func namedTypes(fset *token.FileSet, c *checked, onlyTests bool) []*types.TypeName {
	var out []*types.TypeName
	for id, obj := range c.info.Defs {
		tn, ok := obj.(*types.TypeName)
		if !ok || tn.IsAlias() || id.Name == "_" {
			continue
		}
		if _, ok := tn.Type().(*types.Named); !ok {
			continue // a type parameter
		}
		if _, ok := tn.Type().Underlying().(*types.Interface); ok {
			continue
		}
		if onlyTests && !strings.HasSuffix(fset.Position(tn.Pos()).Filename, "_test.go") {
			continue
		}
		out = append(out, tn)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Pos() < out[j].Pos() })
	return out
}

// implements reports whether tn or a pointer to it implements iface. A
// generic interface or type is instantiated with every type argument list
// of its arity that the module instantiates anything with (args) and
// that satisfies its constraints; when none does, the method names decide
// (structural).
func implements(tn, iface *types.TypeName, args map[int][][]types.Type) (ok, structural bool) {
	ifaces := instances(iface.Type().(*types.Named), args)
	typs := instances(tn.Type().(*types.Named), args)
	if len(ifaces) == 0 || len(typs) == 0 {
		return sameMethodNames(tn, iface), true
	}
	for _, i := range ifaces {
		it := i.Underlying().(*types.Interface)
		for _, t := range typs {
			if types.Implements(t, it) || types.Implements(types.NewPointer(t), it) {
				return true, false
			}
		}
	}
	return false, false
}

// instances is n itself, or n instantiated with each list of args.
func instances(n *types.Named, args map[int][][]types.Type) []types.Type {
	k := n.TypeParams().Len()
	if k == 0 {
		return []types.Type{n}
	}
	var out []types.Type
	for _, list := range args[k] {
		if t, err := types.Instantiate(nil, n, list, true); err == nil {
			out = append(out, t)
		}
	}
	return out
}

// sameMethodNames reports whether *tn has a method of every name iface
// has, with as many parameters and results.
func sameMethodNames(tn, iface *types.TypeName) bool {
	it := iface.Type().Underlying().(*types.Interface)
	for i := range it.NumMethods() {
		m := it.Method(i)
		obj, _, _ := types.LookupFieldOrMethod(types.NewPointer(tn.Type()), false, m.Pkg(), m.Name())
		f, ok := obj.(*types.Func)
		if !ok {
			return false
		}
		want, got := m.Type().(*types.Signature), f.Type().(*types.Signature)
		if want.Params().Len() != got.Params().Len() || want.Results().Len() != got.Results().Len() {
			return false
		}
	}
	return true
}

// typeArgs collects the type argument lists the packages instantiate
// generic types and functions with, by arity, leaving out lists that
// hold a type parameter.
func typeArgs(cs []*checked) map[int][][]types.Type {
	out := map[int][][]types.Type{}
	seen := map[string]bool{}
	for _, c := range cs {
		for _, inst := range c.info.Instances {
			var list []types.Type
			generic := false
			for i := range inst.TypeArgs.Len() {
				t := inst.TypeArgs.At(i)
				generic = generic || hasTypeParam(t)
				list = append(list, t)
			}
			key := fmt.Sprint(c.test, list)
			if generic || seen[key] {
				continue
			}
			seen[key] = true
			out[len(list)] = append(out[len(list)], list)
		}
	}
	return out
}

func hasTypeParam(t types.Type) bool {
	switch x := t.(type) {
	case *types.TypeParam:
		return true
	case *types.Pointer:
		return hasTypeParam(x.Elem())
	case *types.Slice:
		return hasTypeParam(x.Elem())
	case *types.Array:
		return hasTypeParam(x.Elem())
	case *types.Chan:
		return hasTypeParam(x.Elem())
	case *types.Map:
		return hasTypeParam(x.Key()) || hasTypeParam(x.Elem())
	case *types.Named:
		for i := range x.TypeArgs().Len() {
			if hasTypeParam(x.TypeArgs().At(i)) {
				return true
			}
		}
	}
	return false
}

func (u *universe) prodChecked() []*checked {
	out := make([]*checked, 0, len(u.prod))
	for _, c := range u.prod {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out
}

// rel is an import path relative to the module ("." for its root).
func (u *universe) rel(path string) string {
	if path == u.module {
		return "."
	}
	return strings.TrimPrefix(path, u.module+"/")
}

// load type-checks the module's packages from source, production code
// first (in go list's dependency order), then each package's test
// variant and external test package; the packages of other modules and
// of the standard library come from the export data that go list -export
// writes (compiling them only, not the module's).
func load(module string) (*universe, error) {
	var pkgs []listed
	var others []string
	err := goList([]string{"-deps", "-test", "-json=ImportPath,Dir,ForTest,GoFiles,TestGoFiles,XTestGoFiles,Error", "./..."}, func(p listed) {
		switch {
		case p.ForTest != "" || strings.HasSuffix(p.ImportPath, ".test"):
			// test variants: checked from source below
		case p.ImportPath == module || strings.HasPrefix(p.ImportPath, module+"/"):
			pkgs = append(pkgs, p)
		case p.ImportPath != "unsafe":
			others = append(others, p.ImportPath)
		}
	})
	if err != nil {
		return nil, err
	}
	exports := map[string]string{}
	err = goList(append([]string{"-export", "-json=ImportPath,Export,Error"}, others...), func(p listed) {
		exports[p.ImportPath] = p.Export
	})
	if err != nil {
		return nil, err
	}
	u := &universe{module: module, fset: token.NewFileSet(), prod: map[string]*checked{}}
	gc := importer.ForCompiler(u.fset, "gc", func(path string) (io.ReadCloser, error) {
		if f, ok := exports[path]; ok {
			return os.Open(f)
		}
		return nil, fmt.Errorf("no export data for %s", path)
	})
	imp := func(under *checked) types.ImporterFrom {
		return importerFunc(func(path string) (*types.Package, error) {
			if under != nil && path == under.path {
				return under.pkg, nil
			}
			if c, ok := u.prod[path]; ok {
				return c.pkg, nil
			}
			return gc.Import(path)
		})
	}
	for _, p := range pkgs {
		if len(p.GoFiles) == 0 {
			continue
		}
		c, err := u.check(p.ImportPath, p.Dir, p.GoFiles, imp(nil), false)
		if err != nil {
			return nil, err
		}
		u.prod[p.ImportPath] = c
	}
	for _, p := range pkgs {
		var variant *checked
		if len(p.TestGoFiles) > 0 {
			c, err := u.check(p.ImportPath, p.Dir, append(append([]string(nil), p.GoFiles...), p.TestGoFiles...), imp(nil), true)
			if err != nil {
				return nil, err
			}
			u.tests = append(u.tests, c)
			variant = c
		} else {
			variant = u.prod[p.ImportPath]
		}
		if len(p.XTestGoFiles) > 0 {
			c, err := u.check(p.ImportPath+"_test", p.Dir, p.XTestGoFiles, imp(variant), true)
			if err != nil {
				return nil, err
			}
			c.path = p.ImportPath // an external test package tests its package
			u.tests = append(u.tests, c)
		}
	}
	return u, nil
}

// goList runs go list -e with args and hands each package to f; a
// package go list reports an error for is an error.
func goList(args []string, f func(listed)) error {
	cmd := exec.Command("go", append([]string{"list", "-e"}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("go list: %v\n%s", err, stderr.String())
	}
	for dec := json.NewDecoder(bytes.NewReader(out)); dec.More(); {
		var p listed
		if err := dec.Decode(&p); err != nil {
			return fmt.Errorf("go list output: %w", err)
		}
		if p.Error != nil {
			return fmt.Errorf("go list: %s: %s", p.ImportPath, p.Error.Err)
		}
		f(p)
	}
	return nil
}

// check parses and type-checks one package; type errors are collected
// in u.errs, not fatal.
func (u *universe) check(path, dir string, files []string, imp types.Importer, test bool) (*checked, error) {
	names := make([]string, len(files))
	for i, f := range files {
		names[i] = filepath.Join(dir, f)
	}
	asts, err := parseFiles(u.fset, names)
	if err != nil {
		return nil, err
	}
	info := &types.Info{Defs: map[*ast.Ident]types.Object{}, Instances: map[*ast.Ident]types.Instance{}}
	conf := types.Config{Importer: imp, Error: func(err error) {
		if len(u.errs) < 20 {
			u.errs = append(u.errs, err.Error())
		}
	}}
	pkg, _ := conf.Check(path, u.fset, asts, info)
	return &checked{path: path, pkg: pkg, info: info, test: test}, nil
}

type importerFunc func(path string) (*types.Package, error)

func (f importerFunc) Import(path string) (*types.Package, error) { return f(path) }

func (f importerFunc) ImportFrom(path, _ string, _ types.ImportMode) (*types.Package, error) {
	return f(path)
}
