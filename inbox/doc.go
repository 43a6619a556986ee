// Package inbox holds warren's message envelope, its event encoding and the
// per-agent FIFO message queues (SPEC 6).
//
// # Envelope
//
// A Message travels from a sender to a recipient; each is an agent id or one
// of the sentinels "USER" (the operator) and "SYSTEM" (the daemon). Its kind
// is request, response, notification or error. Message ids are 32 lowercase
// hex characters (NewID).
//
// # Event encoding
//
// A message is logged in the recipient's event log as message.enqueued
// before it is delivered to the inbox. Message.EventData produces the event's
// data object, with exactly these fields:
//
//	{
//	  "message_id": "9f0c...e1",            32 lowercase hex
//	  "sender":     "USER" | "SYSTEM" | agent id,
//	  "recipient":  "USER" | agent id,
//	  "kind":       "request" | "response" | "notification" | "error",
//	  "payload":    "the text",
//	  "timestamp":  "2026-11-22T10:01:10.123Z",   RFC 3339, UTC, milliseconds
//	  "reply_to":   null | message id,
//	  "metadata":   {"key": "value", ...}          strings only, {} when empty
//	}
//
// FromEventData decodes it back. message_id, sender, recipient, kind and
// payload are required; timestamp, reply_to and metadata may be missing or
// null (older or hand-written logs); unknown fields are ignored. An unknown
// kind is an error that names it, never silently mapped to another kind.
//
// # Queues
//
// A Queue is one agent's inbox: FIFO, safe for concurrent use, optionally
// bounded (ErrFull). Take removes exactly the messages a turn was shown,
// leaving messages that arrived meanwhile queued for the next turn; Collect
// removes the messages a filter selects (check_inbox). A message id is queued
// at most once (ErrDuplicate), so replaying message.enqueued events at
// recovery is idempotent.
//
// A queued message may be held without its payload: Spill drops the text
// and keeps its size, Ref says where its message.enqueued entry is in the
// recipient's log, and whoever shows the message reads the text back and
// calls Fill. A Queue counts its payload bytes (Bytes), and queues attached
// to one Totals count every message and byte together, so a daemon can
// bound its pending messages per agent and in total. PeekAfter pages a
// queue by seq; PeekFirst takes a batch bounded by count and bytes.
//
// FormatPrompt renders the wake prompt of SPEC 6 from the messages a turn
// consumes.
package inbox
