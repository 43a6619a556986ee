package agentproc

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// procStat holds the fields of /proc/<pid>/stat the package uses.
type procStat struct {
	state     byte // R, S, D, Z (a zombie: exited, not yet reaped), ...
	pgrp      int
	startTime uint64
}

// readStat reads /proc/<pid>/stat. The command name (field 2) may hold
// spaces and parentheses, so fields are counted after its last ')'.
func readStat(pid int) (procStat, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return procStat{}, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: no ')' after the command name", pid)
	}
	f := strings.Fields(s[i+1:])
	// f[0] is field 3 (state): field n is f[n-3].
	if len(f) < 20 {
		return procStat{}, fmt.Errorf("/proc/%d/stat: %d fields after the command name, want at least 20", pid, len(f))
	}
	pgrp, err := strconv.Atoi(f[5-3])
	if err != nil {
		return procStat{}, fmt.Errorf("/proc/%d/stat: pgrp %q: %w", pid, f[2], err)
	}
	st, err := strconv.ParseUint(f[22-3], 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("/proc/%d/stat: starttime %q: %w", pid, f[19], err)
	}
	return procStat{state: f[0][0], pgrp: pgrp, startTime: st}, nil
}

// BootID returns the kernel's boot id (changes at every boot).
func BootID() (string, error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(string(b)), nil
}

// Record identifies one agent process (see the package documentation).
type Record struct {
	AgentID   string `json:"agent_id"`
	Pid       int    `json:"pid"`
	Pgid      int    `json:"pgid"`
	StartTime uint64 `json:"start_time"`
	BootID    string `json:"boot_id"`
	// Exe is what /proc/<pid>/exe named when the process was recorded
	// ("" when unreadable): for the log, not a condition (a program run
	// through "#!/usr/bin/env node" changes it after the record is made).
	Exe string `json:"exe,omitempty"`
	// Marker is the value of EnvMarker in the process's environment: only
	// processes the daemon started, and their descendants, carry it.
	Marker string `json:"marker,omitempty"`
}

// EnvMarker is the environment variable the daemon sets, to a fresh
// NewMarker value, in every agent process it starts; a record names a
// process of ours only if that process's environment holds it with the
// record's value (KillLeftover).
const EnvMarker = "WARREN_AGENT_PROCESS"

// NewMarker returns a fresh random marker (32 hex digits).
func NewMarker() (string, error) {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("making an agent process marker: %w", err)
	}
	return hex.EncodeToString(b[:]), nil
}

// Describe returns the record of a running process that leads its own
// process group, started with marker as its EnvMarker.
func Describe(agentID string, pid int, marker string) (Record, error) {
	st, err := readStat(pid)
	if err != nil {
		return Record{}, fmt.Errorf("reading the start time of process %d: %w", pid, err)
	}
	boot, err := BootID()
	if err != nil {
		return Record{}, fmt.Errorf("reading the kernel boot id: %w", err)
	}
	exe, _ := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	return Record{AgentID: agentID, Pid: pid, Pgid: st.pgrp, StartTime: st.startTime, BootID: boot,
		Exe: exe, Marker: marker}, nil
}

// hasMarker reports whether the environment pid was started with holds
// EnvMarker=marker; when it cannot tell (the process is another user's,
// gone, or a zombie), it says why.
func hasMarker(pid int, marker string) (bool, string) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/environ")
	if err != nil {
		return false, fmt.Sprintf("its environment cannot be read (%v)", err)
	}
	want := EnvMarker + "=" + marker
	for _, kv := range strings.Split(string(b), "\x00") {
		if kv == want {
			return true, ""
		}
	}
	return false, "its environment does not hold the record's " + EnvMarker
}

// exeOf names the executable of pid, for the log.
func exeOf(pid int) string {
	exe, err := os.Readlink("/proc/" + strconv.Itoa(pid) + "/exe")
	if err != nil {
		return "?"
	}
	return exe
}

// FileName is the record's file name in the records directory.
func (r Record) FileName() string { return r.AgentID + "." + strconv.Itoa(r.Pid) + ".json" }

// GroupMembers returns the pids of the live processes in process group
// pgid that started no earlier than since (clock ticks after boot).
func GroupMembers(pgid int, since uint64) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := readStat(pid)
		if err != nil {
			continue // gone meanwhile
		}
		if st.pgrp == pgid && st.startTime >= since {
			out = append(out, pid)
		}
	}
	return out, nil
}

// ErrNotOurs is KillLeftover's error for a record that names a live
// process (or group) this daemon cannot prove it started: no marker in
// the record, or none in the process's environment. Nothing is killed.
var ErrNotOurs = errors.New("the process is not one this home's daemon started")

// KillLeftover kills the process group a record names when it is still
// the recorded one: the recorded leader is alive with the recorded start
// time, or the leader is gone and members of its group remain (a group id
// cannot be reused while the group exists); and in either case the
// process (the leader, or a member of its group) carries the record's
// marker in its environment (EnvMarker). A record of an earlier boot, or
// whose pid now names another process, is left alone; a record that
// matches a live process without the marker (a forged or foreign record)
// is refused with an error wrapping ErrNotOurs, and nothing is killed. It
// reports what it did, for the log.
func KillLeftover(r Record) (killed bool, what string, err error) {
	if r.Pid <= 1 || r.Pgid != r.Pid {
		// Agent processes always lead their own group.
		return false, "", fmt.Errorf("record %s names pid %d, group %d: not an agent process", r.FileName(), r.Pid, r.Pgid)
	}
	boot, err := BootID()
	if err != nil {
		return false, "", fmt.Errorf("reading the kernel boot id: %w", err)
	}
	if boot != r.BootID {
		return false, "recorded in an earlier boot", nil
	}
	st, err := readStat(r.Pid)
	if err == nil && st.startTime != r.StartTime {
		return false, "the pid now names another process", nil
	}
	if err == nil && st.state != 'Z' {
		proof := r.provenOurs(r.Pid)
		if proof == nil {
			return killLiveLeader(r, st)
		}
		if !r.leaderDied() {
			return false, "", proof
		}
		// The leader exited while it was read: its group decides, below.
	}
	members, err := GroupMembers(r.Pgid, r.StartTime)
	if err != nil {
		return false, "", fmt.Errorf("listing process group %d: %w", r.Pgid, err)
	}
	if len(members) == 0 {
		return false, "gone", nil
	}
	// A marked member proves the group is the recorded one: its leader
	// made the group, and the id cannot be taken again while it exists.
	var proof error
	for _, pid := range members {
		if proof = r.provenOurs(pid); proof == nil {
			break
		}
	}
	if proof != nil {
		return false, "", fmt.Errorf("process group %d (%d processes, its recorded leader gone): no member carries the record's marker: %w", r.Pgid, len(members), proof)
	}
	if err := syscall.Kill(-r.Pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return false, "", fmt.Errorf("killing process group %d: %w", r.Pgid, err)
	}
	return true, fmt.Sprintf("%d processes of its group outlived it", len(members)), nil
}

// killLiveLeader kills the recorded leader, proven ours and running, with
// its group (or alone, when it left the group).
func killLiveLeader(r Record, st procStat) (bool, string, error) {
	if st.pgrp != r.Pgid {
		// It left its group (setsid): it alone is known to be ours.
		if err := syscall.Kill(r.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return false, "", fmt.Errorf("killing process %d: %w", r.Pid, err)
		}
		return true, "the recorded process was still running, outside its group", nil
	}
	if err := syscall.Kill(-r.Pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return false, "", fmt.Errorf("killing process group %d: %w", r.Pgid, err)
	}
	return true, "the recorded process was still running", nil
}

// leaderDied says whether the recorded leader, whose marker could not be
// proven, has exited meanwhile (gone, or a zombie whose environment
// cannot be read): its group's members then decide, as for a leader found
// gone. A leader killed with the daemon (its parent-death signal) is
// often caught exiting at the next start.
func (r Record) leaderDied() bool {
	st, err := readStat(r.Pid)
	return err != nil || st.state == 'Z' || st.startTime != r.StartTime
}

// provenOurs checks that pid carries the record's marker; the error wraps
// ErrNotOurs and says what pid runs.
func (r Record) provenOurs(pid int) error {
	if r.Marker == "" {
		return fmt.Errorf("%w: record %s has no marker (written by an older warren, or not by warren), so process %d (%s) is left running",
			ErrNotOurs, r.FileName(), pid, exeOf(pid))
	}
	if ok, why := hasMarker(pid, r.Marker); !ok {
		recorded := ""
		if r.Exe != "" {
			recorded = ", recorded as " + r.Exe
		}
		return fmt.Errorf("%w: process %d (%s%s) matches record %s by pid and start time, but %s; it is left running",
			ErrNotOurs, pid, exeOf(pid), recorded, r.FileName(), why)
	}
	return nil
}
