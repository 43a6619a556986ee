package render

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/warren-dev/warren/cmd/warren/internal/reply"
	"github.com/warren-dev/warren/eventlog"
)

// EventLine renders an event of the daemon (agent.log, events.subscribe):
// `HH:MM:SS.mmm  <agent path>  #seq  event  k=v`.
func EventLine(ev map[string]any, who string) string {
	ev, _ = reply.Plain(ev).(map[string]any)
	ts := time.Now()
	if t, err := time.Parse(time.RFC3339Nano, reply.Str(ev, "ts")); err == nil {
		ts = t
	}
	data, _ := json.Marshal(ev["data"])
	line := fmt.Sprintf("%s  %s  #%d  %s", clockT(ts, true), Dash(who), reply.Num(ev, "seq"), reply.Str(ev, "event"))
	if kv := kvPairs(data, maxValueRunes); kv != "" && string(data) != "null" {
		line += "  " + kv
	}
	if tok := reply.Str(ev, "token"); tok != "" {
		line += "  token=" + tok // the live run.waiting event carries the resume secret
	}
	return line
}

// EntryLine renders one entry of a log file as `HH:MM:SS.mmm  #seq  event  k=v ...`.
func EntryLine(e eventlog.Entry) string {
	kv := kvPairs(e.Data, maxValueRunes)
	line := fmt.Sprintf("%s  #%d  %s", clockT(e.TS, true), e.Seq, e.Event)
	if kv != "" {
		line += "  " + kv
	}
	return line
}

// EntryJSON is the --json form of a log entry: the line's fields, in the
// spec's names, without the CRC (only valid lines are printed).
func EntryJSON(e eventlog.Entry) map[string]any {
	data := e.Data
	if len(data) == 0 {
		data = json.RawMessage("{}")
	}
	return map[string]any{"seq": e.Seq, "ts": e.TS.UTC().Format("2006-01-02T15:04:05.000Z"), "event": e.Event, "data": data}
}

// Repair says what a repair of the log at path cut and where the copy is.
func Repair(path string, rep eventlog.RepairReport) string {
	if rep.Backup == "" && rep.PendingBackup == "" {
		return fmt.Sprintf("%s is healthy: %d entries, last seq %d; nothing cut", path, rep.KeptEntries, rep.LastSeq)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "repaired %s\n", path)
	if rep.Backup != "" {
		fmt.Fprintf(&b, "  first bad line: %d (%s)\n", rep.FirstBadLine, rep.Reason)
		fmt.Fprintf(&b, "  cut:            %d bytes from offset %d\n", rep.CutBytes, rep.CutOffset)
		fmt.Fprintf(&b, "  kept:           %d entries, last seq %d\n", rep.KeptEntries, rep.LastSeq)
		fmt.Fprintf(&b, "  copy of the damaged log: %s\n", rep.Backup)
	}
	if rep.PendingBackup != "" {
		fmt.Fprintf(&b, "  unusable pending file moved to: %s\n", rep.PendingBackup)
	}
	return strings.TrimRight(b.String(), "\n")
}

// RepairJSON is the --json form of a repair report.
func RepairJSON(rep eventlog.RepairReport) map[string]any {
	return map[string]any{
		"path": rep.Path, "backup": rep.Backup, "kept_entries": rep.KeptEntries,
		"last_seq": rep.LastSeq, "cut_offset": rep.CutOffset, "cut_bytes": rep.CutBytes,
		"first_bad_line": rep.FirstBadLine, "reason": rep.Reason, "pending_backup": rep.PendingBackup,
	}
}
