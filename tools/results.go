package tools

import "fmt"

// Result constructors: the success shapes of Substrat's catalog, so every
// implementation returns the same keys. All return fresh maps.

// ErrorResult is a tool-level failure: {"error": "<text>"}.
func ErrorResult(format string, args ...any) map[string]any {
	return map[string]any{"error": fmt.Sprintf(format, args...)}
}

// IsError reports whether a result is a tool-level failure, and its text
// (tests read results with it).
func IsError(result map[string]any) (string, bool) {
	s, ok := result["error"].(string)
	return s, ok
}

// SendMessageResult: {"status":"sent","message_id"}.
func SendMessageResult(messageID string) map[string]any {
	return map[string]any{"status": "sent", "message_id": messageID}
}

// BroadcastResult: {"status":"sent","message_id","recipient_count"}, where
// message_id is the broadcast id (each copy carries it as metadata
// broadcast_id).
func BroadcastResult(broadcastID string, recipients int) map[string]any {
	return map[string]any{"status": "sent", "message_id": broadcastID, "recipient_count": recipients}
}

// InboxItem is one message in a check_inbox result.
type InboxItem struct {
	From      string // display name: USER, SYSTEM, the agent's name, else its id
	Text      string
	MessageID string
}

// CheckInboxResult: {"messages":[{"from","text","message_id"}]} (an empty
// list, never null), plus "more": the number of matching messages left for
// the next call, when there are any.
func CheckInboxResult(items []InboxItem, more int) map[string]any {
	out := map[string]any{"messages": inboxItems(items)}
	if more > 0 {
		out["more"] = more
	}
	return out
}

func inboxItems(items []InboxItem) []any {
	msgs := make([]any, len(items))
	for i, it := range items {
		msgs[i] = map[string]any{"from": it.From, "text": it.Text, "message_id": it.MessageID}
	}
	return msgs
}

// SpawnAgentResult: {"status":"accepted","agent_id","name"}.
func SpawnAgentResult(agentID, name string) map[string]any {
	return map[string]any{"status": "accepted", "agent_id": agentID, "name": name}
}

// AgentInfo describes a child in inspect_agent and list_children results.
type AgentInfo struct {
	Name            string
	AgentID         string
	State           string
	Gated           bool
	Metadata        map[string]string
	PendingMessages int
	// RecentMessages are the child's pending messages (inspect_agent only).
	RecentMessages []InboxItem
}

func metadataObject(md map[string]string) map[string]any {
	out := make(map[string]any, len(md))
	for k, v := range md {
		out[k] = v
	}
	return out
}

// InspectAgentResult: {"state","gated","metadata","recent_messages":[{"from","text","message_id"}],"pending_messages"}.
// recent_messages are the first of the child's pending messages;
// pending_messages counts them all.
func InspectAgentResult(a AgentInfo) map[string]any {
	return map[string]any{
		"state":            a.State,
		"gated":            a.Gated,
		"metadata":         metadataObject(a.Metadata),
		"recent_messages":  inboxItems(a.RecentMessages),
		"pending_messages": a.PendingMessages,
	}
}

// ListChildrenResult: {"children":[{"name","agent_id","state","gated","metadata","pending_messages"}]}.
func ListChildrenResult(children []AgentInfo) map[string]any {
	out := make([]any, len(children))
	for i, c := range children {
		out[i] = map[string]any{
			"name":             c.Name,
			"agent_id":         c.AgentID,
			"state":            c.State,
			"gated":            c.Gated,
			"metadata":         metadataObject(c.Metadata),
			"pending_messages": c.PendingMessages,
		}
	}
	return map[string]any{"children": out}
}

// CompleteResult: {"status":"completing","message_id"}.
func CompleteResult(messageID string) map[string]any {
	return map[string]any{"status": "completing", "message_id": messageID}
}

// PokeResult: {"status":"poked","agent_id"}.
func PokeResult(agentID string) map[string]any {
	return map[string]any{"status": "poked", "agent_id": agentID}
}

// RemindMeResult: {"status":"scheduled","reminder_id"}.
func RemindMeResult(reminderID string) map[string]any {
	return map[string]any{"status": "scheduled", "reminder_id": reminderID}
}

// CancelReminderResult: {"status":"cancelled","reminder_id"}.
func CancelReminderResult(reminderID string) map[string]any {
	return map[string]any{"status": "cancelled", "reminder_id": reminderID}
}

// SetAgentMetadataResult: {"status":"updated","agent_name","key","value"}
// (value null when the key was deleted).
func SetAgentMetadataResult(agentName, key string, value *string) map[string]any {
	var v any
	if value != nil {
		v = *value
	}
	return map[string]any{"status": "updated", "agent_name": agentName, "key": key, "value": v}
}

// SubscribeResult: {"subscription_id","status":"active"}.
func SubscribeResult(subscriptionID string) map[string]any {
	return map[string]any{"subscription_id": subscriptionID, "status": "active"}
}

// UnsubscribeResult: {"status":"removed"}.
func UnsubscribeResult() map[string]any {
	return map[string]any{"status": "removed"}
}

// GateResult: {"status":"gated","agent_name"}.
func GateResult(agentName string) map[string]any {
	return map[string]any{"status": "gated", "agent_name": agentName}
}

// UngateResult: {"status":"ungated","agent_name"}.
func UngateResult(agentName string) map[string]any {
	return map[string]any{"status": "ungated", "agent_name": agentName}
}

// PermitTurnResult: {"status":"permitted","agent_name"}.
func PermitTurnResult(agentName string) map[string]any {
	return map[string]any{"status": "permitted", "agent_name": agentName}
}
