package engine

import (
	"context"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/warren-dev/warren/launch"
	"github.com/warren-dev/warren/provider"
	"github.com/warren-dev/warren/sandbox"
	"github.com/warren-dev/warren/schema"
)

// Sandboxes (SPEC 12): an agent may run confined with bubblewrap (package
// sandbox), every process of it: the scripted program or the agent CLI
// and the MCP bridge that CLI starts.
//
//   - Who: an agent created with Sandbox, one whose provider entry has a
//     "sandbox", and every child of a sandboxed agent (a child never has
//     more of the host than its parent). The sandbox is resolved at
//     create and logged in agent.created: a later edit of config.json
//     does not take it away.
//   - bwrap is checked at create (sandbox.Checker): missing, or unable to
//     make a namespace here, the create fails saying what to install or
//     enable. There is no fallback to running unconfined.
//   - Its private home, <home>/agents/<id>/home, is made at create
//     (seeded with the entry's seed_home files from the operator's home)
//     and is its HOME. It is on the real disk like the workspaces (the
//     agent's processes use it), not behind the engine's FS.
//   - Its processes reach warren only through its own socket,
//     <home>/agents/<id>/agent.sock (CoreOptions.AgentSocket, served by
//     the daemon: tool.call for that agent only), which WARREN_SOCKET
//     names inside.

// resolveSandbox sets spec.sandbox: asked for (spec.Sandbox), wanted by
// the provider entry, or inherited from a sandboxed parent; and checks
// that bwrap can make one here.
func (c *Core) resolveSandbox(ctx context.Context, spec *CreateSpec) error {
	var parent *schema.SandboxData
	if spec.ParentID != "" {
		if pa, ok := c.agent(spec.ParentID); ok {
			parent = pa.ReopenSettings().Sandbox
		}
	}
	entry := c.config().Sandbox(spec.Provider)
	switch {
	case entry != nil:
		spec.sandbox = &schema.SandboxData{Type: "bwrap", Network: entry.Network, BindRO: entry.BindRO, BindRW: entry.BindRW}
	case parent != nil:
		cp := *parent
		spec.sandbox = &cp
	case spec.Sandbox:
		spec.sandbox = &schema.SandboxData{Type: "bwrap", Network: true}
	default:
		return nil
	}
	if parent != nil && !parent.Network {
		spec.sandbox.Network = false // a child gets no more of the host than its parent
	}
	if c.opts.AgentSocket == nil {
		return failf(ErrInvalid, "this daemon cannot run sandboxed agents: it serves no agent sockets")
	}
	if _, err := c.sandboxes.Check(ctx); err != nil {
		return failf(ErrInvalid, "a sandbox for %s: %w", spec.Name, err)
	}
	if spec.Workspace == nil && spec.Cwd != "" && inLinkedWorktree(spec.Cwd) {
		// Its git directory is outside the cwd, and the sandbox binds only
		// what the log names (a warren workspace's directories), never
		// what a .git file the agent can write points to.
		c.log.Warn("the sandboxed agent's cwd is in a linked git worktree that is not a warren workspace: git will not work inside its sandbox (its repository is outside the cwd); give it a workspace instead (workspace.repo)",
			"agent", spec.Name, "cwd", spec.Cwd)
	}
	return nil
}

// inLinkedWorktree reports whether dir is in a linked worktree (or a
// submodule): the nearest .git at or above it is a file.
func inLinkedWorktree(dir string) bool {
	for {
		if fi, err := os.Lstat(filepath.Join(dir, ".git")); err == nil {
			return fi.Mode().IsRegular()
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return false
		}
		dir = parent
	}
}

// privateHome is agent id's private home.
func (c *Core) privateHome(id string) string {
	return filepath.Join(c.agentDir(id), "home")
}

// makePrivateHome makes agent id's private home and copies the seed_home
// files of its provider entry (prov) into it.
func (c *Core) makePrivateHome(id, prov string) error {
	var seed []string
	if sb := c.config().Sandbox(prov); sb != nil {
		seed = sb.SeedHome
	}
	home := c.privateHome(id)
	if err := os.MkdirAll(home, 0o700); err != nil {
		return fmt.Errorf("making the agent's private home: %w", err)
	}
	if len(seed) == 0 {
		return nil
	}
	from, err := os.UserHomeDir()
	if err != nil {
		return failf(ErrInvalid, "seed_home: the daemon has no home to copy from: %w", err)
	}
	return seedHome(from, home, seed)
}

// dropPrivateHome removes the private home of an agent whose creation
// failed (nothing of its work is in it yet).
func (c *Core) dropPrivateHome(id string) {
	if err := os.RemoveAll(c.privateHome(id)); err != nil {
		c.log.Warn("removing the private home of an agent whose creation failed", "agent", id, "err", err)
	}
}

// seedMax bounds what seed_home copies, all files together.
const seedMax = 16 << 20

// seedHome copies each listed path (a file or a directory, relative to
// from) into to. A path must stay inside from: no "..", no link on the
// way or inside (links are skipped), regular files only, seedMax bytes in
// all.
func seedHome(from, to string, paths []string) error {
	left := int64(seedMax)
	root, err := os.OpenRoot(from)
	if err != nil {
		return failf(ErrInvalid, "seed_home: %w", err)
	}
	defer root.Close()
	for _, p := range paths {
		if !filepath.IsLocal(p) {
			return failf(ErrInvalid, "seed_home: %q is not a path inside your home", p)
		}
		err := fs.WalkDir(root.FS(), filepath.ToSlash(p), func(rel string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			dst := filepath.Join(to, filepath.FromSlash(rel))
			switch {
			case d.IsDir():
				return os.MkdirAll(dst, 0o700)
			case !d.Type().IsRegular():
				return nil // a link or a device: not copied
			}
			return copySeed(root, rel, dst, &left)
		})
		if err != nil {
			return failf(ErrInvalid, "seed_home %q: %w", p, err)
		}
	}
	return nil
}

func copySeed(root *os.Root, rel, dst string, left *int64) error {
	in, err := root.Open(filepath.FromSlash(rel))
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(dst), 0o700); err != nil {
		return err
	}
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	n, err := io.Copy(out, io.LimitReader(in, *left+1))
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if *left -= n; *left < 0 {
		return fmt.Errorf("more than %d MiB in all", seedMax>>20)
	}
	return nil
}

// launchSandbox is how agent id's processes are confined (nil: sb is nil,
// the agent has no sandbox).
func (c *Core) launchSandbox(id string, sb *schema.SandboxData, made *schema.WorkspaceData) *launch.Sandbox {
	if sb == nil {
		return nil
	}
	bwrap := c.sandboxes.Path() // checked at create, and at the start for agents created before it
	home, _ := os.UserHomeDir()
	var ro []string
	if c.opts.PythonPath != "" {
		ro = append(ro, strings.Split(c.opts.PythonPath, string(os.PathListSeparator))...)
	}
	if bin := c.warrenBinary(); bin != "" {
		ro = append(ro, bin)
	}
	return &launch.Sandbox{Bwrap: bwrap, Spec: sandbox.Spec{Network: sb.Network, BindRO: sb.BindRO, BindRW: sb.BindRW},
		Home: c.privateHome(id), OperatorHome: home, ReadOnly: ro,
		Socket: func() (string, func(), error) {
			if bwrap == "" {
				return "", nil, fmt.Errorf("%w: bwrap has not been found working since the daemon started: a sandboxed agent does not run without it", sandbox.ErrSandbox)
			}
			return c.opts.AgentSocket(id)
		},
		GitDirs: c.sandboxGitDirs(id, made)}
}

// sandboxGitDirs finds, at each start of a sandboxed process of agent id,
// its workspace's repository directories from the repository the log
// names (made: the workspace of an agent being created); nil for an agent
// without a workspace.
func (c *Core) sandboxGitDirs(id string, made *schema.WorkspaceData) func() (*sandbox.GitDirs, error) {
	if _, _, err := c.workspaceNow(id, made); err != nil {
		return nil
	}
	return func() (*sandbox.GitDirs, error) {
		w, _, err := c.workspaceNow(id, made)
		if err != nil {
			return nil, err
		}
		common, admin, err := c.opts.Git.Dirs(c.ctx, w)
		if err != nil {
			return nil, err
		}
		return &sandbox.GitDirs{Common: common, Admin: admin}, nil
	}
}

// sandboxEnv is what a sandboxed agent's processes get in their
// environment: its private home, a private /tmp and its own socket.
func (c *Core) sandboxEnv(id string) []string {
	return []string{"HOME=" + c.privateHome(id), "TMPDIR=/tmp",
		provider.EnvSocket + "=" + filepath.Join(c.agentDir(id), "agent.sock")}
}

// warrenBinary is the warren executable agents run as their MCP bridge.
func (c *Core) warrenBinary() string {
	if c.opts.WarrenBinary != "" {
		return c.opts.WarrenBinary
	}
	exe, err := os.Executable()
	if err != nil {
		return ""
	}
	return exe
}

// checkSandboxes checks, at a start, that bwrap works when any of agents
// is sandboxed; if it does not, those agents are blocked (they never run
// unconfined) and their status says why.
func (c *Core) checkSandboxes(ctx context.Context, agents []*agent) {
	var err error
	checked := false
	for _, a := range agents {
		if a.ReopenSettings().Sandbox == nil {
			continue
		}
		if !checked {
			checked = true
			_, err = c.sandboxes.Check(ctx)
		}
		if err != nil {
			c.log.Error("a sandboxed agent cannot run: its sandbox cannot be made", "agent", a.ID(), "err", err)
			a.Block(fmt.Errorf("its sandbox cannot be made: %w", err))
		}
	}
}
