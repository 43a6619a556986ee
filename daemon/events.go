package daemon

import "github.com/warren-dev/warren/schema"

// Short names for the log vocabulary (package schema) inside the daemon.
// Transitional: the issue-12 refactor replaces them with schema's names.
const (
	evAgentCreated    = schema.AgentCreated
	evAgentTerminated = schema.AgentTerminated
	evSessionCreated  = schema.SessionCreated
	evTurnStart       = schema.TurnStart
	evTurnComplete    = schema.TurnComplete
	evTurnRetry       = schema.TurnRetry
	evTurnFailed      = schema.TurnFailed
	evTurnCancelled   = schema.TurnCancelled
	evContextReset    = schema.ContextReset
	evRunInterrupted  = schema.RunInterrupted
	evRunWaiting      = schema.RunWaiting
	evRunResumed      = schema.RunResumed
	evTokenMinted     = schema.TokenMinted
	evTokenConsumed   = schema.TokenConsumed
	evTokenRevoked    = schema.TokenRevoked
	evTokenExpired    = schema.TokenExpired
	evToolCall        = schema.ToolCall
	evMsgEnqueued     = schema.MessageEnqueued
	evMsgDelivered    = schema.MessageDelivered
	evSuspendResult   = schema.SuspendResult
	evSessionRestored = schema.SessionRestored
	evMetadataUpdated = schema.MetadataUpdated
	evToolGate        = schema.ToolGate
	evToolPermit      = schema.ToolPermitTurn
	evToolSubscribe   = schema.ToolSubscribe
	evToolUnsubscribe = schema.ToolUnsubscribe
	evReminderSched   = schema.ReminderSched
	evReminderCancel  = schema.ReminderCancel
)

// Interruption reasons.
const (
	reasonProcessRestart = schema.ReasonProcessRestart
	reasonWaitTimeout    = schema.ReasonWaitTimeout
)

// Event data types.
type (
	agentCreatedData     = schema.AgentCreatedData
	agentTerminatedData  = schema.AgentTerminatedData
	sessionCreatedData   = schema.SessionCreatedData
	turnStartData        = schema.TurnStartData
	turnCompleteData     = schema.TurnCompleteData
	turnRetryData        = schema.TurnRetryData
	turnFailedData       = schema.TurnFailedData
	turnCancelledData    = schema.TurnCancelledData
	runInterruptedData   = schema.RunInterruptedData
	runWaitingData       = schema.RunWaitingData
	runResumedData       = schema.RunResumedData
	tokenData            = schema.TokenData
	toolCallData         = schema.ToolCallData
	messageDeliveredData = schema.MessageDeliveredData
	suspendResultData    = schema.SuspendResultData
	sessionRestoredData  = schema.SessionRestoredData
	metadataUpdatedData  = schema.MetadataUpdatedData
	gateData             = schema.GateData
	subscribeData        = schema.SubscribeData
	unsubscribeData      = schema.UnsubscribeData
	reminderData         = schema.ReminderData
)
