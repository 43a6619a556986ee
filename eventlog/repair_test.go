package eventlog

import (
	"bytes"
	"errors"
	"strings"
	"testing"
)

func TestRepairCutsAtFirstDamageAndKeepsCopy(t *testing.T) {
	m, full := memLog(t, 5)
	ends := lineEnds(full)
	bad := append([]byte{}, full...)
	bad[ends[1]+20] ^= 0x04 // damage line 3
	writeBytes(t, m, memPath, bad)
	if _, err := Open(m, memPath, Options{}); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Open: %v", err)
	}
	rep, err := Repair(m, memPath)
	if err != nil {
		t.Fatal(err)
	}
	if rep.KeptEntries != 2 || rep.LastSeq != 2 || rep.FirstBadLine != 3 || rep.CutOffset != int64(ends[1]) ||
		rep.CutBytes != int64(len(full)-ends[1]) || !strings.HasPrefix(rep.Backup, memPath+".corrupt-") || rep.Reason == "" {
		t.Fatalf("report %+v", rep)
	}
	if got := readBytes(t, m, rep.Backup); !bytes.Equal(got, bad) {
		t.Fatal("backup differs from the damaged log")
	}
	if got := readBytes(t, m, memPath); !bytes.Equal(got, full[:ends[1]]) {
		t.Fatal("log not cut to its last good entry")
	}
	// The backup and the cut are durable.
	m.Crash()
	m.Reboot(allReboots[0].opts(1))
	if got := readBytes(t, m, rep.Backup); !bytes.Equal(got, bad) {
		t.Fatal("backup not durable")
	}
	l := mustOpen(t, m, memPath)
	defer l.Close()
	if l.LastSeq() != 2 {
		t.Fatalf("LastSeq %d after repair", l.LastSeq())
	}
	// A second repair finds nothing to cut.
	l.Close()
	rep, err = Repair(m, memPath)
	if err != nil || rep.Backup != "" || rep.CutBytes != 0 || rep.KeptEntries != 2 {
		t.Fatalf("second repair %+v %v", rep, err)
	}
}

func TestRepairTornTailAndUniqueBackupNames(t *testing.T) {
	m, full := memLog(t, 2)
	var backups []string
	for i := 0; i < 2; i++ {
		writeBytes(t, m, memPath, append(append([]byte{}, full...), "torn"...))
		rep, err := Repair(m, memPath)
		if err != nil || rep.CutBytes != 4 || rep.FirstBadLine != 3 {
			t.Fatalf("repair %d: %+v %v", i, rep, err)
		}
		backups = append(backups, rep.Backup)
	}
	if backups[0] == backups[1] {
		t.Fatalf("backup name reused: %v", backups)
	}
	if _, err := Repair(m, "x.log"); !errors.Is(err, ErrInvalidPath) {
		t.Fatalf("bad path: %v", err)
	}
}
