// Package session holds the session.json model and store and the single
// status derivation of SPEC section 4. Every read path (agent.list,
// agent.inspect, recovery, the CLI) derives status through Derive.
//
// # session.json
//
// One file per agent, <agents>/<id>/session.json, rewritten atomically
// (atomicfile.Write, mode 0600) on every state change. It is a snapshot for
// fast start-up; the agent's event log stays the source of truth. Fields:
//
//	{
//	  "id": "<32 lowercase hex>",
//	  "state": "idle" | "running" | "suspended" | "terminated",
//	  "provider": "scripted",
//	  "model": "",
//	  "handle": "<provider's native resume handle, may be empty>",
//	  "provider_state": "<base64 of the provider blob, or \"\">",
//	  "created_at": "<RFC 3339>",
//	  "updated_at": "<RFC 3339>",
//	  "run": null | {
//	    "run_id": "<hex>",
//	    "boot_id": "<boot the run started (or was last resumed) under>",
//	    "started_at": "<RFC 3339>",
//	    "wait": null | {
//	      "kind": "...", "prompt": "...", "token_id": "...",
//	      "secret_hash": "<hash of the token secret, never the secret>",
//	      "deadline": "<RFC 3339; zero time = no deadline>",
//	      "call_id": "<the await_input tool call>"
//	    }
//	  }
//	}
//
// Readers ignore unknown fields. Load rejects (ErrInvalid, naming the file
// and the field) bad JSON, a missing or unknown state, an id that is not the
// directory's, a malformed id and provider_state that is not base64; a
// missing file is ErrNotExist.
//
// Persisted states (seed 003): idle, running, suspended (waiting for an
// external response) and terminated. Errors are data, not a state.
//
// # Status derivation
//
// Derive(s, f, bootID, now) computes the status from the snapshot s (may be
// nil) and the Facts f read from the log. The log wins wherever it speaks;
// the snapshot only fills in what the facts leave empty for the same run
// (the run's boot id and wait deadline) and contributes state terminated.
//
// Definitions, for the latest run of the log (f.RunID):
//
//	open        = f.RunID != "" && !f.RunEnded
//	boot        = f.RunBootID, else s.Run.BootID if s.Run is the same run
//	earlierBoot = boot == "" || boot != bootID || f.EarlierClaim
//	              (a run this process started always carries its boot id;
//	              on a cluster store a run is also from an earlier boot
//	              when the agent was claimed again since its turn began:
//	              "under an earlier claim", exactly one run.interrupted
//	              whoever recovers it, since only the claim's owner can
//	              append; the local store writes no claims)
//	pending     = f.Interrupted && !f.Resumed    (an interruption not yet
//	              cleared by run.resumed)
//	restartInt  = pending && f.InterruptReason != "wait_timeout"
//	              (process_restart, and any unknown reason)
//	timeoutInt  = pending && f.InterruptReason == "wait_timeout"
//	deadline    = f.WaitDeadline, else s.Run.Wait.Deadline for the same run
//	overdue     = deadline is set && !now.Before(deadline)
//
// Rules, first match wins:
//
//  1. corrupt              f.Corrupt (the log has damage a crash cannot
//     leave, or cannot be opened; nothing else can be trusted; run
//     `warren repair`)
//  2. terminated           f.Terminated || s.State == terminated
//  3. interrupted_startup  open && (restartInt || (earlierBoot && !f.Waiting))
//  4. interrupted_waiting  open && (timeoutInt || (f.Waiting &&
//     (f.Token != live || overdue)))
//  5. suspended            open && f.Waiting (token live, not overdue)
//  6. running              open
//  7. idle                 otherwise (no run, or the latest run ended)
//
// Rules 3 to 7 are SPEC 4's precedence (interrupted_startup >
// interrupted_waiting > suspended > running > idle). SPEC 4 lists terminated
// after idle; we rank it (and corrupt) above the run rules because a
// terminated agent cannot be resumed or run again whatever its last run
// looks like, and recovery does not mark runs of terminated agents
// interrupted. A waiting run with a live token that began under an earlier
// boot is suspended, not interrupted_startup: a wait survives a restart
// (SPEC 4), so recovery marks only runs that were not waiting. A waiting run
// whose token is missing (TokenNone), consumed, revoked or expired cannot be
// resumed with it and is interrupted_waiting (seed 000).
package session
