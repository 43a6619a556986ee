package schema

import "regexp"

// Event names (doc.go).
const (
	AgentCreated     = "agent.created"
	AgentTerminated  = "agent.terminated"
	AgentClaimed     = "agent.claimed"
	SessionCreated   = "session.created"
	SessionRestored  = "session.restored"
	SuspendResult    = "suspend.result"
	ContextReset     = "context.reset"
	TurnStart        = "turn.start"
	TurnComplete     = "turn.complete"
	TurnRetry        = "turn.retry"
	TurnFailed       = "turn.failed"
	TurnCancelled    = "turn.cancelled"
	RunInterrupted   = "run.interrupted"
	RunWaiting       = "run.waiting"
	RunResumed       = "run.resumed"
	TokenMinted      = "token.minted"
	TokenConsumed    = "token.consumed"
	TokenRevoked     = "token.revoked"
	TokenExpired     = "token.expired"
	ToolCall         = "tool.call"
	MessageEnqueued  = "message.enqueued"
	MessageDelivered = "message.delivered"
	MetadataUpdated  = "metadata.updated"
	ToolGate         = "tool.gate"
	ToolPermitTurn   = "tool.permit_turn"
	ToolSubscribe    = "tool.subscribe"
	ToolUnsubscribe  = "tool.unsubscribe"
	ReminderSched    = "reminder.scheduled"
	ReminderCancel   = "reminder.cancelled"
	NoticesOwed      = "notices.owed"
	UsageStep        = "usage.step"
	BudgetSet        = "budget.set"

	WorkspaceCreated  = "workspace.created"
	WorkspaceSnapshot = "workspace.snapshot"
	WorkspaceRestored = "workspace.restored"
	WorkspaceRepaired = "workspace.repaired"
	WorkspaceMerged   = "workspace.merged"
	WorkspaceClosed   = "workspace.closed"
)

// When a workspace.snapshot is taken (its at).
const (
	SnapshotStart = "start"
	SnapshotEnd   = "end"
)

// Why a workspace was restored (workspace.restored's reason).
const (
	RestoreRerun    = "rerun"
	RestoreOperator = "operator"
)

// WaitBudget is the wait_kind of a run suspended because a budget is
// spent (SPEC 13).
const WaitBudget = "budget"

// Reasons of run.interrupted.
const (
	ReasonProcessRestart = "process_restart"
	ReasonShutdown       = "shutdown" // a clean stop interrupted the running turn
	ReasonWaitTimeout    = "wait_timeout"
	ReasonTakeover       = "takeover" // another daemon of a cluster took the agent over
)

// Who re-ran a run (run.resumed's by).
const (
	ByOperator = "operator"
	ByAuto     = "auto"
)

// Reasons of token.revoked.
const (
	RevokeCancelled  = "cancelled"   // agent.cancel, or the turn was cancelled
	RevokeNewMessage = "new_message" // agent.send to a suspended agent started a new run
	RevokeTerminated = "terminated"  // the waiting agent was terminated
)

// Restore strategies of session.restored.
const (
	RestoreNative  = "native"
	RestoreHistory = "history"
	RestoreFresh   = "fresh"
)

// TokenState is where a resume token is in its lifecycle as the log tells
// it: minted TokLive, then exactly one of the others, once.
type TokenState string

// Token states.
const (
	TokLive     TokenState = "live"
	TokConsumed TokenState = "consumed"
	TokRevoked  TokenState = "revoked"
	TokExpired  TokenState = "expired"
)

// Subscription states (the from and to of tool.subscribe and of the
// subscribe tool's transition "from->to"); Any matches every state.
const (
	StateIdle       = "idle"
	StateBusy       = "busy"
	StateWaiting    = "waiting"
	StateTerminated = "terminated"
	StateAny        = "*"
)

// SubscriptionStates lists the states a transition may name.
func SubscriptionStates() []string {
	return []string{StateIdle, StateBusy, StateWaiting, StateTerminated, StateAny}
}

// NamePattern is the rule for agent names and wait kinds: a letter, then
// up to 63 letters, digits, '_', '.' or '-'.
const NamePattern = `^[A-Za-z][A-Za-z0-9_.-]{0,63}$`

// ValidName reports whether s follows NamePattern.
func ValidName(s string) bool { return nameRE.MatchString(s) }

var nameRE = regexp.MustCompile(NamePattern)
