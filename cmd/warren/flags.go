package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
)

// flags is a subcommand's FlagSet with the common --home and --json flags.
type flags struct {
	*flag.FlagSet
	c     *cli
	name  string
	usage string
	home  string
	json  bool
}

func newFlags(c *cli, name string) *flags {
	f := &flags{FlagSet: flag.NewFlagSet(name, flag.ContinueOnError), c: c, name: name}
	f.SetOutput(io.Discard)
	if cmd, ok := commands()[name]; ok {
		f.usage = cmd.usage
	}
	f.StringVar(&f.home, "home", "", "home directory (default $WARREN_HOME, else ~/.warren)")
	f.BoolVar(&f.json, "json", false, "print the RPC result as JSON and nothing else")
	return f
}

// parse parses args, allowing flags and positional arguments in any order
// ("--" ends the flags), checks the number of positional arguments and
// resolves the home directory. max < 0 means no upper limit.
func (f *flags) parse(args []string, min, max int) ([]string, error) {
	var pos []string
	for {
		if err := f.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, &exitError{code: exitOK, msg: f.help()}
			}
			return nil, usageErr(f.usage, "%s", err)
		}
		rest := f.Args()
		if len(rest) == 0 {
			break
		}
		// flag.Parse stops at the first non-flag, or after "--".
		if len(args) > len(rest) && args[len(args)-len(rest)-1] == "--" {
			pos = append(pos, rest...)
			break
		}
		pos = append(pos, rest[0])
		args = rest[1:]
	}
	if len(pos) < min || (max >= 0 && len(pos) > max) {
		switch {
		case len(pos) < min:
			return nil, usageErr(f.usage, "%s: missing argument", f.name)
		default:
			return nil, usageErr(f.usage, "%s: unexpected argument %q", f.name, pos[max])
		}
	}
	if f.json {
		f.c.json = true
	}
	if f.home != "" {
		f.c.homeFlag = f.home
	}
	home, err := resolveHome(f.c.homeFlag)
	if err != nil {
		return nil, err
	}
	f.c.home = home
	return pos, nil
}

// help is the usage line and the flags, for -h.
func (f *flags) help() string {
	var b strings.Builder
	fmt.Fprintf(&b, "usage: %s\n\nflags:\n", f.usage)
	f.SetOutput(&b)
	f.PrintDefaults()
	f.SetOutput(io.Discard)
	return b.String()
}

// resolveHome applies SPEC 2: --home, else $WARREN_HOME, else ~/.warren.
func resolveHome(flagValue string) (string, error) {
	h := flagValue
	if h == "" {
		h = os.Getenv("WARREN_HOME")
	}
	if h == "" {
		user, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("cannot find the home directory (%w); pass --home DIR or set WARREN_HOME", err)
		}
		h = filepath.Join(user, ".warren")
	}
	abs, err := filepath.Abs(h)
	if err != nil {
		return "", fmt.Errorf("home %q: %w", h, err)
	}
	return abs, nil
}

// kvFlag collects repeated k=v values.
type kvFlag map[string]string

func (m kvFlag) String() string {
	parts := make([]string, 0, len(m))
	for k, v := range m {
		parts = append(parts, k+"="+v)
	}
	return strings.Join(parts, ",")
}

func (m kvFlag) Set(s string) error {
	k, v, ok := strings.Cut(s, "=")
	if !ok || k == "" {
		return fmt.Errorf("metadata %q is not key=value", s)
	}
	m[k] = v
	return nil
}
