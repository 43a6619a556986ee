// Package notify tells the operator what needs them without polling
// (SPEC 14): a notification for every wait, failure, interruption and
// message to USER, driven by the logs, delivered at least once to each
// sink of config.json's "notify".
//
// # A notification
//
// One JSON object, the same for every sink (a command gets it on its
// standard input, a webhook as the body of a POST):
//
//	{"id": "<agent_id>:<seq>", "kind": "run.waiting", "agent_id": "...",
//	 "path": "lead/w1", "ts": "2026-11-29T10:01:10.123Z",
//	 "text": "Deploy to production?", "wait_kind": "approval",
//	 "token_id": "...", "command": "warren agent resume lead/w1 --token-id ... RESPONSE"}
//
// id is the occurrence: the log and seq of the entry it was made from
// ("USER:<seq>" for a message, an entry of the USER inbox's log), so a
// notification delivered again after a crash has the same id and a sink
// can drop the repeat. kind is the entry's event: run.waiting (wait_kind,
// token_id and the command that answers it), turn.failed (the error),
// run.interrupted (the reason; the command re-runs it) or "message" (a
// root agent's message to USER; agent_id and path are the sender's). Two
// kinds are not made from an entry: "notify.dropped" (a sink fell behind
// and notifications were dropped; they come again at the next start)
// and "test" (`warren notify test`). A token's secret is never in a log,
// so never in a notification; texts are cut at 300 characters.
//
// # Delivery
//
// The notifier subscribes to every logged entry and, at its start, reads
// each log from its mark on (below): the logs are the source, the live
// stream only the fast path, so a crash or a subscriber that fell behind
// loses nothing. Each sink has its own queue (1,024 notifications) and
// worker: a failure is retried with backoff (1 s doubling to 5 min), a
// send has a 10 s timeout, and a full queue drops the notification for
// this run (counted, reported as notify.dropped, delivered again after a
// restart). Nothing of this runs on a turn's path: a hanging sink never
// slows a turn.
//
// # notify.jsonl
//
// <home>/notify.jsonl records what each sink acknowledged, one JSON object
// per line:
//
//	{"ack": "<id>", "sink": "<name>", "ts": "..."}
//	{"mark": {"<log id>": <seq>, ...}, "since": "...", "ts": "..."}
//
// A mark says every notification of each log up to its seq was
// acknowledged by every sink; the start reads each log from its mark on
// and skips what the acks after the last mark say was delivered. since
// is when notifications began (the first start with a sink): older entries
// are never notified. Lines are appended without fsync: a lost line costs
// a notification delivered twice, never one lost; a torn last line is
// ignored. Past 10,000 lines the file is rewritten (atomicfile) with its
// last mark and the acks that still matter.
package notify
