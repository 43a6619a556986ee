// Package schema is the vocabulary of warren's event logs (SPEC section 3):
// the event names, the typed data each event carries, the reasons, token
// states and subscription states the entries use, and the agent name rule.
// Every package that writes or reads log entries takes these names from
// here; none spells an event name or a state string itself. The line format
// around the data (seq, ts, crc, the pending-file WAL) is eventlog's and is
// documented in eventlog/doc.go.
//
// # Events
//
// Each entry's "event" names one of the events below; its "data" object
// holds the listed fields (the Go type of each is the XxxData struct of the
// same name). Readers ignore unknown events and unknown fields, so events
// and fields may be added; the names and listed fields are fixed.
//
//	event               log          data
//	agent.created       new agent's  agent_id, name, parent_id (hex or null), instructions,
//	                                 provider, model, metadata (object), cwd, created_at,
//	                                 bootstrap (true: spawned, owes one bootstrap turn),
//	                                 workspace (its workspace, when it has one: repo, path,
//	                                 branch, base; workspace.created follows in the same write)
//	agent.terminated    own          agent_id
//	agent.claimed       own          node, epoch, boot_id: a node of a cluster took the agent
//	                                 over (store/jetstream); none in a local home
//	session.created     own          provider, model, handle (the native resume handle)
//	session.restored    own          provider, model, strategy (native, history or fresh),
//	                                 method (a native restore's: session/resume or session/load)
//	suspend.result      own          state_size (bytes of the blob saved on eviction)
//	context.reset       own          agent_id: later restores start a fresh session
//	turn.start          own          run_id, turn, boot_id, prompt, provider, model, message_ids
//	turn.complete       own          run_id, turn, response, usage (when reported)
//	turn.retry          own          run_id, turn, attempt, error, delay_ms
//	turn.failed         own          run_id, turn, error, attempts
//	turn.cancelled      own          run_id, turn
//	run.interrupted     own          run_id, reason (process_restart, shutdown, wait_timeout or
//	                                 takeover)
//	run.waiting         own          run_id, wait_kind, prompt, token_id, deadline, secret_hash, turn
//	run.resumed         own          run_id, token_id ("" for an interrupted run), response, by
//	                                 (operator or auto), timed_out (a timed-out wait re-run)
//	token.minted        own          token_id, run_id
//	token.consumed      own          token_id, run_id
//	token.revoked       own          token_id, run_id, reason (cancelled, new_message or terminated)
//	token.expired       own          token_id, run_id
//	tool.call           caller's     call_id, tool, args, result or error, run_id, turn, messages
//	message.enqueued    recipient's  message_id, sender, recipient, kind, payload, timestamp,
//	                                 reply_to, metadata (inbox.Message is its data)
//	message.delivered   recipient's  message_id (taken by check_inbox; a turn's messages are
//	                                 delivered by its turn.complete)
//	metadata.updated    the child's  key, value (null deletes)
//	tool.gate           the child's  action (gate or ungate), agent_name
//	tool.permit_turn    the child's  agent_name
//	tool.subscribe      own          subscription_id, target_id, from, to, once
//	tool.unsubscribe    own          subscription_id, reason
//	reminder.scheduled  own          reminder_id, reason, due, every_ms
//	reminder.cancelled  own          reminder_id
//	workspace.created   own          repo, path, branch, base (written with agent.created)
//	workspace.snapshot  own          run_id, turn, at (start or end), commit, worker?
//	workspace.restored  own          run_id, commit, reason (rerun or operator)
//	workspace.repaired  own          path, what
//	workspace.merged    the parent's child_id, branch, commit, or conflicts (paths)
//	workspace.closed    own          branch, commit (the branch head kept), removed
//	budget.set          own          tokens, usd, turns (each null = unlimited): the totals in force after
//	                                 the change, by (operator, or the granting parent's id)
//	usage.step          own          run_id, turn, step, input_tokens, output_tokens, cache_read_tokens,
//	                                 cache_write_tokens, usd (null without a price): one model request
//	notices.owed        own          from, to, key, subscriptions ([{subscription_id, subscriber}]):
//	                                 written with a state transition that subscriptions match,
//	                                 in the same write; recovery delivers the notices a crash
//	                                 kept from their subscribers (engine/internal/subs)
//
// The USER inbox (<home>/user.jsonl) holds only message.enqueued and
// message.delivered.
//
// # Spelled once
//
// TestEventNamesAreSpelledOnlyHere walks the module's code files (tests
// left out) and fails on a string literal equal to an event name outside
// this package. The event frames of agent.send and agent.stream that
// mirror log entries (run.waiting, turn.retry) take their names from here
// too; the one frame that is never logged, turn.delta, is
// protocol.EventTurnDelta. Socket method names (tool.call among them) are
// the protocol's, not the log's.
package schema
