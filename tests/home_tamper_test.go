package tests

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// TestForgedProcessRecordKillsNothing (D12): a record under procs/ that
// names an unrelated process group exactly (its pid, start time and the
// boot id, even its executable) makes the daemon kill nothing at start:
// the process does not carry the record's marker, so the record is
// refused, logged and removed, and the process lives on.
func TestForgedProcessRecordKillsNothing(t *testing.T) {
	t.Parallel()
	d := newTestDaemon(t, modeBinary)
	procs := filepath.Join(d.Home, "procs")
	if err := os.MkdirAll(procs, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(d.Home, 0o700); err != nil {
		t.Fatal(err)
	}
	victim := exec.Command("sleep", "600")
	victim.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // leads its group, as agent processes do
	if err := victim.Start(); err != nil {
		t.Fatal(err)
	}
	victimDone := make(chan struct{})
	go func() { _ = victim.Wait(); close(victimDone) }()
	t.Cleanup(func() { _ = victim.Process.Kill(); <-victimDone })
	// The record as a forger writes it: everything that can be read of
	// the process, and a marker made up.
	pid := victim.Process.Pid
	start, boot := procStartTime(t, pid), bootID(t)
	exe, err := os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "exe"))
	if err != nil {
		t.Fatal(err)
	}
	const agentID = "0123456789abcdef0123456789abcdef"
	b, err := json.Marshal(map[string]any{"agent_id": agentID, "pid": pid, "pgid": pid, "start_time": start,
		"boot_id": boot, "exe": exe, "marker": "00112233445566778899aabbccddeeff"})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(procs, agentID+"."+strconv.Itoa(pid)+".json"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	d.Start() // the records are dealt with before the socket serves
	out := d.Output()
	if strings.Contains(out, "killed a leftover") || !strings.Contains(out, "refusing to kill") {
		t.Fatalf("the daemon's log about the forged record:\n%s", out)
	}
	if state := procState(victim.Process.Pid); state == "" || state == "Z" {
		t.Fatalf("the process a forged record named was killed (state %q)", state)
	}
	select {
	case <-victimDone:
		t.Fatal("the process a forged record named was killed")
	default:
	}
	if left, _ := os.ReadDir(procs); len(left) != 0 {
		t.Fatalf("procs/ still holds %v", left)
	}
}

// procStatFields returns the fields of /proc/<pid>/stat after the command
// name (field 3 first); nil when the process is gone.
func procStatFields(pid int) []string {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return nil
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return nil
	}
	return strings.Fields(s[i+1:])
}

// procState is the state letter of /proc/<pid>/stat ("" when gone).
func procState(pid int) string {
	if f := procStatFields(pid); len(f) > 0 {
		return f[0]
	}
	return ""
}

// procStartTime is field 22 of /proc/<pid>/stat: the start time in clock
// ticks after boot.
func procStartTime(t *testing.T, pid int) uint64 {
	t.Helper()
	f := procStatFields(pid)
	if len(f) < 20 {
		t.Fatalf("/proc/%d/stat: %v", pid, f)
	}
	n, err := strconv.ParseUint(f[22-3], 10, 64)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// bootID is the kernel's boot id.
func bootID(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(b))
}

// TestPythonHelperLinksNotFollowed (D12): the daemon installs its Python
// helper library in <home>/python at every start. A link at
// python/warren_script.py is replaced, never written through; python/
// itself a link makes the start fail with what to do. A victim file
// outside the home is untouched either way.
func TestPythonHelperLinksNotFollowed(t *testing.T) {
	t.Parallel()
	t.Run("helper file a link", func(t *testing.T) {
		t.Parallel()
		d := newTestDaemon(t, modeBinary)
		victim := filepath.Join(d.dir, "victim.py")
		if err := os.WriteFile(victim, []byte("keep me\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		py := filepath.Join(d.Home, "python")
		if err := os.MkdirAll(py, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(d.Home, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(victim, filepath.Join(py, "warren_script.py")); err != nil {
			t.Fatal(err)
		}
		d.Start()
		if b, err := os.ReadFile(victim); err != nil || string(b) != "keep me\n" {
			t.Fatalf("the link's target was written: %.40q... %v", b, err)
		}
		fi, err := os.Lstat(filepath.Join(py, "warren_script.py"))
		if err != nil || !fi.Mode().IsRegular() {
			t.Fatalf("python/warren_script.py after the start: %v %v", fi, err)
		}
	})
	t.Run("python directory a link", func(t *testing.T) {
		t.Parallel()
		dir, home := newHomeDir(t)
		outside := filepath.Join(dir, "outside")
		if err := os.Mkdir(outside, 0o700); err != nil {
			t.Fatal(err)
		}
		victim := filepath.Join(outside, "warren_script.py")
		if err := os.WriteFile(victim, []byte("keep me\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Mkdir(home, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(outside, filepath.Join(home, "python")); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			if _, err := os.Lstat(filepath.Join(home, "daemon.sock")); err == nil {
				runCLI(t, home, "daemon", "stop")
			}
		})
		r := runCLI(t, home, "daemon", "start").want(t, 1, "daemon start with python/ a symbolic link")
		if !strings.Contains(r.stderr, "symbolic link") || !strings.Contains(r.stderr, "rm "+filepath.Join(home, "python")) {
			t.Fatalf("daemon start: %s", r.stderr)
		}
		if b, err := os.ReadFile(victim); err != nil || string(b) != "keep me\n" {
			t.Fatalf("the linked directory's file was written: %.40q... %v", b, err)
		}
		if names, _ := os.ReadDir(outside); len(names) != 1 {
			t.Fatalf("files were written in the linked directory: %v", names)
		}
	})
}
