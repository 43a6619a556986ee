package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/warren-dev/warren/internal/textcut"
)

// ErrGit marks a git call that failed (its error names the call and says
// what git said); ErrOldGit a git older than MinGitVersion.
var (
	ErrGit    = errors.New("git failed")
	ErrOldGit = errors.New("git is too old")
)

// MinGitVersion is the oldest git this package works with: core.fsync
// came in 2.36.
const MinGitVersion = "2.36"

// DefaultTimeout bounds one git call.
const DefaultTimeout = 2 * time.Minute

// Git runs the git command line. The zero value runs "git" from PATH with
// DefaultTimeout.
type Git struct {
	// Bin is the git executable ("" = "git" from PATH).
	Bin string
	// Timeout bounds one call (0 = DefaultTimeout).
	Timeout time.Duration
}

// settings are given to every call: fsync everything git writes (the
// log says a snapshot exists only once git made it durable), no hooks
// and no file-system monitor (warren's own calls run nobody's code: the
// repository's own config is further held to the logged one, see pin),
// no ext:: transport (a remote that is a command), worktrees that name
// their paths absolutely (pin compares them), no signing, no prompt, no
// automatic garbage collection in the middle of an operation, and an
// identity for warren's commits in repositories that have none.
var settings = []string{
	"-c", "core.fsync=all", "-c", "core.fsyncMethod=fsync",
	"-c", "core.hooksPath=/dev/null", "-c", "core.fsmonitor=false", "-c", "protocol.ext.allow=never",
	"-c", "worktree.useRelativePaths=false", "-c", "commit.gpgSign=false", "-c", "tag.gpgSign=false",
	"-c", "gc.auto=0", "-c", "maintenance.auto=false",
	"-c", "user.name=warren", "-c", "user.email=warren@localhost",
	"-c", "advice.detachedHead=false", "-c", "init.defaultBranch=main",
}

// scrubbed are the variables of the daemon's environment a call must not
// inherit: they would point git at another repository or index.
var scrubbed = []string{"GIT_DIR=", "GIT_WORK_TREE=", "GIT_INDEX_FILE=", "GIT_COMMON_DIR=", "GIT_OBJECT_DIRECTORY=",
	"GIT_NAMESPACE=", "GIT_CEILING_DIRECTORIES=", "GIT_CONFIG_PARAMETERS=", "GIT_CONFIG_COUNT=",
	"GIT_ALTERNATE_OBJECT_DIRECTORIES=", "GIT_REPLACE_REF_BASE=", "GIT_GRAFT_FILE="}

// run runs git in dir with extra environment variables and returns its
// standard output.
func (g Git) run(ctx context.Context, dir string, env []string, args ...string) (string, error) {
	return g.runWith(ctx, dir, env, "", args...)
}

// runWith runs git in dir with extra environment variables and stdin as
// its standard input, and returns its standard output.
func (g Git) runWith(ctx context.Context, dir string, env []string, stdin string, args ...string) (string, error) {
	bin := g.Bin
	if bin == "" {
		bin = "git"
	}
	timeout := g.Timeout
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	argv := append([]string(nil), settings...)
	for _, e := range env {
		if strings.HasPrefix(e, "GIT_INDEX_FILE=") {
			// A private index is a cache (losing it costs hashing the files
			// again): objects and refs are made durable, it is not; and it
			// keeps the untracked-file cache that makes `add -A` fast.
			argv = append(argv, "-c", "core.fsync=committed", "-c", "core.untrackedCache=true")
		}
	}
	cmd := exec.CommandContext(ctx, bin, append(argv, args...)...)
	cmd.Dir = dir
	cmd.Env = append(gitEnv(), env...)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	var errb bytes.Buffer
	cmd.Stderr = &errb
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	pipe, err := cmd.StdoutPipe()
	if err == nil {
		err = cmd.Start()
	}
	var out bytes.Buffer
	if err == nil {
		// Read git's output to its end before waiting for it: the wait
		// then finds git exiting instead of blocking a thread in wait4
		// for the whole call, which costs the Go runtime about 0.6 CPU-ms
		// (its monitor polls a blocked thread every 20 µs at first).
		_, rerr := out.ReadFrom(pipe)
		if err = cmd.Wait(); err == nil && rerr != nil {
			err = fmt.Errorf("reading its output: %w", rerr)
		}
	}
	if err != nil && cmd.Process == nil {
		// git never started: say why in words (exec's "fork/exec
		// /usr/bin/git: no such file or directory" also means a missing
		// working directory).
		if fi, serr := os.Stat(dir); dir != "" && (serr != nil || !fi.IsDir()) {
			return "", fmt.Errorf("%w: git %s: the directory %s does not exist", ErrGit, strings.Join(args, " "), dir)
		}
		return "", fmt.Errorf("%w: git %s (in %s) could not start: %v (is git installed and on the daemon's PATH?)", ErrGit, strings.Join(args, " "), dir, err)
	}
	if err != nil {
		what := strings.TrimSpace(errb.String())
		if what == "" {
			what = strings.TrimSpace(out.String())
		}
		if ctx.Err() == context.DeadlineExceeded {
			what = fmt.Sprintf("no answer within %s", timeout)
		}
		return out.String(), fmt.Errorf("%w: git %s (in %s): %v: %s", ErrGit, strings.Join(args, " "), dir, err,
			textcut.Cut(what, 2000, "…"))
	}
	return out.String(), nil
}

// gitEnv is the daemon's environment without what would redirect git,
// with prompts off.
func gitEnv() []string {
	var out []string
	for _, kv := range os.Environ() {
		drop := false
		for _, p := range scrubbed {
			if strings.HasPrefix(kv, p) {
				drop = true
				break
			}
		}
		if !drop {
			out = append(out, kv)
		}
	}
	// Replace refs (refs/replace/*), which an agent can write, never
	// change what warren's calls read.
	return append(out, "GIT_TERMINAL_PROMPT=0", "GIT_OPTIONAL_LOCKS=0", "LC_ALL=C", "GIT_NO_REPLACE_OBJECTS=1")
}

// line is out's first line, trimmed.
func line(out string) string {
	s, _, _ := strings.Cut(out, "\n")
	return strings.TrimSpace(s)
}

var versionRE = regexp.MustCompile(`git version (\d+)\.(\d+)`)

// CheckVersion checks that the installed git is MinGitVersion or later
// and returns its version; the error says what to install.
func (g Git) CheckVersion(ctx context.Context) (string, error) {
	out, err := g.run(ctx, "", nil, "version")
	if err != nil {
		return "", fmt.Errorf("workspaces need git %s or later on the daemon's PATH: %w", MinGitVersion, err)
	}
	m := versionRE.FindStringSubmatch(out)
	if m == nil {
		return "", fmt.Errorf("%w: cannot read the version in %q; workspaces need git %s or later", ErrOldGit, line(out), MinGitVersion)
	}
	major, _ := strconv.Atoi(m[1])
	minor, _ := strconv.Atoi(m[2])
	if major < 2 || (major == 2 && minor < 36) {
		return line(out), fmt.Errorf("%w: %s; workspaces need git %s or later (core.fsync): upgrade git", ErrOldGit, line(out), MinGitVersion)
	}
	return line(out), nil
}
