// Package sandbox confines every process of an agent with bubblewrap
// (bwrap), SPEC 12: one mechanism for whatever the agent runs (a scripted
// program, an agent CLI and the MCP bridge it starts).
//
// # The view from inside
//
// Command wraps a program's argv as
//
//	bwrap <binds> <namespaces> --chdir WORK -- argv...
//
// with, in this order (a later bind wins over an earlier one):
//
//   - read-only: /usr and /etc; /bin, /sbin and /lib* as the host has them
//     (a symbolic link into /usr stays one); the target of /etc/resolv.conf
//     when it points out of /etc (systemd-resolved), so DNS works;
//   - a private /proc, /dev and /tmp (tmpfs);
//   - read-only: the program's runtime (View.ReadOnly, from Runtime: the
//     program file, the node_modules tree it lives in, its interpreter's
//     installation prefix), warren's own files the process needs (the
//     Python helper library, the warren binary for the MCP bridge) and the
//     entry's bind_ro;
//   - for a workspace, the repository's git directory read-only, with the
//     parts a commit writes read-write (objects, refs, logs, and this
//     worktree's own directory under worktrees/): hooks and config stay
//     read-only, so an agent cannot plant a hook the operator's next git
//     command runs;
//   - read-write: the work directory (the workspace, or the cwd without
//     one), the private home and the entry's bind_rw;
//   - the agent's own socket, a file bound at its path.
//
// Nothing else of the host is there: not the operator's home, not the
// warren home (its agents' logs, the main socket), not other agents'
// workspaces. Paths keep their host names, so a session an agent CLI
// saved under its home names the same cwd after a restart.
//
// Namespaces: a new pid namespace (whose init is bwrap's; when it ends the
// kernel kills every process left in it, setsid and double forks
// included), ipc, uts and cgroup; the network too with Spec.Network false.
// --die-with-parent ties the namespace to the outer bwrap, which the daemon
// starts as the leader of its own process group with a parent-death
// signal: a kill -9 of the daemon ends everything the agent started.
// --new-session keeps the agent off the daemon's terminal.
//
// # Availability
//
// Check runs `bwrap --ro-bind / / true` once per binary and says what to
// do when it fails: install the Debian package bubblewrap, or enable
// unprivileged user namespaces (the sysctls it names). There is no
// fallback: an agent that asks for a sandbox never runs without one.
package sandbox
