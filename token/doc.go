// Package token implements warren's resume tokens: the single-use
// credentials that resume a run waiting for external input (SPEC 4).
//
// A token has a public id and a secret. Only the hex SHA-256 of the secret is
// kept (Token.SecretHash); the secret itself exists once, in the string handed
// to the client that started the run. The package does no I/O: the daemon
// persists every transition as an event, through the commit callbacks that
// Service calls while it holds the token's lock.
//
// # Client string format
//
//	tok_<16 lowercase hex>.<43 base64url characters, no padding>
//
// for example
//
//	tok_3f9a0c1d2e4b5a69.q8Vd0w1n2nNwY5lM3rS9t0GQx4b8pHk1cJ7uA6zE2fY
//
// The part before the dot is the token id (what agent.inspect and the log
// show); the part after it encodes the 32 random bytes of the secret. The
// stored hash is the hex SHA-256 of those 32 bytes. Format builds the string
// and Parse takes it apart; Parse never echoes the secret in its errors.
//
// # Lifecycle
//
// A token is minted live. It leaves the live state exactly once:
//
//   - consumed by Service.Consume (agent.resume), which records the response
//     so an identical repeat is answered idempotently;
//   - revoked by Service.Revoke (a new user message, a cancellation);
//   - expired by Service.Expire (the deadline sweep).
//
// Every rejection returned by Consume wraps ErrRejected (RPC error code 5)
// and one of the more specific sentinels (ErrMalformed, ErrUnknown,
// ErrWrongSecret, ErrMismatch, ErrConsumed, ErrRevoked, ErrExpired).
package token
