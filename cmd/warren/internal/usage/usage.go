// Package usage makes the command tree's usage errors (exit status 2,
// package exit) say what was wrong: a wrong number of arguments names
// what is missing or extra, and an unknown command or flag comes with the
// closest known one ("did you mean"), a transposition counting as one
// edit and a long flag typed with one dash recognised.
package usage

import (
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/warren-dev/warren/cmd/warren/internal/exit"
	"github.com/warren-dev/warren/internal/suggest"
)

// UnknownCommand is the usage error for a mistyped command, with cobra's
// suggestions.
func UnknownCommand(cmd *cobra.Command, typed string) error {
	msg := fmt.Sprintf("unknown command %q for %q", typed, cmd.CommandPath())
	if s := bestSuggestions(typed, cmd.SuggestionsFor(typed)); len(s) > 0 {
		msg += "; did you mean " + strings.Join(quoteAll(s), " or ") + "?"
	}
	return exit.Usagef(Subcommands(cmd), "%s", msg)
}

// Subcommands is "warren agent create|list|... [args] [flags]".
func Subcommands(cmd *cobra.Command) string {
	var names []string
	for _, s := range cmd.Commands() {
		if s.IsAvailableCommand() {
			names = append(names, s.Name())
		}
	}
	return cmd.CommandPath() + " " + strings.Join(names, "|") + " [args] [flags]"
}

// bestSuggestions keeps, of cobra's suggestions, the closest: the fewest
// edits, and among those one with the same letters (a transposition).
func bestSuggestions(typed string, cands []string) []string {
	if len(cands) < 2 {
		return cands
	}
	best, bestD := []string(nil), -1
	for _, c := range cands {
		d := suggest.Distance(strings.ToLower(typed), c)
		if sameLetters(typed, c) {
			d-- // a transposition counts as one edit, not two
		}
		switch {
		case bestD < 0 || d < bestD:
			best, bestD = []string{c}, d
		case d == bestD:
			best = append(best, c)
		}
	}
	return best
}

func sameLetters(a, b string) bool {
	ra, rb := []rune(strings.ToLower(a)), []rune(b)
	if len(ra) != len(rb) {
		return false
	}
	sort.Slice(ra, func(i, j int) bool { return ra[i] < ra[j] })
	sort.Slice(rb, func(i, j int) bool { return rb[i] < rb[j] })
	return string(ra) == string(rb)
}

func quoteAll(s []string) []string {
	out := make([]string, len(s))
	for i, x := range s {
		out[i] = fmt.Sprintf("%q", x)
	}
	return out
}

var (
	unknownLong  = regexp.MustCompile(`^unknown flag: --([^ =]+)`)
	unknownShort = regexp.MustCompile(`^unknown shorthand flag: '.' in -([^ =]+)`)
)

// FlagError turns pflag's errors into usage errors (exit 2), suggesting the
// flag that was probably meant.
func FlagError(cmd *cobra.Command, err error) error {
	msg := err.Error()
	var names []string
	addNames := func(fs *pflag.FlagSet) {
		fs.VisitAll(func(f *pflag.Flag) {
			if !f.Hidden {
				names = append(names, f.Name)
			}
		})
	}
	addNames(cmd.Flags())
	addNames(cmd.InheritedFlags())
	if m := unknownLong.FindStringSubmatch(msg); m != nil {
		if s := suggest.Closest(m[1], names, 2); s != "" {
			msg += "; did you mean --" + s + "?"
		}
	} else if m := unknownShort.FindStringSubmatch(msg); m != nil {
		// -home: a long flag given with one dash.
		word := m[1]
		if s := suggest.Closest(word, names, 1); s != "" {
			msg += "; did you mean --" + s + "? (long flags take two dashes)"
		}
	}
	return exit.Usagef(cmd.UseLine(), "%s", msg)
}

// Args checks the number of positional arguments (max < 0: no upper
// bound); a wrong number is a usage error naming what is missing or extra.
func Args(min, max int, names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		switch {
		case len(a) < min:
			what := "an argument"
			if len(a) < len(names) {
				what = names[len(a)]
			}
			return exit.Usagef(cmd.UseLine(), "%s: missing %s", cmd.CommandPath(), what)
		case max >= 0 && len(a) > max:
			return exit.Usagef(cmd.UseLine(), "%s: unexpected argument %q", cmd.CommandPath(), a[max])
		}
		return nil
	}
}
