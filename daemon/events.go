package daemon

import "github.com/warren-dev/warren/provider"

// Event names (SPEC section 3) and the extra events of this package.
const (
	evAgentCreated    = "agent.created"
	evAgentTerminated = "agent.terminated"
	evSessionCreated  = "session.created"
	evTurnStart       = "turn.start"
	evTurnComplete    = "turn.complete"
	evTurnRetry       = "turn.retry"
	evTurnFailed      = "turn.failed"
	evTurnCancelled   = "turn.cancelled"
	evContextReset    = "context.reset"
	evRunInterrupted  = "run.interrupted"
	evRunWaiting      = "run.waiting"
	evRunResumed      = "run.resumed"
	evTokenMinted     = "token.minted"
	evTokenConsumed   = "token.consumed"
	evTokenRevoked    = "token.revoked"
	evTokenExpired    = "token.expired"
	evToolCall        = "tool.call"
	evMsgEnqueued     = "message.enqueued"
	evMsgDelivered    = "message.delivered"
	evSuspendResult   = "suspend.result"
	evSessionRestored = "session.restored"
	evMetadataUpdated = "metadata.updated"
	evToolGate        = "tool.gate"
	evToolPermit      = "tool.permit_turn"
	evToolSubscribe   = "tool.subscribe"
	evToolUnsubscribe = "tool.unsubscribe"
	evReminderSched   = "reminder.scheduled"
	evReminderCancel  = "reminder.cancelled"
)

// Interruption reasons.
const (
	reasonProcessRestart = "process_restart"
	reasonWaitTimeout    = "wait_timeout"
)

type agentCreatedData struct {
	AgentID      string            `json:"agent_id"`
	Name         string            `json:"name"`
	ParentID     *string           `json:"parent_id"`
	Instructions string            `json:"instructions"`
	Provider     string            `json:"provider"`
	Model        string            `json:"model"`
	Metadata     map[string]string `json:"metadata"`
	// CreatedAt (RFC 3339 with nanoseconds) orders agents created in the
	// same millisecond, so recovery keeps the creation order.
	CreatedAt string `json:"created_at,omitempty"`
}

type agentTerminatedData struct {
	AgentID string `json:"agent_id"`
}

type sessionCreatedData struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
	Handle   string `json:"handle"`
}

type turnStartData struct {
	RunID      string   `json:"run_id"`
	Turn       int      `json:"turn"`
	BootID     string   `json:"boot_id"`
	Prompt     string   `json:"prompt"`
	Provider   string   `json:"provider"`
	Model      string   `json:"model"`
	MessageIDs []string `json:"message_ids"`
}

type turnCompleteData struct {
	RunID    string `json:"run_id"`
	Turn     int    `json:"turn"`
	Response string `json:"response"`
	// Usage is the token usage the provider reported, summed over the
	// turn's requests (all attempts); absent when it reported none.
	Usage *provider.Usage `json:"usage,omitempty"`
}

type turnRetryData struct {
	RunID   string `json:"run_id"`
	Turn    int    `json:"turn"`
	Attempt int    `json:"attempt"`
	Error   string `json:"error"`
	DelayMS int64  `json:"delay_ms"`
}

type turnFailedData struct {
	RunID    string `json:"run_id"`
	Turn     int    `json:"turn"`
	Error    string `json:"error"`
	Attempts int    `json:"attempts"`
}

type turnCancelledData struct {
	RunID string `json:"run_id"`
	Turn  int    `json:"turn"`
}

type runInterruptedData struct {
	RunID  string `json:"run_id"`
	Reason string `json:"reason"`
}

type runWaitingData struct {
	RunID      string `json:"run_id"`
	WaitKind   string `json:"wait_kind"`
	Prompt     string `json:"prompt"`
	TokenID    string `json:"token_id"`
	Deadline   string `json:"deadline"`
	SecretHash string `json:"secret_hash"`
	Turn       int    `json:"turn"`
}

type runResumedData struct {
	RunID    string `json:"run_id"`
	TokenID  string `json:"token_id"`
	Response string `json:"response,omitempty"`
}

type tokenData struct {
	TokenID string `json:"token_id"`
	RunID   string `json:"run_id"`
	Reason  string `json:"reason,omitempty"`
}

type toolCallData struct {
	CallID   string           `json:"call_id"`
	Tool     string           `json:"tool"`
	Args     map[string]any   `json:"args"`
	Result   map[string]any   `json:"result,omitempty"`
	Error    string           `json:"error,omitempty"`
	RunID    string           `json:"run_id,omitempty"`
	Turn     int              `json:"turn,omitempty"`
	Messages []map[string]any `json:"messages,omitempty"`
}

type messageDeliveredData struct {
	MessageID string `json:"message_id"`
}

type suspendResultData struct {
	StateSize int `json:"state_size"`
}

type sessionRestoredData struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
	Strategy string `json:"strategy"`
}

type metadataUpdatedData struct {
	Key   string  `json:"key"`
	Value *string `json:"value"`
}

type gateData struct {
	Action    string `json:"action"`
	AgentName string `json:"agent_name"`
}

type subscribeData struct {
	SubscriptionID string `json:"subscription_id"`
	TargetID       string `json:"target_id"`
	From           string `json:"from"`
	To             string `json:"to"`
	Once           bool   `json:"once"`
}

type unsubscribeData struct {
	SubscriptionID string `json:"subscription_id"`
	Reason         string `json:"reason,omitempty"`
}

type reminderData struct {
	ReminderID string `json:"reminder_id"`
	Reason     string `json:"reason,omitempty"`
	Due        string `json:"due,omitempty"`
	EveryMS    int64  `json:"every_ms,omitempty"`
}
