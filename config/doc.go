// Package config parses, validates and watches warren's configuration file,
// <home>/config.json (SPEC 10).
//
// # File format
//
// A JSON object; every key is optional and unknown keys are rejected (they
// are almost always typos). The defaults are shown:
//
//	{
//	  "pools": {"default": 4, "scripted": 32},
//	  "provider_pools": {"scripted": "scripted"},
//	  "max_retries": 3,
//	  "retry_base_delay_ms": 500,
//	  "turn_timeout_s": 600,
//	  "limits": {"message_bytes": 1048576, "inbox_messages": 10000, "inbox_bytes": 268435456,
//	             "pending_messages": 200000, "pending_bytes": 4294967296,
//	             "turn_transcript_bytes": 33554432},
//	  "providers": {
//	    "openai": {"base_url": "https://api.openai.com/v1", "api_key_env": "OPENAI_API_KEY", "organization": "org-1"},
//	    "scripted": {"env_pass": ["GOPATH", "MYTOOL_*"], "env": {"MODE": "ci"}}
//	  }
//	}
//
// The keys:
//
//   - pools: pool name -> live sessions, a whole number 1..1024. Entries are
//     merged over the default pools ("default" always exists).
//   - provider_pools: provider name -> pool name, merged over the defaults;
//     every named pool must exist. Providers not listed use "default".
//   - max_retries: 0..20. retry_base_delay_ms: 0..60000.
//     turn_timeout_s: 1..604800.
//   - limits: what clients and agents can make the daemon hold (Limits):
//     message_bytes 1..8 MiB bounds a message, a tool text, an agent's
//     instructions and its metadata (keys and values together), and what a
//     provider may answer: the text of one model step (a turn's response)
//     and one tool call's arguments;
//     inbox_messages and inbox_bytes bound one inbox's pending messages,
//     pending_messages and pending_bytes all of them together;
//     turn_transcript_bytes 1..1 GiB bounds the messages of one turn in
//     progress of an HTTP provider (text, tool calls, tool results), which
//     every model step sends again. Each key is optional; unknown keys are
//     rejected.
//   - providers: provider name -> settings. base_url must be an http(s) URL
//     without user info; api_key_env is the NAME of the environment variable
//     holding the API key. Other keys are kept as free-form Settings. A
//     setting whose name says it holds a credential (api_key, key, token,
//     secret, password, authorization, anything ending in _key, _token,
//     _secret or _password, at any depth) is rejected: keys never go in the
//     file.
//   - providers.NAME.env_pass: names of the daemon's environment variables
//     (or prefixes ending in '*', never a bare "*") that the entry's agent
//     processes get besides the default allow-list (PATH, HOME, USER,
//     LOGNAME, SHELL, LANG, LANGUAGE, LC_*, TERM, TZ, TMPDIR). Nothing else
//     of the daemon's environment reaches them.
//   - providers.NAME.env: fixed, non-secret variables for the entry's agent
//     processes. A name that says it holds a credential, a value that
//     starts like a well-known key (sk-, ghp_, AKIA, ...) and the names the
//     daemon sets itself (WARREN_SOCKET, WARREN_AGENT_ID,
//     WARREN_AGENT_CREDENTIAL, WARREN_AGENT_PROCESS) are refused.
//   - providers.NAME.worker: {"labels": {"gpu": "1"}}, the labels a remote
//     worker (`warren worker --labels`) must carry to run the entry's
//     sessions; keys and values are 1-64 letters, digits, '_', '.', '-'.
//     Without it any worker serving the entry's pool may.
//   - providers.NAME of type acp (an agent CLI over the Agent Client
//     Protocol): command, the agent's argv (a non-empty list of strings,
//     required unless the name is a built-in acp entry; an argument that
//     starts like a well-known key, alone or after '=', is refused); mode,
//     the session mode to set; permissions, the policy for the agent's
//     permission requests (allow, deny or ask; default ask); timeout_s
//     bounds one turn; env and env_pass as above. command, mode and
//     permissions are refused on entries of other types.
//   - notify: a list of notification sinks (SPEC 14, package notify):
//     {"type": "command", "argv": [...]} or {"type": "webhook", "url":
//     "https://...", "headers": {...}, "secret_env": "NAME",
//     "secret_header": "Authorization"}, each with an optional "name" (the
//     default: the type and a hash of its argv or URL). A header value that
//     looks like a key, an Authorization header and a URL with user info
//     are refused: secrets come from the variable secret_env names.
//   - http: {"listen": "127.0.0.1:7777", "tls_cert", "tls_key",
//     "plain_http"}: the web console (SPEC 14); an address other than
//     loopback needs TLS or plain_http (HTTP.Check).
//   - prices: "provider/model" or "model" -> {"input_per_mtok",
//     "output_per_mtok", "cache_read_per_mtok", "cache_write_per_mtok"},
//     dollars per million tokens, every one required (SPEC 13).
//
// Names of pools and providers use letters, digits, '_', '-' and '.', at
// most 64 characters. The file may be at most 1 MiB. An empty file means the
// defaults. Errors wrap ErrInvalid and name the key, the value found and the
// value expected.
//
// # Watching
//
// Watch watches the file's directory with fsnotify (editors replace files by
// rename), debounces, reloads, and passes each new valid config to its
// callback; an invalid file is reported and the previous config stays in
// force.
package config
