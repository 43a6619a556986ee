package engine

import (
	"time"

	"github.com/warren-dev/warren/engine/internal/notice"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/tree"
)

// WaitView is one pending wait, as waits.list shows it (SPEC 4, 8.1):
// never the secret.
type WaitView struct {
	AgentID  string
	Path     string
	RunID    string
	Kind     string
	Prompt   string
	TokenID  string
	Deadline time.Time
	Since    time.Time
}

// Waits lists every pending wait in the tree (a live token on an open
// run), in tree order: whoever started it and whether or not anyone
// watched, the operator can find it here and answer it by token id.
func (c *Core) Waits() []WaitView {
	var out []WaitView
	for _, v := range c.List() {
		a, ok := c.agent(v.ID)
		if !ok {
			continue
		}
		a.mu.Lock()
		if a.hasLiveWait() {
			r := a.p.Run
			out = append(out, WaitView{AgentID: a.id, Path: v.Path, RunID: r.RunID, Kind: r.Wait.Kind,
				Prompt: r.Wait.Prompt, TokenID: r.Wait.TokenID, Deadline: r.Wait.Deadline, Since: r.Wait.Since})
		}
		a.mu.Unlock()
	}
	return out
}

// noticeWait tells the operator, in the USER inbox, that a wait began: the
// agent's path, kind, prompt, token id and deadline, and the command that
// answers it; never the secret. The message id derives from the token id,
// so a notice repeated (at recovery) is not enqueued twice.
func (c *Core) noticeWait(w WaitView) {
	text := notice.WaitBegan(w.Path, w.Kind, w.Prompt, w.TokenID, w.Deadline)
	m := c.newMessage(notice.ID("wait", w.TokenID), tree.System, tree.User, inbox.KindNotification, text)
	m.Metadata["token_id"] = w.TokenID
	m.Metadata["waiting_agent"] = w.AgentID
	if err := c.enqueue(m); err != nil {
		c.log.Error("telling USER a wait began", "agent", w.AgentID, "token_id", w.TokenID, "err", err)
	}
}

// noticeWaits makes sure the USER inbox has a notice for every pending
// wait (a crash may have cut one off between run.waiting and the notice).
func (c *Core) noticeWaits() {
	for _, w := range c.Waits() {
		c.noticeWait(w)
	}
}

// noticeWaitOf sends the notice of a's wait that just began.
func (c *Core) noticeWaitOf(a *agent) {
	path := c.tree.Path(a.id)
	a.mu.Lock()
	var w WaitView
	ok := a.hasLiveWait()
	if ok {
		r := a.p.Run
		w = WaitView{AgentID: a.id, Path: path, RunID: r.RunID, Kind: r.Wait.Kind, Prompt: r.Wait.Prompt,
			TokenID: r.Wait.TokenID, Deadline: r.Wait.Deadline, Since: r.Wait.Since}
	}
	if w.Path == "" {
		w.Path = a.p.Name
	}
	a.mu.Unlock()
	if ok {
		c.noticeWait(w)
	}
}
