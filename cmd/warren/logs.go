package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/spf13/cobra"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/schema"
	"github.com/warren-dev/warren/stderrlog"
)

// maxValueRunes is how much of each data value a log line shows.
const maxValueRunes = 80

var hexID = regexp.MustCompile(`^[0-9a-f]{32}$`)

// errUnknownAgent: REF names no agent on disk.
var errUnknownAgent = errors.New("no such agent")

// offlineAgent is what the first entry of an agent's log says about it.
type offlineAgent struct {
	id, name, parentID, path string
}

// agentLogPath resolves REF to the agent's events.jsonl without the daemon,
// as the daemon resolves it (tree.Resolve): a 32-hex id directly; a REF
// with a slash is a path, else a name; live agents first; two live
// matches are an error listing their paths. Only when no live agent
// matches, a terminated one does (a reused name or path that names several
// terminated agents is an error listing their ids). Never a random pick.
func agentLogPath(home, ref string) (string, error) {
	logPath := func(id string) string { return filepath.Join(home, "agents", id, "events.jsonl") }
	if hexID.MatchString(ref) {
		if _, err := os.Stat(logPath(ref)); err != nil {
			return "", fmt.Errorf("%w: no log for agent id %s under %s", errUnknownAgent, ref, filepath.Join(home, "agents"))
		}
		return logPath(ref), nil
	}
	agents, err := scanAgents(home)
	if err != nil {
		return "", err
	}
	var live, ended []offlineAgent
	for _, a := range agents {
		match := a.name == ref
		if strings.Contains(ref, "/") {
			match = a.path == strings.TrimPrefix(ref, "/")
		}
		if !match {
			continue
		}
		if loggedTermination(logPath(a.id)) {
			ended = append(ended, a)
		} else {
			live = append(live, a)
		}
	}
	switch {
	case len(live) == 1:
		return logPath(live[0].id), nil
	case len(live) > 1:
		return "", fmt.Errorf("%w: %q is ambiguous: it names %d agents (%s); use one of these paths or an agent id",
			errUnknownAgent, ref, len(live), describeAgents(live, false))
	case len(ended) == 1:
		return logPath(ended[0].id), nil
	case len(ended) > 1:
		return "", fmt.Errorf("%w: %q names no live agent but %d terminated ones (%s); use an agent id",
			errUnknownAgent, ref, len(ended), describeAgents(ended, true))
	}
	return "", fmt.Errorf("%w: %q matches no agent path, name or id under %s", errUnknownAgent, ref, filepath.Join(home, "agents"))
}

// describeAgents lists agents as "path" (withID: "path (id)"), in order.
func describeAgents(as []offlineAgent, withID bool) string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = "/" + a.path
		if withID {
			out[i] += " (" + a.id + ")"
		}
	}
	return strings.Join(out, ", ")
}

// loggedTermination reports whether an agent's log records agent.terminated.
func loggedTermination(path string) bool {
	r, err := eventlog.NewReader(faultfs.OS{}, path, 0)
	if err != nil {
		return false
	}
	defer r.Close()
	for {
		e, err := r.Next()
		if err != nil {
			return false
		}
		if e.Event == schema.AgentTerminated {
			return true
		}
	}
}

// scanAgents reads the first entry (agent.created) of every agent log and
// derives the slash paths.
func scanAgents(home string) ([]offlineAgent, error) {
	dir := filepath.Join(home, "agents")
	ents, err := os.ReadDir(dir)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil
		}
		return nil, fmt.Errorf("list agents in %s: %w", dir, err)
	}
	byID := map[string]*offlineAgent{}
	for _, e := range ents {
		if !e.IsDir() || !hexID.MatchString(e.Name()) {
			continue
		}
		a, ok := readCreated(filepath.Join(dir, e.Name(), "events.jsonl"))
		if !ok {
			continue
		}
		a.id = e.Name()
		byID[a.id] = &a
	}
	out := make([]offlineAgent, 0, len(byID))
	for _, a := range byID {
		a.path = offlinePath(byID, a)
		out = append(out, *a)
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].path != out[j].path {
			return out[i].path < out[j].path
		}
		return out[i].id < out[j].id
	})
	return out, nil
}

func offlinePath(byID map[string]*offlineAgent, a *offlineAgent) string {
	parts := []string{a.name}
	seen := map[string]bool{a.id: true}
	for p := a.parentID; p != ""; {
		pa, ok := byID[p]
		if !ok || seen[p] {
			break
		}
		seen[p] = true
		parts = append(parts, pa.name)
		p = pa.parentID
	}
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return strings.Join(parts, "/")
}

func readCreated(path string) (offlineAgent, bool) {
	r, err := eventlog.NewReader(faultfs.OS{}, path, 0)
	if err != nil {
		return offlineAgent{}, false
	}
	defer r.Close()
	e, err := r.Next()
	if err != nil || e.Event != schema.AgentCreated {
		return offlineAgent{}, false
	}
	var d struct {
		Name     string  `json:"name"`
		ParentID *string `json:"parent_id"`
	}
	if json.Unmarshal(e.Data, &d) != nil || d.Name == "" {
		return offlineAgent{}, false
	}
	a := offlineAgent{name: d.Name}
	if d.ParentID != nil {
		a.parentID = *d.ParentID
	}
	return a, true
}

// entryLine renders one entry as `HH:MM:SS.mmm  #seq  event  k=v ...`.
func entryLine(e eventlog.Entry) string {
	kv := kvPairs(e.Data, maxValueRunes)
	line := fmt.Sprintf("%s  #%d  %s", clockT(e.TS, true), e.Seq, e.Event)
	if kv != "" {
		line += "  " + kv
	}
	return line
}

func (c *cli) printEntry(e eventlog.Entry) error {
	if c.json {
		return printJSON(c.stdout, entryJSON(e))
	}
	_, err := fmt.Fprintln(c.stdout, entryLine(e))
	return err
}

func newLogsCmd(c *cli) *cobra.Command {
	var follow, stderrOnly bool
	cmd := &cobra.Command{
		Use:   "logs REF [-f | --stderr]",
		Short: "read an agent's log file (works while the daemon is down); -f follows it",
		Long: `Print an agent's event log from its file, without the daemon. REF resolves as
the daemon resolves it: live agents first, an ambiguous name is an error
listing the paths, a terminated agent by its name or id. -f follows the file
as it grows (fsnotify) until Ctrl-C. --stderr prints instead what the agent's
processes wrote to stderr, kept (1 MiB, then rotated once) in
<home>/agents/<id>/stderr.log, healthy turns included.`,
		Example:           indent("warren logs lead\nwarren logs -f lead/w1\nwarren logs --stderr bot\nwarren logs 0123456789abcdef0123456789abcdef --json"),
		Args:              args(1, 1, "REF"),
		ValidArgsFunction: c.completeAgents,
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "follow the log as it grows, until Ctrl-C")
	cmd.Flags().BoolVar(&stderrOnly, "stderr", false, "print what the agent's processes wrote to stderr (agents/<id>/stderr.log) instead of the event log")
	cmd.RunE = c.runE(func(ctx context.Context, cc *cobra.Command, pos []string) error {
		if stderrOnly {
			if follow {
				return usageErr(cc.UseLine(), "--stderr cannot follow (-f): use tail -F on %s in the agent's directory", stderrlog.Name)
			}
			path, err := agentLogPath(c.home, pos[0])
			if err != nil {
				return err
			}
			return c.printStderrLog(path)
		}
		return c.logs(ctx, pos[0], follow)
	})
	return cmd
}

func (c *cli) logs(ctx context.Context, ref string, follow bool) error {
	path, err := agentLogPath(c.home, ref)
	if err != nil {
		return err
	}
	if follow {
		return c.followLog(ctx, path)
	}
	r, err := eventlog.NewReader(faultfs.OS{}, path, 0)
	if err != nil {
		return fmt.Errorf("read %s: %w", path, err)
	}
	defer r.Close()
	n := 0
	for {
		e, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return fmt.Errorf("read %s after %d entries: %w (if the log is damaged, run: warren repair %s)", path, n, err, ref)
		}
		if err := c.printEntry(e); err != nil {
			return err
		}
		n++
	}
	if n == 0 && !c.json {
		fmt.Fprintln(c.stdout, "no events")
	}
	return nil
}

// followLog prints complete, CRC-valid entries as they are appended, until
// ctx ends. It waits on fsnotify events for the log's directory; the watch is
// set before the first read, so no append between a read and the wait is
// missed.
func (c *cli) followLog(ctx context.Context, path string) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("watch %s: %w", path, err)
	}
	defer w.Close()
	if err := w.Add(filepath.Dir(path)); err != nil {
		return fmt.Errorf("watch %s: %w", filepath.Dir(path), err)
	}
	base := filepath.Base(path)
	wait := func(ctx context.Context) error {
		for {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case ev, ok := <-w.Events:
				if !ok {
					return errors.New("the file watcher stopped")
				}
				if filepath.Base(ev.Name) == base {
					return nil
				}
			case err, ok := <-w.Errors:
				if !ok {
					return errors.New("the file watcher stopped")
				}
				if errors.Is(err, fsnotify.ErrEventOverflow) {
					return nil // re-read; nothing is lost by reading again
				}
				return fmt.Errorf("watch %s: %w", path, err)
			}
		}
	}
	err = eventlog.Follow(ctx, faultfs.OS{}, path, 0, wait, c.printEntry)
	if err != nil && ctx.Err() != nil {
		return nil // Ctrl-C
	}
	return err
}

func newRepairCmd(c *cli) *cobra.Command {
	var cluster string
	cmd := &cobra.Command{
		Use:               "repair REF",
		Short:             "keep a copy of a corrupt log and cut it to its last good entry (with the daemon stopped)",
		Example:           indent(`warren daemon stop && warren repair lead && warren daemon start`),
		Args:              args(1, 1, "REF"),
		ValidArgsFunction: c.completeAgents,
		RunE:              c.runE(func(ctx context.Context, _ *cobra.Command, pos []string) error { return c.repair(ctx, pos[0], cluster) }),
	}
	cmd.Flags().StringVar(&cluster, "cluster", "", "refused: a log in a NATS JetStream cluster is not repaired (see the error)")
	return cmd
}

func (c *cli) repair(ctx context.Context, ref, cluster string) error {
	if err := refuseClusterRepair(c.home, cluster, nil); err != nil {
		return err
	}
	if err := c.refuseWhileRunning(ctx, ref); err != nil {
		return err
	}
	path, err := agentLogPath(c.home, ref)
	if err != nil {
		if cerr := refuseClusterRepair(c.home, "", err); cerr != nil {
			return cerr
		}
		return err
	}
	rep, err := eventlog.Repair(faultfs.OS{}, path)
	if err != nil {
		return fmt.Errorf("repair %s: %w", path, err)
	}
	if c.json {
		return printJSON(c.stdout, repairJSON(rep))
	}
	fmt.Fprintln(c.stdout, describeRepair(path, rep))
	return nil
}

// refuseWhileRunning stops a repair while the daemon runs: it keeps the
// agent's log open and listed as corrupt, and would not see a repair made
// behind its back until a restart (issue 14). The error says what to do.
func (c *cli) refuseWhileRunning(ctx context.Context, ref string) error {
	dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	cl, err := c.dial(dctx)
	if err != nil {
		return nil // not running (or not reachable): the files are ours
	}
	_ = cl.Close()
	home := ""
	if c.homeFlag != "" {
		home = " --home " + shellQuote(c.home)
	}
	return &exitError{code: exitDaemonErr, msg: fmt.Sprintf(
		"the daemon is running: it holds the agent's log open and would not see a repair until it restarts. "+
			"Stop it, repair, start it again: warren daemon stop%s && warren repair %s%s && warren daemon start%s",
		home, shellQuote(ref), home, home)}
}

// describeRepair says what a repair cut and where the copy is.
func describeRepair(path string, rep eventlog.RepairReport) string {
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

// repairJSON is the --json form of a repair report.
func repairJSON(rep eventlog.RepairReport) map[string]any {
	return map[string]any{
		"path": rep.Path, "backup": rep.Backup, "kept_entries": rep.KeptEntries,
		"last_seq": rep.LastSeq, "cut_offset": rep.CutOffset, "cut_bytes": rep.CutBytes,
		"first_bad_line": rep.FirstBadLine, "reason": rep.Reason, "pending_backup": rep.PendingBackup,
	}
}

// entryJSON is the --json form of a log entry: the line's fields, in the
// spec's names, without the CRC (only valid lines are printed).
func entryJSON(e eventlog.Entry) map[string]any {
	data := e.Data
	if len(data) == 0 {
		data = json.RawMessage("{}")
	}
	return map[string]any{"seq": e.Seq, "ts": e.TS.UTC().Format("2006-01-02T15:04:05.000Z"), "event": e.Event, "data": data}
}
