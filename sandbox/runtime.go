package sandbox

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Runtime lists what program argv needs read-only inside the sandbox
// besides the system: each of its files (argv[0] and a script argument,
// as given and with links resolved), the node_modules tree such a file
// lives in, and the installation prefix of its interpreter (a shebang's,
// "#!/usr/bin/env node" looked up in path, the agent's PATH): the
// directory above the bin/ it is in, when that looks like a prefix (it
// has a lib/), and is not a directory that holds home (the operator's
// home or a parent of it). Files under the system directories are left
// out (they are bound anyway).
func Runtime(argv []string, path, home string) []string {
	r := runtimeSet{home: filepath.Clean(home), seen: map[string]bool{}}
	for i, a := range argv {
		if i > 1 {
			break
		}
		if i == 1 && !strings.Contains(a, "/") {
			continue // a flag or a name, not a script
		}
		p := a
		if !strings.Contains(p, "/") {
			lp, err := LookPath(p, path)
			if err != nil {
				continue
			}
			p = lp
		}
		r.program(p, path)
	}
	return r.out
}

type runtimeSet struct {
	home string
	seen map[string]bool
	out  []string
}

func (r *runtimeSet) add(p string) {
	if p == "" || r.seen[p] || system(p) {
		return
	}
	r.seen[p] = true
	r.out = append(r.out, p)
}

// program adds a program file, what it resolves to, its node_modules and
// its interpreter's prefix.
func (r *runtimeSet) program(p, path string) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return
	}
	for _, f := range []string{abs, real} {
		if nm := nodeModules(f); nm != "" {
			r.add(nm)
		} else {
			r.add(f)
		}
	}
	r.prefix(abs)
	if interp := shebang(real, path); interp != "" {
		r.interpreter(interp)
	}
	r.prefix(real)
}

// interpreter adds an interpreter and its installation prefix.
func (r *runtimeSet) interpreter(p string) {
	real, err := filepath.EvalSymlinks(p)
	if err != nil {
		return
	}
	r.add(p)
	r.add(real)
	r.prefix(real)
}

// prefix adds the installation prefix of a binary in <prefix>/bin when
// it has a lib/, and the root of a version manager (pyenv, rbenv, asdf)
// for a shim in <root>/shims; never the root, the home, a directory that
// holds the home, or the home's .local (it holds more than programs).
func (r *runtimeSet) prefix(bin string) {
	dir := filepath.Dir(bin)
	pre := filepath.Dir(dir)
	switch {
	case pre == "/" || pre == r.home || strings.HasPrefix(r.home+"/", pre+"/") || pre == filepath.Join(r.home, ".local"):
	case filepath.Base(dir) == "shims":
		r.add(pre)
	case filepath.Base(dir) == "bin":
		if fi, err := os.Stat(filepath.Join(pre, "lib")); err == nil && fi.IsDir() {
			r.add(pre)
		}
	}
}

// nodeModules is the outermost node_modules directory p is inside ("" when
// none).
func nodeModules(p string) string {
	parts := strings.Split(p, string(filepath.Separator))
	for i, part := range parts {
		if part == "node_modules" {
			return strings.Join(parts[:i+1], string(filepath.Separator))
		}
	}
	return ""
}

// shebang is the interpreter a script's "#!" line names, "/usr/bin/env X"
// looked up in path; "" for a file without one.
func shebang(p, path string) string {
	f, err := os.Open(p)
	if err != nil {
		return ""
	}
	defer f.Close()
	line, err := bufio.NewReader(f).ReadString('\n')
	if err != nil && line == "" {
		return ""
	}
	rest, ok := strings.CutPrefix(line, "#!")
	if !ok {
		return ""
	}
	fields := strings.Fields(rest)
	if len(fields) == 0 {
		return ""
	}
	if filepath.Base(fields[0]) == "env" {
		for _, f := range fields[1:] {
			if strings.HasPrefix(f, "-") {
				continue
			}
			if lp, err := LookPath(f, path); err == nil {
				return lp
			}
			return ""
		}
		return ""
	}
	return fields[0]
}

// LookPath finds an executable named name in the directories of path
// (a PATH value), as exec.LookPath does in $PATH; not found wraps
// exec.ErrNotFound.
func LookPath(name, path string) (string, error) {
	for _, dir := range filepath.SplitList(path) {
		if dir == "" {
			continue
		}
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%w: %q in the agent's PATH (%s)", exec.ErrNotFound, name, path)
}

// system says whether p is under a directory the sandbox always binds.
func system(p string) bool {
	for _, s := range []string{"/usr", "/etc", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32"} {
		if p == s || strings.HasPrefix(p, s+"/") {
			return true
		}
	}
	return false
}
