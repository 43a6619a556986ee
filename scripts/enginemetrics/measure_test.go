package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestForwarders(t *testing.T) {
	for _, tc := range []struct {
		decl string
		fwd  bool
	}{
		{"func f() int { return g() }", true},
		{"func (c *C) f(x int) error { return c.x.Do(x) }", true},
		{"func (c C) f() { c.g() }", true},
		{"func (c *C[A]) f() { (c.g)() }", true},
		{"func f(x int) T { return T(x) }", true},                 // a conversion
		{"func (c *C) f() Config { return *c.cfg.Load() }", true}, // a dereference
		{"func f() int { return g().n }", true},                   // a field of the result
		{"func f() int { return (g()) }", true},
		{"func f(x any) T { return g(x).(T) }", true},
		{"func (c *C) f() string { return c.id }", false}, // a field, no call
		{"func f() T { return T{x: g()} }", false},        // a composite literal
		{"func f() *T { return &T{} }", false},
		{"func f() bool { return !g() }", false},
		{"func f() bool { return g() || h() }", false},
		{"func f() (int, error) { return g(), nil }", false}, // two results
		{"func f() (int, error) { return g() }", true},       // one result that is a call
		{"func f() { go g() }", false},
		{"func f() { defer g() }", false},
		{"func f() { x = g() }", false},
		{"func f() { <-ch }", false},
		{"func f() {}", false},
		{"func f() int { g(); return 1 }", false},
		{"func f() { if x { g() } }", false},
	} {
		src := "package p\n\n" + tc.decl + "\n"
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, "p.go", src, 0)
		if err != nil {
			t.Fatalf("%s: %v", tc.decl, err)
		}
		all, fwd := Forwarders(fset, f)
		if len(all) != 1 {
			t.Fatalf("%s: %d functions, want 1", tc.decl, len(all))
		}
		if got := len(fwd) == 1; got != tc.fwd {
			t.Errorf("%s: forwarder %v, want %v", tc.decl, got, tc.fwd)
		}
	}
}

func TestForwardersNamesAndBodilessFuncs(t *testing.T) {
	src := `package p

func a() { b() }
func (t T) b() { a() }
func (t *T[A, B]) c() { a() }
func d() int
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	all, fwd := Forwarders(fset, f)
	want := []Func{{"a", "p.go:3"}, {"T.b", "p.go:4"}, {"(*T).c", "p.go:5"}} // d has no body: not counted
	if !reflect.DeepEqual(all, want) || !reflect.DeepEqual(fwd, want) {
		t.Fatalf("Forwarders = %v, %v; want %v twice", all, fwd, want)
	}
}

func TestContextCalls(t *testing.T) {
	for _, tc := range []struct {
		name, src string
		want      []ContextCall
	}{
		{"both, and a parent", `package p
import "context"
func f() {
	g(context.Background())
	g(context.TODO())
	ctx, cancel := context.WithCancel(context.Background())
	_, _ = context.WithTimeout((context.Background()), 1)
	_, _ = ctx, cancel
}`, []ContextCall{
			{"p.go:4", "context.Background()", false},
			{"p.go:5", "context.TODO()", false},
			{"p.go:6", "context.Background()", true},
			{"p.go:7", "context.Background()", true},
		}},
		{"a parent in another argument", `package p
import "context"
func f(ctx context.Context) { context.WithValue(ctx, k, context.Background()) }`,
			[]ContextCall{{"p.go:3", "context.Background()", false}}},
		{"renamed import", `package p
import stdctx "context"
func f() { g(stdctx.Background()) }`, []ContextCall{{"p.go:3", "context.Background()", false}}},
		{"no import of context", `package p
func f() { context.Background() }`, nil},
		{"another package named context", `package p
import "example.com/context"
func f() { context.Background() }`, nil},
		{"other functions", `package p
import "context"
func f(ctx context.Context) { _, _ = context.WithCancel(ctx); g(context.Background) }`, nil},
	} {
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, "p.go", tc.src, 0)
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		if got := ContextCalls(fset, f); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: ContextCalls = %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestPackageDirsAndGoFiles(t *testing.T) {
	root := t.TempDir()
	for _, rel := range []string{"e/e.go", "e/e_test.go", "e/internal/a/a.go", "e/internal/b/b_test.go",
		"e/internal/c/d/d.go", "e/internal/testdata/t.go", "e/internal/_x/x.go"} {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("package x\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(root)
	dirs, err := packageDirs("e/internal")
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"e/internal/a", "e/internal/c/d"}; !reflect.DeepEqual(dirs, want) {
		t.Errorf("packageDirs = %v, want %v", dirs, want)
	}
	files, err := goFiles("e", false)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{filepath.Join("e", "e.go")}; !reflect.DeepEqual(files, want) {
		t.Errorf("goFiles = %v, want %v", files, want)
	}
}

func TestDiffPackages(t *testing.T) {
	read := func(s string) map[string]int {
		t.Helper()
		m, err := ReadProfile(strings.NewReader(s))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	one := read(`mode: count
m/a/a.go:1.1,2.2 1 3
m/b/b.go:1.1,2.2 1 0
m/c/c.go:1.1,2.2 1 1
m/c/c.go:3.1,4.2 1 1
m/d/d.go:1.1,2.2 1 5
`)
	two := read(`mode: count
m/a/a.go:1.1,2.2 1 3
m/b/b.go:1.1,2.2 1 2
m/c/c.go:1.1,2.2 1 1
m/c/c.go:3.1,4.2 1 2
m/d/d.go:1.1,2.2 1 5
m/d/d.go:1.1,2.2 1 1
m/e/e.go:1.1,2.2 1 0
`)
	// a: same; b: 0 -> 2; c: one block more; d: a block listed twice sums
	// to more; e: a block only in the second profile, never run.
	if got, want := DiffPackages(one, two), []string{"m/b", "m/c", "m/d"}; !reflect.DeepEqual(got, want) {
		t.Fatalf("DiffPackages = %v, want %v", got, want)
	}
	if _, err := ReadProfile(strings.NewReader("m/a.go:1.1,2.2 1\n")); err == nil {
		t.Fatal("ReadProfile accepted a line without a count")
	}
}

func TestImplementsInstantiatesGenerics(t *testing.T) {
	src := `package p

type Agent interface{ ID() string }

type Env[A Agent] interface{ Poke(a A) }

type rec struct{}

func (*rec) ID() string { return "" }

type env struct{}

func (env) Poke(*rec) {}

type other struct{}

func (other) Poke(int) {}

type box[T any] struct{ v T }

func (b *box[T]) Poke(T) {}

func use[A Agent](Env[A]) {}

var _ = use[*rec]
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	info := &types.Info{Defs: map[*ast.Ident]types.Object{}, Instances: map[*ast.Ident]types.Instance{}}
	pkg, err := new(types.Config).Check("p", fset, []*ast.File{f}, info)
	if err != nil {
		t.Fatal(err)
	}
	args := typeArgs([]*checked{{path: "p", pkg: pkg, info: info}})
	if len(args[1]) != 1 || args[1][0][0].String() != "*p.rec" {
		t.Fatalf("typeArgs = %v, want [[*p.rec]]", args)
	}
	lookup := func(name string) *types.TypeName { return pkg.Scope().Lookup(name).(*types.TypeName) }
	for _, tc := range []struct {
		typ, iface string
		want       bool
	}{
		{"rec", "Agent", true}, // through a pointer
		{"env", "Env", true},   // Env[*rec]
		{"other", "Env", false},
		{"box", "Env", true}, // box[*rec] implements Env[*rec]
		{"env", "Agent", false},
	} {
		ok, structural := implements(lookup(tc.typ), lookup(tc.iface), args)
		if ok != tc.want || structural {
			t.Errorf("implements(%s, %s) = %v, %v; want %v by instantiation", tc.typ, tc.iface, ok, structural, tc.want)
		}
	}
	// With no instantiation to try, the method names decide.
	ok, structural := implements(lookup("other"), lookup("Env"), nil)
	if !ok || !structural {
		t.Errorf("implements(other, Env) with no type arguments = %v, %v; want true by method names", ok, structural)
	}
}
