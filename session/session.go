package session

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// Errors callers test with errors.Is.
var (
	// ErrInvalid: session.json (or a Session about to be saved) is malformed.
	ErrInvalid = errors.New("invalid session")
	// ErrNotExist: the agent has no session.json.
	ErrNotExist = errors.New("session does not exist")
)

// State is a persisted session state (seed 003).
type State string

// Persisted states.
const (
	StateIdle       State = "idle"
	StateRunning    State = "running"
	StateSuspended  State = "suspended"
	StateTerminated State = "terminated"
)

// Valid reports whether s is one of the persisted states.
func (s State) Valid() bool {
	switch s {
	case StateIdle, StateRunning, StateSuspended, StateTerminated:
		return true
	}
	return false
}

// Session is the content of session.json.
type Session struct {
	ID       string
	State    State
	Provider string
	Model    string
	// Handle is the provider's native resume handle (may be empty).
	Handle string
	// ProviderState is the provider's state blob saved on eviction; it is
	// base64 in JSON and "" when empty.
	ProviderState []byte
	CreatedAt     time.Time
	UpdatedAt     time.Time
	// Run is the current (latest) run, nil when there is none.
	Run *Run
}

// Run is the session's current run.
type Run struct {
	RunID string `json:"run_id"`
	// BootID is the boot the run started, or was last resumed, under.
	BootID    string    `json:"boot_id"`
	StartedAt time.Time `json:"started_at"`
	// Wait describes the pending external wait; nil when not waiting.
	Wait *Wait `json:"wait"`
}

// Wait is a run's pending await_input.
type Wait struct {
	Kind    string `json:"kind"`
	Prompt  string `json:"prompt"`
	TokenID string `json:"token_id"`
	// SecretHash is the hash of the token secret; the secret is never stored.
	SecretHash string `json:"secret_hash"`
	// Deadline is when the wait expires; the zero time means never.
	Deadline time.Time `json:"deadline"`
	// CallID is the await_input tool call the response answers.
	CallID string `json:"call_id"`
}

// wire is the JSON shape of a Session.
type wire struct {
	ID            string    `json:"id"`
	State         State     `json:"state"`
	Provider      string    `json:"provider"`
	Model         string    `json:"model"`
	Handle        string    `json:"handle"`
	ProviderState string    `json:"provider_state"`
	CreatedAt     time.Time `json:"created_at"`
	UpdatedAt     time.Time `json:"updated_at"`
	Run           *Run      `json:"run"`
}

// MarshalJSON encodes the session as session.json content.
func (s Session) MarshalJSON() ([]byte, error) {
	w := wire{
		ID: s.ID, State: s.State, Provider: s.Provider, Model: s.Model, Handle: s.Handle,
		CreatedAt: s.CreatedAt, UpdatedAt: s.UpdatedAt, Run: s.Run,
	}
	if len(s.ProviderState) > 0 {
		w.ProviderState = base64.StdEncoding.EncodeToString(s.ProviderState)
	}
	return json.Marshal(w)
}

// FieldError says which field of a session was invalid. It wraps ErrInvalid.
type FieldError struct {
	Field  string
	Reason string
	Err    error // underlying cause, may be nil
}

func (e *FieldError) Error() string {
	msg := fmt.Sprintf("field %q: %s", e.Field, e.Reason)
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *FieldError) Is(target error) bool { return target == ErrInvalid }

// Unwrap returns the underlying cause.
func (e *FieldError) Unwrap() error { return e.Err }

// UnmarshalJSON decodes session.json content field by field, so that an
// error names the field (e.g. "run.wait.deadline"). It checks the syntax,
// the types, the state and the provider_state encoding, not the id (see
// Validate). Unknown fields are ignored.
func (s *Session) UnmarshalJSON(data []byte) error {
	d, err := objectFields("", data)
	if err != nil {
		return err
	}
	var out Session
	var blob string
	if err := d.decode("id", &out.ID, "state", &out.State, "provider", &out.Provider, "model", &out.Model,
		"handle", &out.Handle, "provider_state", &blob, "created_at", &out.CreatedAt, "updated_at", &out.UpdatedAt); err != nil {
		return err
	}
	if blob != "" {
		b, err := base64.StdEncoding.DecodeString(blob)
		if err != nil {
			return &FieldError{Field: "provider_state", Reason: "not standard base64", Err: err}
		}
		out.ProviderState = b
	}
	if !out.State.Valid() {
		return &FieldError{Field: "state", Reason: fmt.Sprintf("%q is not one of idle, running, suspended, terminated", string(out.State))}
	}
	if raw, ok := d.fields["run"]; ok && !isNull(raw) {
		rd, err := objectFields("run.", raw)
		if err != nil {
			return err
		}
		run := &Run{}
		if err := rd.decode("run_id", &run.RunID, "boot_id", &run.BootID, "started_at", &run.StartedAt); err != nil {
			return err
		}
		if wraw, ok := rd.fields["wait"]; ok && !isNull(wraw) {
			wd, err := objectFields("run.wait.", wraw)
			if err != nil {
				return err
			}
			w := &Wait{}
			if err := wd.decode("kind", &w.Kind, "prompt", &w.Prompt, "token_id", &w.TokenID,
				"secret_hash", &w.SecretHash, "deadline", &w.Deadline, "call_id", &w.CallID); err != nil {
				return err
			}
			run.Wait = w
		}
		out.Run = run
	}
	*s = out
	return nil
}

// fields is a decoded JSON object awaiting per-field decoding.
type fields struct {
	prefix string
	fields map[string]json.RawMessage
}

func objectFields(prefix string, data []byte) (fields, error) {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(data, &m); err != nil || m == nil {
		name := strings.TrimSuffix(prefix, ".")
		if name == "" {
			name = "(document)"
		}
		if err == nil {
			err = errors.New("null")
		}
		return fields{}, &FieldError{Field: name, Reason: "not a JSON object", Err: err}
	}
	return fields{prefix: prefix, fields: m}, nil
}

// decode takes name, destination pairs.
func (f fields) decode(pairs ...any) error {
	for i := 0; i+1 < len(pairs); i += 2 {
		name := pairs[i].(string)
		raw, ok := f.fields[name]
		if !ok || isNull(raw) {
			continue
		}
		if err := json.Unmarshal(raw, pairs[i+1]); err != nil {
			return &FieldError{Field: f.prefix + name, Reason: "wrong type or format", Err: err}
		}
	}
	return nil
}

func isNull(raw json.RawMessage) bool {
	return string(bytes.TrimSpace(raw)) == "null"
}

// ValidID reports whether id is a session/agent id: 32 lowercase hex
// characters.
func ValidID(id string) bool {
	if len(id) != 32 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Validate checks what Save and Load require: a well-formed id, a known
// state, and a run with a run id. Errors wrap ErrInvalid and name the field.
func (s *Session) Validate() error {
	if s == nil {
		return &FieldError{Field: "(document)", Reason: "no session"}
	}
	if !ValidID(s.ID) {
		return &FieldError{Field: "id", Reason: fmt.Sprintf("%q is not 32 lowercase hex characters", s.ID)}
	}
	if !s.State.Valid() {
		return &FieldError{Field: "state", Reason: fmt.Sprintf("%q is not one of idle, running, suspended, terminated", string(s.State))}
	}
	if s.Run != nil && s.Run.RunID == "" {
		return &FieldError{Field: "run.run_id", Reason: "empty in a present run"}
	}
	return nil
}

// Clone returns a deep copy.
func (s *Session) Clone() *Session {
	if s == nil {
		return nil
	}
	c := *s
	if s.ProviderState != nil {
		c.ProviderState = append([]byte(nil), s.ProviderState...)
	}
	if s.Run != nil {
		r := *s.Run
		if s.Run.Wait != nil {
			w := *s.Run.Wait
			r.Wait = &w
		}
		c.Run = &r
	}
	return &c
}
