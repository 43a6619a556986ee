package top

import (
	"context"
	"fmt"
	"sort"
	"strings"

	tea "github.com/charmbracelet/bubbletea"

	"github.com/warren-dev/warren/cmd/warren/internal/client"
	"github.com/warren-dev/warren/cmd/warren/internal/render"
	"github.com/warren-dev/warren/cmd/warren/internal/reply"
	"github.com/warren-dev/warren/internal/textcut"
	"github.com/warren-dev/warren/protocol"
	"github.com/warren-dev/warren/schema"
)

// The view's modes.
const (
	modeList   = iota
	modeAnswer // typing the answer to the selected agent's wait
	modeFollow // one agent's stream
)

// maxFollow bounds the followed agent's lines kept.
const maxFollow = 200

type model struct {
	ctx context.Context
	d   *client.Client

	agents []agent
	waits  map[string]wait   // agent id -> its wait
	last   map[string]string // agent id -> its latest event, one line
	sel    int
	mode   int
	input  string
	follow string // the followed agent's id
	lines  []string
	delta  string // the followed agent's text streaming now
	note   string // the outcome of the last action
	live   bool
	// dirty: an event came while a refresh ran; refresh again after it.
	refreshing, dirty bool
	width, height     int
}

type agent struct {
	id, path, name, status, provider, model, lastErr string
	pending                                          int64
	spent                                            string
	depth                                            int
}

type wait struct{ kind, prompt, tokenID string }

// Messages.
type (
	eventMsg    map[string]any
	streamEnded struct{ err error }
	refreshed   struct {
		agents []agent
		waits  map[string]wait
		err    error
	}
	acted struct {
		text string
		err  error
	}
	history struct {
		id    string
		lines []string
	}
)

func newModel(ctx context.Context, d *client.Client) *model {
	return &model{ctx: ctx, d: d, waits: map[string]wait{}, last: map[string]string{}, width: 100, height: 30}
}

func (m *model) Init() tea.Cmd { return m.refresh() }

// refresh reads the tree and the waits (one at a time: an event during it
// asks for another).
func (m *model) refresh() tea.Cmd {
	if m.refreshing {
		m.dirty = true
		return nil
	}
	m.refreshing = true
	return func() tea.Msg {
		list, err := m.d.Call(m.ctx, "agent.list", map[string]any{"limit": 1000})
		if err != nil {
			return refreshed{err: err}
		}
		ws, err := m.d.Call(m.ctx, "waits.list", nil)
		if err != nil {
			return refreshed{err: err}
		}
		r := refreshed{waits: map[string]wait{}}
		for _, a := range reply.List(list, "agents") {
			path := reply.Str(a, "path")
			r.agents = append(r.agents, agent{id: reply.Str(a, "agent_id"), path: path, name: reply.Str(a, "name"),
				status: reply.Str(a, "status"), provider: reply.Str(a, "provider"), model: reply.Str(a, "model"),
				lastErr: reply.Str(a, "last_error"), pending: reply.Num(a, "pending"),
				spent: spentLeft(a), depth: strings.Count(path, "/")})
		}
		sort.Slice(r.agents, func(i, j int) bool { return r.agents[i].path < r.agents[j].path })
		for _, w := range reply.List(ws, "waits") {
			r.waits[reply.Str(w, "agent_id")] = wait{kind: reply.Str(w, "kind"), prompt: reply.Str(w, "prompt"), tokenID: reply.Str(w, "token_id")}
		}
		return r
	}
}

// call runs a method for a key and reports its outcome (a resume or an
// answer returns when the run's turn ends; the view stays live meanwhile).
func (m *model) call(what, method string, params map[string]any) tea.Cmd {
	m.note = what + "…"
	return func() tea.Msg {
		_, err := m.d.Call(m.ctx, method, params)
		return acted{text: what, err: err}
	}
}

func (m *model) selected() (agent, bool) {
	if m.sel < 0 || m.sel >= len(m.agents) {
		return agent{}, false
	}
	return m.agents[m.sel], true
}

func (m *model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
	case refreshed:
		m.refreshing = false
		if msg.err != nil {
			m.note = "refresh: " + msg.err.Error()
		} else {
			m.agents, m.waits = msg.agents, msg.waits
			m.sel = min(m.sel, max(0, len(m.agents)-1))
		}
		if m.dirty {
			m.dirty = false
			return m, m.refresh()
		}
	case eventMsg:
		return m, m.event(msg)
	case streamEnded:
		m.live = false
	case acted:
		if msg.err != nil {
			m.note = msg.text + " failed: " + msg.err.Error()
		} else {
			m.note = msg.text + ": done"
		}
		return m, m.refresh()
	case history:
		if msg.id == m.follow {
			m.lines = append(msg.lines, m.lines...)
		}
	case tea.KeyMsg:
		return m, m.key(msg)
	}
	return m, nil
}

// event takes one frame of events.subscribe.
func (m *model) event(ev eventMsg) tea.Cmd {
	name := reply.Str(ev, "event")
	id := reply.Str(ev, "agent_id")
	switch name {
	case "subscribed":
		m.live = true
		return m.refresh()
	case protocol.EventTurnDelta:
		if id == m.follow {
			m.delta += reply.Str(ev, "text")
		}
		return nil
	}
	line := describe(map[string]any(ev))
	m.last[id] = line
	if id == m.follow {
		m.delta = ""
		m.lines = append(m.lines, line)
		if len(m.lines) > maxFollow {
			m.lines = m.lines[len(m.lines)-maxFollow:]
		}
	}
	return m.refresh()
}

func (m *model) key(k tea.KeyMsg) tea.Cmd {
	s := k.String()
	if s == "ctrl+c" {
		return tea.Quit
	}
	switch m.mode {
	case modeAnswer:
		return m.answerKey(k)
	case modeFollow:
		if s == "esc" || s == "q" || s == "left" {
			m.mode, m.follow, m.lines, m.delta = modeList, "", nil, ""
		}
		return nil
	}
	a, ok := m.selected()
	switch s {
	case "q":
		return tea.Quit
	case "up", "k":
		m.sel = max(0, m.sel-1)
	case "down", "j":
		m.sel = min(len(m.agents)-1, m.sel+1)
	case "a":
		if _, waiting := m.waits[a.id]; ok && waiting {
			m.mode, m.input = modeAnswer, ""
		} else {
			m.note = "the selected agent is not waiting for an answer"
		}
	case "r":
		if ok {
			return m.call("resume "+a.path, "agent.resume", map[string]any{"agent_id": a.id})
		}
	case "c":
		if ok {
			return m.call("cancel "+a.path, "agent.cancel", map[string]any{"agent_id": a.id})
		}
	case "enter", "f":
		if ok {
			m.mode, m.follow, m.lines, m.delta = modeFollow, a.id, nil, ""
			return m.loadHistory(a.id)
		}
	}
	return nil
}

func (m *model) answerKey(k tea.KeyMsg) tea.Cmd {
	switch k.Type {
	case tea.KeyEsc:
		m.mode = modeList
	case tea.KeyEnter:
		a, _ := m.selected()
		w := m.waits[a.id]
		m.mode = modeList
		return m.call("answer "+a.path, "agent.resume", map[string]any{"agent_id": a.id, "token_id": w.tokenID, "response": m.input})
	case tea.KeyBackspace:
		if r := []rune(m.input); len(r) > 0 {
			m.input = string(r[:len(r)-1])
		}
	case tea.KeyRunes:
		m.input += string(k.Runes)
	case tea.KeySpace:
		m.input += " "
	}
	return nil
}

// loadHistory reads the followed agent's last entries.
func (m *model) loadHistory(id string) tea.Cmd {
	return func() tea.Msg {
		in, err := m.d.Call(m.ctx, "agent.inspect", map[string]any{"agent_id": id})
		if err != nil {
			return history{id: id}
		}
		since := max(0, reply.Num(in, "last_seq")-20)
		page, err := m.d.Call(m.ctx, "agent.log", map[string]any{"agent_id": id, "since_seq": since, "limit": 20})
		if err != nil {
			return history{id: id}
		}
		var lines []string
		for _, e := range reply.List(page, "events") {
			lines = append(lines, describe(e))
		}
		return history{id: id, lines: lines}
	}
}

// describe is one event as a line.
func describe(ev map[string]any) string {
	d := reply.Obj(ev, "data")
	name := reply.Str(ev, "event")
	text := ""
	switch name {
	case schema.TurnStart:
		text = reply.Str(d, "prompt")
	case schema.TurnComplete:
		text = reply.Str(d, "response")
	case schema.TurnFailed:
		text = reply.Str(d, "error")
	case schema.ToolCall:
		text = reply.Str(d, "tool")
	case schema.RunWaiting:
		text = reply.Str(d, "wait_kind") + ": " + reply.Str(d, "prompt")
	case schema.MessageEnqueued:
		text = reply.Str(d, "payload")
	}
	return strings.TrimSpace(name + " " + textcut.Line(text, 120))
}

func (m *model) View() string {
	var b strings.Builder
	live := "live"
	if !m.live {
		live = "connecting"
	}
	fmt.Fprintf(&b, "warren top   %d agents   %d waiting for you   %s\n\n", len(m.agents), len(m.waits), live)
	if m.mode == modeFollow {
		return m.followView(&b)
	}
	fmt.Fprintf(&b, "  %-28s %-22s %-22s %-32s %5s  %s\n", "AGENT", "STATUS", "MODEL", "SPENT", "PEND", "LATEST")
	for i, a := range m.agents {
		cur := " "
		if i == m.sel {
			cur = ">"
		}
		name := strings.Repeat("  ", a.depth) + textcut.Line(a.name, 28-2*a.depth)
		status := a.status
		if a.lastErr != "" {
			status += " (last turn failed)"
		}
		fmt.Fprintf(&b, "%s %-28s %-22s %-22s %-32s %5d  %s\n", cur, name, textcut.Line(status, 22),
			textcut.Line(a.provider+" "+a.model, 22), textcut.Line(a.spent, 32), a.pending, textcut.Line(m.last[a.id], max(10, m.width-120)))
	}
	if len(m.waits) > 0 {
		b.WriteString("\nWAITING FOR YOU\n")
		for _, a := range m.agents {
			if w, ok := m.waits[a.id]; ok {
				fmt.Fprintf(&b, "  %-28s %-10s %s\n", a.path, w.kind, textcut.Line(w.prompt, max(20, m.width-44)))
			}
		}
	}
	b.WriteString("\n")
	if m.mode == modeAnswer {
		a, _ := m.selected()
		fmt.Fprintf(&b, "answer %s's wait (enter sends, esc cancels): %s_\n", a.path, m.input)
	} else {
		b.WriteString("↑/↓ select   a answer its wait   r resume   c cancel   enter follow   q quit\n")
	}
	if m.note != "" {
		b.WriteString(m.note + "\n")
	}
	return b.String()
}

func (m *model) followView(b *strings.Builder) string {
	a, _ := m.selected()
	fmt.Fprintf(b, "following %s (esc: back)\n\n", a.path)
	lines := m.lines
	if room := max(5, m.height-6); len(lines) > room {
		lines = lines[len(lines)-room:]
	}
	for _, l := range lines {
		b.WriteString("  " + textcut.Line(l, max(20, m.width-4)) + "\n")
	}
	if m.delta != "" {
		b.WriteString("  … " + textcut.Line(m.delta, max(20, m.width-6)) + "\n")
	}
	return b.String()
}

// spentLeft is an agent's spend and, with a budget, what remains of it.
func spentLeft(a map[string]any) string {
	s := render.SpentText(reply.Obj(a, "spent"))
	if left := render.LeftText(reply.Obj(a, "remaining")); left != "" {
		s = strings.TrimSpace(s + " / left " + left)
	}
	return s
}
