package render

import (
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/warren-dev/warren/cmd/warren/internal/reply"
)

// ListView says which columns and notes `agent list` shows.
type ListView struct {
	Wide     bool // provider, model, last turn and tokens
	All      bool // the ENDED column of terminated agents
	Filtered bool // the list was filtered by status (says so when empty)
}

// AgentList renders agent.list items as a table, then one line per agent
// that has an error, is degraded or waits for input. waitOf fetches the
// wait of a suspended agent whose item carries none (nil: none known).
func AgentList(w io.Writer, agents []map[string]any, v ListView, now time.Time, waitOf func(agentID string) map[string]any) {
	if len(agents) == 0 {
		if v.Filtered {
			fmt.Fprintln(w, "no agents in that status")
		} else {
			fmt.Fprintln(w, "no agents")
		}
		return
	}
	SortAgents(agents)
	header := []string{"PATH", "STATUS", "PENDING"}
	if v.All {
		header = append(header, "ENDED")
	}
	if v.Wide {
		header = append(header, "PROVIDER", "MODEL", "LAST TURN", "TOKENS (IN/OUT/CACHED)", "SPENT (SUBTREE)", "BUDGET LEFT")
	}
	rows := make([][]string, 0, len(agents))
	for _, a := range agents {
		row := []string{reply.Str(a, "path"), reply.Str(a, "status"), strconv.FormatInt(reply.Num(a, "pending"), 10)}
		if v.All {
			row = append(row, agoCell(now, reply.Str(a, "terminated_at")))
		}
		if v.Wide {
			row = append(row, Dash(reply.Str(a, "provider")), Dash(reply.Str(a, "model")),
				agoCell(now, reply.Str(a, "last_turn_at")), Dash(usageText(reply.Obj(a, "usage"))), Dash(spentCell(a)), Dash(LeftText(reply.Obj(a, "remaining"))))
		}
		rows = append(rows, row)
	}
	table(w, header, rows)
	for _, a := range agents {
		agentNotes(w, a, waitOf)
	}
}

// agentNotes prints the lines under the table for one agent: its error,
// the error its latest turn failed with, why it is degraded, the prompt it
// waits on.
func agentNotes(w io.Writer, a map[string]any, waitOf func(agentID string) map[string]any) {
	path := reply.Str(a, "path")
	if e := reply.Str(a, "error"); e != "" {
		fmt.Fprintf(w, "%s: %s\n", path, e)
	}
	if e := reply.Str(a, "last_error"); e != "" {
		fmt.Fprintf(w, "%s: last turn failed: %s\n", path, Cut(e, 200))
	}
	if e := reply.Str(a, "degraded"); e != "" {
		fmt.Fprintf(w, "%s: degraded: %s\n", path, e)
	}
	if reply.Str(a, "status") != "suspended" {
		return
	}
	wait := reply.Obj(a, "wait")
	if wait == nil {
		wait = waitOf(reply.Str(a, "agent_id"))
	}
	if wait != nil {
		fmt.Fprintf(w, "%s is waiting: %s\n", path, Cut(reply.Str(wait, "prompt"), 100))
	}
}

// usageText shows token usage as "in/out/cached" ("" when there is none).
func usageText(u map[string]any) string {
	if u == nil {
		return ""
	}
	return fmt.Sprintf("%d/%d/%d", reply.Num(u, "input_tokens"), reply.Num(u, "output_tokens"), reply.Num(u, "cached_input_tokens"))
}

// SortAgents orders agents by path, segment by segment and naturally (a
// parent right before its children; w2 before w10); at the same path live
// agents come first, then terminated ones by when they ended.
func SortAgents(agents []map[string]any) {
	sort.SliceStable(agents, func(i, j int) bool {
		a, b := agents[i], agents[j]
		if c := comparePaths(reply.Str(a, "path"), reply.Str(b, "path")); c != 0 {
			return c < 0
		}
		ta, tb := reply.Str(a, "terminated_at"), reply.Str(b, "terminated_at")
		if (ta == "") != (tb == "") {
			return ta == ""
		}
		return ta < tb
	})
}

// comparePaths compares slash paths segment by segment with naturalCompare.
func comparePaths(a, b string) int {
	as, bs := strings.Split(a, "/"), strings.Split(b, "/")
	for i := 0; i < len(as) && i < len(bs); i++ {
		if c := naturalCompare(as[i], bs[i]); c != 0 {
			return c
		}
	}
	return len(as) - len(bs)
}

// naturalCompare compares strings with runs of digits taken as numbers
// ("w2" < "w10"); equal numbers with more leading zeros come later.
func naturalCompare(a, b string) int {
	for a != "" && b != "" {
		if isDigit(a[0]) && isDigit(b[0]) {
			da, db := digitRun(a), digitRun(b)
			na, nb := strings.TrimLeft(a[:da], "0"), strings.TrimLeft(b[:db], "0")
			if len(na) != len(nb) {
				return len(na) - len(nb)
			}
			if c := strings.Compare(na, nb); c != 0 {
				return c
			}
			if da != db {
				return da - db
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return int(a[0]) - int(b[0])
		}
		a, b = a[1:], b[1:]
	}
	return len(a) - len(b)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func digitRun(s string) int {
	n := 0
	for n < len(s) && isDigit(s[n]) {
		n++
	}
	return n
}

// treeNode is one agent in `warren agent tree`.
type treeNode struct {
	label    string
	children []*treeNode
}

// Tree draws agent.list items as a tree with their status ("no agents"
// when there are none).
func Tree(w io.Writer, agents []map[string]any) {
	if len(agents) == 0 {
		fmt.Fprintln(w, "no agents")
		return
	}
	renderTree(w, buildTree(agents))
}

// buildTree links agent.list entries by parent_id; agents whose parent is not
// listed become roots.
func buildTree(agents []map[string]any) []*treeNode {
	sort.SliceStable(agents, func(i, j int) bool { return reply.Str(agents[i], "name") < reply.Str(agents[j], "name") })
	nodes := make(map[string]*treeNode, len(agents))
	for _, a := range agents {
		label := fmt.Sprintf("%s  [%s]", reply.Str(a, "name"), reply.Str(a, "status"))
		if reply.Str(a, "last_error") != "" {
			label += "  (last turn failed)"
		}
		nodes[reply.Str(a, "agent_id")] = &treeNode{label: label}
	}
	var roots []*treeNode
	for _, a := range agents {
		n := nodes[reply.Str(a, "agent_id")]
		if p, ok := nodes[reply.Str(a, "parent_id")]; ok && p != n {
			p.children = append(p.children, n)
		} else {
			roots = append(roots, n)
		}
	}
	return roots
}

// renderTree draws roots and their descendants with box-drawing characters.
func renderTree(w io.Writer, roots []*treeNode) {
	for _, r := range roots {
		fmt.Fprintln(w, r.label)
		renderChildren(w, r.children, "")
	}
}

func renderChildren(w io.Writer, kids []*treeNode, prefix string) {
	for i, k := range kids {
		last := i == len(kids)-1
		branch, next := "├── ", "│   "
		if last {
			branch, next = "└── ", "    "
		}
		fmt.Fprintln(w, prefix+branch+k.label)
		renderChildren(w, k.children, prefix+next)
	}
}

// SpentText is an agent's spend (agent.list's spent): dollars when every
// request was priced, else tokens, and turns ("" when none).
func SpentText(s map[string]any) string {
	if s == nil {
		return ""
	}
	turns := fmt.Sprintf("%d turns", reply.Num(s, "turns"))
	if reply.Num(s, "turns") == 1 {
		turns = "1 turn"
	}
	if reply.Num(s, "unpriced_requests") == 0 && reply.Num(s, "requests") > 0 {
		usd, _ := s["usd"].(float64)
		return fmt.Sprintf("$%.4f, %s", usd, turns)
	}
	if reply.Num(s, "requests") > 0 {
		return fmt.Sprintf("%d tokens, %s", reply.Num(s, "tokens"), turns)
	}
	return turns
}

// spentCell is an agent's spend and, when it differs, its subtree's.
func spentCell(a map[string]any) string {
	own := SpentText(reply.Obj(a, "spent"))
	if sub := reply.Obj(a, "subtree_spent"); sub != nil {
		return strings.TrimSpace(own + " (" + SpentText(sub) + ")")
	}
	return own
}

// LeftText is what remains of an agent's budget ("" without one).
func LeftText(r map[string]any) string {
	if r == nil {
		return ""
	}
	var parts []string
	if v, ok := r["tokens"]; ok && v != nil {
		parts = append(parts, fmt.Sprintf("%d tokens", reply.Num(r, "tokens")))
	}
	if v, ok := r["usd"].(float64); ok {
		parts = append(parts, fmt.Sprintf("$%.4f", v))
	}
	if v, ok := r["turns"]; ok && v != nil {
		parts = append(parts, fmt.Sprintf("%d turns", reply.Num(r, "turns")))
	}
	return strings.Join(parts, ", ")
}
