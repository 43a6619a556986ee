package schema

// The data of each event (doc.go). Field order is the order of the JSON
// object in the log; changing it changes the bytes written (the daemon's
// golden-log test guards it).

type AgentCreatedData struct {
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
	// Cwd is the agent's working directory (absolute); agent CLIs and
	// scripts run there. Absent in logs written before it existed: the
	// daemon's directory then applies.
	Cwd string `json:"cwd,omitempty"`
	// Bootstrap: the agent was spawned (spawn_agent) and owes one
	// bootstrap turn, which recovery starts if a crash cut it off; an
	// agent the operator created owes none (SPEC 6). Absent (false) in
	// logs written before it existed: no restart starts a bootstrap turn
	// on such an agent.
	Bootstrap bool `json:"bootstrap,omitempty"`
	// Workspace is the agent's workspace, when it has one (SPEC 12);
	// workspace.created follows in the same write.
	Workspace *WorkspaceData `json:"workspace,omitempty"`
	// Sandbox is the agent's sandbox, when it has one (SPEC 12): every
	// process of the agent runs confined. It is fixed at creation: a later
	// edit of config.json does not take it away.
	Sandbox *SandboxData `json:"sandbox,omitempty"`
}

// SandboxData is an agent's sandbox (bubblewrap).
type SandboxData struct {
	Type    string   `json:"type"`
	Network bool     `json:"network"`
	BindRO  []string `json:"bind_ro,omitempty"`
	BindRW  []string `json:"bind_rw,omitempty"`
}

type AgentTerminatedData struct {
	AgentID string `json:"agent_id"`
}

// ContextResetData is agent.reset's entry: later restores of the agent
// start a fresh provider session.
type ContextResetData struct {
	AgentID string `json:"agent_id"`
}

// AgentClaimedData is the first entry a new owner appends to an agent's
// log in a cluster (store/jetstream): node and boot_id name the claiming
// daemon, epoch is its claim (the revision of its lease). Appends fenced
// on the entry before it fail from then on, so an older owner can no
// longer write.
type AgentClaimedData struct {
	Node   string `json:"node"`
	Epoch  uint64 `json:"epoch"`
	BootID string `json:"boot_id"`
}

type SessionCreatedData struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
	Handle   string `json:"handle"`
}

type TurnStartData struct {
	RunID      string   `json:"run_id"`
	Turn       int      `json:"turn"`
	BootID     string   `json:"boot_id"`
	Prompt     string   `json:"prompt"`
	Provider   string   `json:"provider"`
	Model      string   `json:"model"`
	MessageIDs []string `json:"message_ids"`
}

type TurnCompleteData struct {
	RunID    string `json:"run_id"`
	Turn     int    `json:"turn"`
	Response string `json:"response"`
	// Usage is the token usage the provider reported, summed over the
	// turn's requests (all attempts); absent when it reported none.
	Usage *Usage `json:"usage,omitempty"`
}

type TurnRetryData struct {
	RunID   string `json:"run_id"`
	Turn    int    `json:"turn"`
	Attempt int    `json:"attempt"`
	Error   string `json:"error"`
	DelayMS int64  `json:"delay_ms"`
}

type TurnFailedData struct {
	RunID    string `json:"run_id"`
	Turn     int    `json:"turn"`
	Error    string `json:"error"`
	Attempts int    `json:"attempts"`
}

type TurnCancelledData struct {
	RunID string `json:"run_id"`
	Turn  int    `json:"turn"`
}

type RunInterruptedData struct {
	RunID  string `json:"run_id"`
	Reason string `json:"reason"`
}

type RunWaitingData struct {
	RunID      string `json:"run_id"`
	WaitKind   string `json:"wait_kind"`
	Prompt     string `json:"prompt"`
	TokenID    string `json:"token_id"`
	Deadline   string `json:"deadline"`
	SecretHash string `json:"secret_hash"`
	Turn       int    `json:"turn"`
}

type RunResumedData struct {
	RunID    string `json:"run_id"`
	TokenID  string `json:"token_id"`
	Response string `json:"response,omitempty"`
	// By is who resumed it: ByOperator or ByAuto (the resume policy).
	By string `json:"by"`
	// TimedOut: the re-run of a run whose wait timed out; its await_input
	// call is answered {"error": "wait timed out", "timed_out": true}.
	TimedOut bool `json:"timed_out,omitempty"`
}

type TokenData struct {
	TokenID string `json:"token_id"`
	RunID   string `json:"run_id"`
	Reason  string `json:"reason,omitempty"`
}

type ToolCallData struct {
	CallID   string           `json:"call_id"`
	Tool     string           `json:"tool"`
	Args     map[string]any   `json:"args"`
	Result   map[string]any   `json:"result,omitempty"`
	Error    string           `json:"error,omitempty"`
	RunID    string           `json:"run_id,omitempty"`
	Turn     int              `json:"turn,omitempty"`
	Messages []map[string]any `json:"messages,omitempty"`
}

type MessageDeliveredData struct {
	MessageID string `json:"message_id"`
}

type SuspendResultData struct {
	StateSize int `json:"state_size"`
}

type SessionRestoredData struct {
	Provider string `json:"provider"`
	Model    string `json:"model"`
	Strategy string `json:"strategy"`
	// Method is how a native restore was done, when the provider says
	// (provider.RestoredBy: session/resume or session/load for acp).
	Method string `json:"method,omitempty"`
}

type MetadataUpdatedData struct {
	Key   string  `json:"key"`
	Value *string `json:"value"`
}

type GateData struct {
	Action    string `json:"action"`
	AgentName string `json:"agent_name"`
}

type SubscribeData struct {
	SubscriptionID string `json:"subscription_id"`
	TargetID       string `json:"target_id"`
	From           string `json:"from"`
	To             string `json:"to"`
	Once           bool   `json:"once"`
}

type UnsubscribeData struct {
	SubscriptionID string `json:"subscription_id"`
	Reason         string `json:"reason,omitempty"`
}

// NoticesOwedData is written in the same write as an agent's state
// transition when subscriptions match it: the notices the transition owes,
// so that recovery delivers those a crash kept from their subscribers.
type NoticesOwedData struct {
	From          string       `json:"from"`
	To            string       `json:"to"`
	Key           string       `json:"key"`
	Subscriptions []NoticeOwed `json:"subscriptions"`
}

// NoticeOwed is one subscription a transition owes a notice.
type NoticeOwed struct {
	SubscriptionID string `json:"subscription_id"`
	Subscriber     string `json:"subscriber"`
}

type ReminderData struct {
	ReminderID string `json:"reminder_id"`
	Reason     string `json:"reason,omitempty"`
	Due        string `json:"due,omitempty"`
	EveryMS    int64  `json:"every_ms,omitempty"`
}

// Usage is the token usage a provider reported (turn.complete's usage).
type Usage struct {
	// InputTokens counts every input token of the request, including those
	// read from the provider's prompt cache.
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
	// CachedInputTokens is the part of InputTokens the provider read from
	// its prompt cache (0 when it does not say).
	CachedInputTokens int `json:"cached_input_tokens,omitempty"`
	// CacheWriteInputTokens is the part of InputTokens the provider wrote
	// to its prompt cache (Anthropic's cache_creation_input_tokens).
	CacheWriteInputTokens int `json:"cache_write_input_tokens,omitempty"`
}

// Add returns the sum of two usages.
func (u Usage) Add(v Usage) Usage {
	return Usage{InputTokens: u.InputTokens + v.InputTokens, OutputTokens: u.OutputTokens + v.OutputTokens,
		CacheWriteInputTokens: u.CacheWriteInputTokens + v.CacheWriteInputTokens,
		CachedInputTokens:     u.CachedInputTokens + v.CachedInputTokens}
}

// IsZero reports whether nothing was reported.
func (u Usage) IsZero() bool { return u == Usage{} }

// WorkspaceData is an agent's workspace (workspace.created, and
// agent.created's workspace).
type WorkspaceData struct {
	Repo   string `json:"repo"`
	Path   string `json:"path"`
	Branch string `json:"branch"`
	Base   string `json:"base"`
}

type WorkspaceSnapshotData struct {
	RunID  string `json:"run_id"`
	Turn   int    `json:"turn"`
	At     string `json:"at"`
	Commit string `json:"commit"`
	// Worker is the remote worker that took the snapshot of its copy and
	// handed it back ("" for one taken on the daemon's machine).
	Worker string `json:"worker,omitempty"`
}

type WorkspaceRestoredData struct {
	RunID  string `json:"run_id,omitempty"`
	Commit string `json:"commit"`
	Reason string `json:"reason"`
}

type WorkspaceRepairedData struct {
	Path string `json:"path"`
	What string `json:"what"`
}

type WorkspaceMergedData struct {
	ChildID   string   `json:"child_id"`
	Branch    string   `json:"branch"`
	Commit    string   `json:"commit,omitempty"`
	Conflicts []string `json:"conflicts,omitempty"`
}

type WorkspaceClosedData struct {
	Branch  string `json:"branch"`
	Commit  string `json:"commit"`
	Removed bool   `json:"removed"`
}

// UsageStepData is one model request's usage (SPEC 13), logged when its
// response has been read. InputTokens includes the cache's reads and
// writes; USD is nil when the config has no price for the model.
type UsageStepData struct {
	RunID            string   `json:"run_id"`
	Turn             int      `json:"turn"`
	Step             int      `json:"step"`
	InputTokens      int      `json:"input_tokens"`
	OutputTokens     int      `json:"output_tokens"`
	CacheReadTokens  int      `json:"cache_read_tokens"`
	CacheWriteTokens int      `json:"cache_write_tokens"`
	USD              *float64 `json:"usd"`
}

// BudgetSetData is an agent's budget after a change (SPEC 13): the totals
// in force, never an increment; a nil limit is unlimited. By is ByOperator
// or the id of the parent that granted it (spawn_agent's budget).
type BudgetSetData struct {
	Tokens *int64   `json:"tokens"`
	USD    *float64 `json:"usd"`
	Turns  *int64   `json:"turns"`
	By     string   `json:"by"`
}
