// Package agentproc starts and ends the processes of agents (scripted
// programs, agent CLIs) so that none outlives the daemon or does work the
// daemon no longer knows about.
//
// # Starting
//
// Spawner.Start starts a command in its own process group (Setpgid: the
// process is the leader, its process group id is its pid) with a
// parent-death signal of SIGKILL (PR_SET_PDEATHSIG). Linux sends that signal
// when the *thread* that forked the child exits, not the process (Go issue
// 27505): the Go runtime may end a thread whose goroutine locked it. So a
// Spawner forks every child from one goroutine locked to its OS thread that
// never returns: the thread lives as long as the daemon, and the children
// die with the daemon, also on kill -9.
//
// The parent-death signal reaches only the direct child. Processes the child
// starts itself stay in its process group (unless they leave it); they are
// killed with the group on stop, timeout and cancel, when the leader exits
// (Proc kills the group before it reaps the leader, while the leader's pid
// still holds the group id), and, after a daemon crash, by the next daemon
// at recovery (KillLeftover, from the records below).
//
// # Identity of a process
//
// A pid alone can be reused. Identity is the pid plus the process's start
// time (field 22 of /proc/<pid>/stat, clock ticks since boot) plus the
// kernel's boot id (/proc/sys/kernel/random/boot_id): the three together
// name one process on one machine, ever.
//
// That names a process; it does not prove the daemon started it, and a
// record is a file in the home, which whoever can write the home can
// forge to name any process. So every agent process is started with
// EnvMarker (WARREN_AGENT_PROCESS) set to a fresh random marker (NewMarker,
// 128 bits) that its record holds too: a process, or one of its
// descendants, carries it in /proc/<pid>/environ (the environment it was
// started with, readable by its own uid), and no process the daemon did not
// start does. The executable (/proc/<pid>/exe) is recorded beside it, for
// the log only: a program run through "#!/usr/bin/env node" is recorded
// as env and then becomes node, so it cannot be a condition.
//
// # Records (on-disk format)
//
// The daemon records each agent process durably before the process is given
// any work, in <home>/procs/<agent-id>.<pid>.json (written with atomicfile,
// mode 0600), and removes the file once the process has been reaped:
//
//	{"agent_id":"<32 hex>","pid":1234,"pgid":1234,"start_time":987654,
//	 "boot_id":"<kernel boot id>","exe":"/usr/bin/python3.12",
//	 "marker":"<32 hex>"}
//
// At start, before any turn can run, the daemon reads every record (they
// all belong to the previous run: its processes died with it, or should
// have), kills the process group of each record that still matches a live
// process or group (KillLeftover), and removes the records. A record whose
// group is not its own pid is refused (agent processes lead their group); a
// matching process that left its group is killed alone. A record matches
// only when the process it names (the leader, or with the leader gone a
// member of its group) carries the record's marker: a record without a
// marker (an older warren's, or a forged one) or a process without it is
// refused (ErrNotOurs) and logged, and nothing is killed.
package agentproc
