package main

import "github.com/warren-dev/warren/cmd/warren/internal/complete"

// completer completes agent references and provider names for the shell,
// from the home the flags name.
func (c *cli) completer() *complete.Completer {
	return &complete.Completer{Open: func() (string, complete.Caller, error) {
		home, err := resolveHome(c.homeFlag)
		if err != nil {
			return "", nil, err
		}
		c.home = home
		return home, c.daemon(), nil
	}}
}
