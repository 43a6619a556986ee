package agentproc

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// procStat holds the fields of /proc/<pid>/stat the package uses.
type procStat struct {
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
	return procStat{pgrp: pgrp, startTime: st}, nil
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
}

// Describe returns the record of a running process that leads its own
// process group.
func Describe(agentID string, pid int) (Record, error) {
	st, err := readStat(pid)
	if err != nil {
		return Record{}, fmt.Errorf("reading the start time of process %d: %w", pid, err)
	}
	boot, err := BootID()
	if err != nil {
		return Record{}, fmt.Errorf("reading the kernel boot id: %w", err)
	}
	return Record{AgentID: agentID, Pid: pid, Pgid: st.pgrp, StartTime: st.startTime, BootID: boot}, nil
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

// KillLeftover kills the process group a record names when it is still
// the recorded one: the recorded leader is alive with the recorded start
// time, or the leader is gone and members of its group remain (a group id
// cannot be reused while the group exists). A record of an earlier boot, or
// whose pid now names another process, is left alone. It reports what it
// did, for the log.
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
	switch {
	case err == nil && st.startTime == r.StartTime && st.pgrp != r.Pgid:
		// It left its group (setsid): it alone is known to be ours.
		if err := syscall.Kill(r.Pid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return false, "", fmt.Errorf("killing process %d: %w", r.Pid, err)
		}
		return true, "the recorded process was still running, outside its group", nil
	case err == nil && st.startTime == r.StartTime:
		if err := syscall.Kill(-r.Pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
			return false, "", fmt.Errorf("killing process group %d: %w", r.Pgid, err)
		}
		return true, "the recorded process was still running", nil
	case err == nil:
		return false, "the pid now names another process", nil
	}
	members, err := GroupMembers(r.Pgid, r.StartTime)
	if err != nil {
		return false, "", fmt.Errorf("listing process group %d: %w", r.Pgid, err)
	}
	if len(members) == 0 {
		return false, "gone", nil
	}
	if err := syscall.Kill(-r.Pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return false, "", fmt.Errorf("killing process group %d: %w", r.Pgid, err)
	}
	return true, fmt.Sprintf("%d processes of its group outlived it", len(members)), nil
}
