package demo

import (
	"context"
	"fmt"
	"sort"
	"strings"
)

// showDisk prints what the logs on disk hold after the kill.
func (r *runner) showDisk(d map[string]*diskAgent) {
	r.ok("read the logs on disk directly (the daemon is down): %d agents", len(d))
	for _, a := range sortedAgents(d) {
		state := "live"
		if a.terminated {
			state = "terminated"
		}
		wal := ""
		if a.walBytes > 0 {
			wal = fmt.Sprintf("  + events.pending (%d bytes; the next start replays what the log lacks)", a.walBytes)
		}
		r.detail("%-8s %3d entries  %-10s  messages enqueued=%d pending=%d  unfinished turns=%d%s",
			a.path, a.entries, state, len(a.enqueued), len(a.pending()), len(a.openRuns), wal)
	}
}

// checkDisk checks the logs read after the kill are readable and hold the
// team.
func (r *runner) checkDisk(d map[string]*diskAgent) {
	var problems []string
	paths := map[string]bool{}
	for _, a := range d {
		if a.err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", a.id, a.err))
		}
		paths[a.path] = true
	}
	for _, w := range append([]string{"lead"}, prefixed("lead/", WorkerNames())...) {
		if !paths[w] {
			problems = append(problems, "no log for "+w)
		}
	}
	r.check("every log on disk is readable and the tree lead/{w1,w2,w3} is there", problems)
}

func prefixed(p string, names []string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = p + n
	}
	return out
}

// checkRecovered compares the daemon's view after the restart with the logs
// read before it. It returns the agents that show interrupted_startup.
func (r *runner) checkRecovered(ctx context.Context, before map[string]*diskAgent, oldBoot string) ([]string, error) {
	res, err := call(ctx, r.home, "agent.list", nil)
	if err != nil {
		r.fail("agent.list after the restart: %v", err)
		return nil, err
	}
	listed := map[string]map[string]any{}
	var interrupted []string
	for _, a := range agents(res) {
		listed[fmt.Sprint(a["agent_id"])] = a
		if a["status"] == "interrupted_startup" {
			interrupted = append(interrupted, fmt.Sprint(a["path"]))
		}
	}
	sort.Strings(interrupted)
	var problems []string
	for _, a := range sortedAgents(before) {
		l, ok := listed[a.id]
		switch {
		case !ok && !a.terminated:
			problems = append(problems, a.path+" is missing")
		case ok && fmt.Sprint(l["path"]) != a.path:
			problems = append(problems, fmt.Sprintf("%s came back as %v", a.path, l["path"]))
		}
		if ok {
			r.detail("%-8s %-20v pending=%v", a.path, l["status"], l["pending"])
		}
	}
	r.check("the tree came back (agent.list matches the logs)", problems)

	after, err := readDisk(r.home)
	if err != nil {
		r.fail("read the logs after the restart: %v", err)
		return nil, err
	}
	problems = nil
	enq := 0
	for id, b := range before {
		a := after[id]
		if a == nil {
			problems = append(problems, b.path+": log gone")
			continue
		}
		count := map[string]int{}
		for _, m := range a.enqueued {
			count[m]++
		}
		for _, m := range b.enqueued {
			enq++
			if count[m] != 1 {
				problems = append(problems, fmt.Sprintf("%s: message %s enqueued %d times", b.path, short(m), count[m]))
			}
		}
	}
	what := fmt.Sprintf("all %d messages enqueued before the kill are still there, once each", enq)
	if enq == 1 {
		what = "the 1 message enqueued before the kill is still there, once"
	}
	r.check(what, problems)

	problems = nil
	runs := 0
	for _, a := range sortedAgents(after) {
		for _, run := range a.cutRuns(oldBoot) {
			runs++
			if got := a.interrupted[run]["process_restart"]; got != 1 {
				problems = append(problems, fmt.Sprintf("%s: run %s has %d run.interrupted(process_restart), want 1", a.path, short(run), got))
			}
		}
		for run, reasons := range a.interrupted {
			if reasons["process_restart"] > 1 {
				problems = append(problems, fmt.Sprintf("%s: run %s is marked interrupted %d times", a.path, short(run), reasons["process_restart"]))
			}
		}
	}
	if runs == 0 {
		problems = append(problems, "no turn was cut by the kill")
	}
	r.check(fmt.Sprintf("each of the %d turns cut by the kill is marked interrupted exactly once (interrupted_startup now: %s)",
		runs, listOrNone(interrupted)), problems)
	return interrupted, nil
}

func listOrNone(s []string) string {
	if len(s) == 0 {
		return "none"
	}
	return strings.Join(s, ", ")
}
