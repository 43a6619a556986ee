package token

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/warren-dev/warren/schema"
)

// State is where a token is in its lifecycle.
type State string

// The token states. A token starts Live and moves to exactly one of the
// others, once.
const (
	Live     State = State(schema.TokLive)
	Consumed State = State(schema.TokConsumed)
	Revoked  State = State(schema.TokRevoked)
	Expired  State = State(schema.TokExpired)
)

// Token is the stored form of a resume token. It never holds the secret,
// only its hash.
type Token struct {
	// ID is the public token id, "tok_" followed by 16 lowercase hex digits.
	ID      string `json:"token_id"`
	AgentID string `json:"agent_id"`
	RunID   string `json:"run_id"`
	// SecretHash is the lowercase hex SHA-256 of the 32 secret bytes.
	SecretHash string `json:"secret_hash"`
	// Deadline is when the wait times out; the zero time means never.
	Deadline time.Time `json:"deadline"`
	State    State     `json:"state"`
	// Reason is why the token was revoked (empty otherwise).
	Reason string `json:"reason,omitempty"`
	// Response is the response that consumed the token, so that an identical
	// repeat of the resume is answered without doing anything.
	Response string `json:"response,omitempty"`
}

// Overdue reports whether the token's deadline has passed at now.
func (t Token) Overdue(now time.Time) bool {
	return !t.Deadline.IsZero() && now.After(t.Deadline)
}

const (
	idPrefix    = "tok_"
	idHexLen    = 16
	secretBytes = 32
	// secretLen is the length of the base64url (unpadded) secret.
	secretLen = 43
)

var (
	// ErrRejected is wrapped by every error that refuses a presented token.
	// The daemon maps it to RPC error code 5.
	ErrRejected = errors.New("resume token rejected")
	// ErrMalformed: the presented string is not a token string.
	ErrMalformed = fmt.Errorf("%w: malformed token", ErrRejected)
	// ErrUnknown: no token with that id exists.
	ErrUnknown = fmt.Errorf("%w: unknown token", ErrRejected)
	// ErrWrongSecret: the secret does not match the token's hash.
	ErrWrongSecret = fmt.Errorf("%w: wrong secret", ErrRejected)
	// ErrMismatch: the token belongs to another agent or run.
	ErrMismatch = fmt.Errorf("%w: token does not belong to this agent and run", ErrRejected)
	// ErrConsumed: the token was already used (with a different response).
	ErrConsumed = fmt.Errorf("%w: token already consumed", ErrRejected)
	// ErrRevoked: the token was revoked.
	ErrRevoked = fmt.Errorf("%w: token revoked", ErrRejected)
	// ErrExpired: the token's deadline passed.
	ErrExpired = fmt.Errorf("%w: token expired", ErrRejected)
	// ErrInvalid: an argument to Mint or Add is unusable (a programming or
	// recovery error, not a client rejection).
	ErrInvalid = errors.New("invalid token argument")
)

// Mint creates a live token for the run runID of agent agentID, due at
// deadline (the zero time means no deadline). It returns the stored token and
// the client string "<token_id>.<secret>", which is the only place the secret
// ever appears.
func Mint(agentID, runID string, deadline time.Time) (Token, string, error) {
	if agentID == "" || runID == "" {
		return Token{}, "", fmt.Errorf("%w: mint needs an agent id and a run id (got agent %q, run %q)", ErrInvalid, agentID, runID)
	}
	var idb [idHexLen / 2]byte
	var sec [secretBytes]byte
	if _, err := rand.Read(idb[:]); err != nil {
		return Token{}, "", fmt.Errorf("mint token: reading random id: %w", err)
	}
	if _, err := rand.Read(sec[:]); err != nil {
		return Token{}, "", fmt.Errorf("mint token: reading random secret: %w", err)
	}
	id := idPrefix + hex.EncodeToString(idb[:])
	secret := base64.RawURLEncoding.EncodeToString(sec[:])
	sum := sha256.Sum256(sec[:])
	t := Token{
		ID:         id,
		AgentID:    agentID,
		RunID:      runID,
		SecretHash: hex.EncodeToString(sum[:]),
		Deadline:   deadline,
		State:      Live,
	}
	return t, Format(id, secret), nil
}

// Format joins a token id and its secret into the client string.
func Format(id, secret string) string {
	return id + "." + secret
}

// Parse splits a client string into the token id and the secret, checking
// both parts' shapes. Errors wrap ErrMalformed (and so ErrRejected) and never
// contain the secret.
func Parse(s string) (id, secret string, err error) {
	const want = "expected tok_<16 hex digits>.<43 base64url characters>"
	dot := strings.IndexByte(s, '.')
	if dot < 0 {
		return "", "", fmt.Errorf("%w: no '.' between token id and secret (%d characters given); %s", ErrMalformed, len(s), want)
	}
	id, secret = s[:dot], s[dot+1:]
	if err := CheckID(id); err != nil {
		return "", "", err
	}
	if len(secret) != secretLen {
		return "", "", fmt.Errorf("%w: secret part has %d characters; %s", ErrMalformed, len(secret), want)
	}
	b, derr := base64.RawURLEncoding.DecodeString(secret)
	if derr != nil || len(b) != secretBytes {
		return "", "", fmt.Errorf("%w: secret part is not base64url of %d bytes; %s", ErrMalformed, secretBytes, want)
	}
	return id, secret, nil
}

// CheckID reports whether id has the shape of a token id
// ("tok_" + 16 lowercase hex digits). The error wraps ErrMalformed.
func CheckID(id string) error {
	if len(id) != len(idPrefix)+idHexLen || !strings.HasPrefix(id, idPrefix) {
		return fmt.Errorf("%w: token id must be %q followed by %d lowercase hex digits (got %d characters)", ErrMalformed, idPrefix, idHexLen, len(id))
	}
	for _, c := range id[len(idPrefix):] {
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return fmt.Errorf("%w: token id must be %q followed by %d lowercase hex digits (found %q)", ErrMalformed, idPrefix, idHexLen, c)
		}
	}
	return nil
}

// HashSecret returns the hex SHA-256 of a secret in its base64url client
// form, as stored in Token.SecretHash.
func HashSecret(secret string) (string, error) {
	b, err := base64.RawURLEncoding.DecodeString(secret)
	if err != nil || len(b) != secretBytes {
		return "", fmt.Errorf("%w: secret is not base64url of %d bytes", ErrMalformed, secretBytes)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

// validate checks a token given to Service.Add.
func (t Token) validate() error {
	if err := CheckID(t.ID); err != nil {
		return fmt.Errorf("%w: %w", ErrInvalid, err)
	}
	if t.AgentID == "" || t.RunID == "" {
		return fmt.Errorf("%w: token %s needs an agent id and a run id", ErrInvalid, t.ID)
	}
	h, err := hex.DecodeString(t.SecretHash)
	if err != nil || len(h) != sha256.Size {
		return fmt.Errorf("%w: token %s: secret hash must be %d hex digits", ErrInvalid, t.ID, 2*sha256.Size)
	}
	switch t.State {
	case Live, Consumed, Revoked, Expired:
	default:
		return fmt.Errorf("%w: token %s: unknown state %q (want live, consumed, revoked or expired)", ErrInvalid, t.ID, t.State)
	}
	return nil
}
