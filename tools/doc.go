// Package tools is warren's agent tool catalog (SPEC 6): the tools an agent
// may call, their parameters and descriptions, JSON Schemas to offer them to
// any provider, and the parsing of call arguments into typed values with
// errors that name the tool, the parameter and what was expected. Package
// engine implements the tools (engine/tools*.go); this package holds no state and does no I/O.
//
// Names, parameters and result shapes follow Substrat's catalog so existing
// scripts keep working. The tools:
//
//	send_message(recipient, text)                    -> {"status":"sent","message_id"}
//	broadcast(text)                                  -> {"status":"sent","message_id","recipient_count"}
//	check_inbox(sender?, kind?)                      -> {"messages":[{"from","text","message_id"}],"more"?}
//	spawn_agent(name, instructions, metadata?, provider?, model?)
//	                                                 -> {"status":"accepted","agent_id","name"}
//	inspect_agent(name)                              -> {"state","gated","metadata","recent_messages","pending_messages"}
//	complete(result)                                 -> {"status":"completing","message_id"}
//	poke(agent_name)                                 -> {"status":"poked","agent_id"}
//	remind_me(reason, timeout, every?)               -> {"status":"scheduled","reminder_id"}
//	cancel_reminder(reminder_id)                     -> {"status":"cancelled","reminder_id"}
//	list_children()                                  -> {"children":[{"name","agent_id","state","gated","metadata","pending_messages"}]}
//	set_agent_metadata(agent_name, key, value?)      -> {"status":"updated","agent_name","key","value"}
//	subscribe(agent_name, transition, once?)         -> {"subscription_id","status":"active"}
//	unsubscribe(subscription_id)                     -> {"status":"removed"}
//	gate(agent_name)                                 -> {"status":"gated","agent_name"}
//	ungate(agent_name)                               -> {"status":"ungated","agent_name"}
//	permit_turn(agent_name)                          -> {"status":"permitted","agent_name"}
//	await_input(kind, prompt, timeout)               -> the operator's response (the run suspends)
//
// The result constructors in results.go build exactly these shapes; the
// tool implementations (engine/tools*.go) build their results with them
// and nowhere else. A tool-level failure is a normal result {"error": "<text>"} (ErrorResult),
// never an RPC error.
//
// # Argument rules
//
// Arguments arrive as a JSON object decoded into map[string]any. Parse
// checks them against the catalog:
//
//   - an unknown tool is ErrUnknownTool, listing the known tools;
//   - an argument the tool does not take is ErrUnknownParam (a typo must
//     never silently drop an argument);
//   - a missing required argument, or a required argument given as null, is
//     ErrMissingParam; an optional argument given as null counts as absent
//     (for set_agent_metadata's value, null means delete);
//   - a value of the wrong type or out of range is ErrInvalidParam. Numbers
//     may be float64, any Go integer type or json.Number; durations are
//     seconds (fractions allowed) and must be > 0;
//   - a string longer than ParseOptions.MaxText bytes is ErrTooLong.
//
// Optional string filters and choices given as "" count as absent.
// Every error is a *ParamError (except ErrUnknownTool) whose text reads
// "<tool>: parameter "<name>" ...".
package tools
