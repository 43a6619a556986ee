package sandbox

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// Checker finds bwrap and checks once that it can make a sandbox here.
// Its zero value uses "bwrap" from PATH.
type Checker struct {
	// Bin is the bwrap binary ("" = "bwrap" from PATH).
	Bin string

	mu   sync.Mutex
	path string // set by the first successful Check
}

// Path is the bwrap binary a successful Check found ("" before one).
func (c *Checker) Path() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.path
}

// Check returns the bwrap binary to use, or an error (wrapping
// ErrSandbox) that says what to install or enable. A success is kept; a
// failure is tried again next time (the operator may have fixed it).
func (c *Checker) Check(ctx context.Context) (string, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.path != "" {
		return c.path, nil
	}
	bin := c.Bin
	if bin == "" {
		bin = "bwrap"
	}
	path, err := exec.LookPath(bin)
	if err != nil {
		return "", fmt.Errorf("%w: bubblewrap (%s) is not installed or not on the daemon's PATH: install it (Debian and Ubuntu: apt-get install bubblewrap; Fedora: dnf install bubblewrap); a sandboxed agent never runs without it", ErrSandbox, bin)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, path, "--ro-bind", "/", "/", "--unshare-pid", "--die-with-parent", "true").CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("%w: %s cannot make a sandbox here: %v: %s. It needs unprivileged user namespaces: "+
			"sysctl -w kernel.unprivileged_userns_clone=1 (Debian), sysctl -w user.max_user_namespaces=15000, "+
			"and on Ubuntu 24.04 or later kernel.apparmor_restrict_unprivileged_userns=0 (or an AppArmor profile for bwrap); "+
			"inside a container, the container must allow them", ErrSandbox, path, err, strings.TrimSpace(string(out)))
	}
	c.path = path
	return path, nil
}
