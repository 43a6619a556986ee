package engine

import (
	"github.com/warren-dev/warren/engine/internal/notice"
	"github.com/warren-dev/warren/engine/internal/views"
	"github.com/warren-dev/warren/inbox"
	"github.com/warren-dev/warren/tree"
)

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
	if w, ok := views.Wait(c.views().Snapshot(a)); ok {
		c.noticeWait(w)
	}
}
