package remote

import (
	"crypto/ecdh"
	"crypto/ed25519"
	"crypto/hkdf"
	"crypto/hmac"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"fmt"
	"math/big"
	"slices"
)

// A daemon and each of its workers share a request key: the X25519
// agreement of the daemon's key with the worker's, the two ed25519 keys
// read as their X25519 twins (RFC 7748's map, as libsodium's
// crypto_sign_ed25519_*_to_curve25519 does), through HKDF-SHA256 with
// both public keys in its info. Only the daemon and that worker can make
// it, so a request that carries its HMAC comes from the daemon, as an
// ed25519 signature would say, at a few microseconds where signing and
// verifying cost about 60 (doc.go, Authority).

// DaemonRequestKey is the key the daemon (its private key) shares with
// the worker whose public key is worker.
func DaemonRequestKey(daemon ed25519.PrivateKey, worker ed25519.PublicKey) ([]byte, error) {
	return requestKey(daemon, worker, daemon.Public().(ed25519.PublicKey), worker)
}

// WorkerRequestKey is the key a worker (its private key) shares with the
// daemon whose public key is daemon.
func WorkerRequestKey(worker ed25519.PrivateKey, daemon ed25519.PublicKey) ([]byte, error) {
	return requestKey(worker, daemon, daemon, worker.Public().(ed25519.PublicKey))
}

// requestInfo is HKDF's info: it names the use, then the daemon's and
// the worker's public keys.
const requestInfo = "warren worker requests v1"

func requestKey(own ed25519.PrivateKey, peer, daemon, worker ed25519.PublicKey) ([]byte, error) {
	if len(own) != ed25519.PrivateKeySize || len(peer) != ed25519.PublicKeySize {
		return nil, errors.New("a request key needs a whole ed25519 key pair's halves")
	}
	h := sha512.Sum512(own.Seed())
	priv, err := ecdh.X25519().NewPrivateKey(h[:32]) // clamped by X25519 itself
	if err != nil {
		return nil, err
	}
	u, err := montgomery(peer)
	if err != nil {
		return nil, err
	}
	pub, err := ecdh.X25519().NewPublicKey(u)
	if err != nil {
		return nil, err
	}
	shared, err := priv.ECDH(pub)
	if err != nil { // a low-order point: not a worker's or a daemon's key
		return nil, fmt.Errorf("the peer's key cannot agree on a request key: %w", err)
	}
	return hkdf.Key(sha256.New, shared, nil, requestInfo+string(daemon)+string(worker), sha256.Size)
}

// curveP is 2^255 - 19, the field both curves are over.
var curveP = new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 255), big.NewInt(19))

// montgomery is the X25519 public key of an ed25519 public key: u =
// (1 + y) / (1 - y) mod p, where y is the Edwards point's coordinate
// (little-endian, its top bit the sign of x, which u does not need).
func montgomery(pub ed25519.PublicKey) ([]byte, error) {
	le := slices.Clone([]byte(pub))
	le[31] &= 0x7f
	slices.Reverse(le)
	y := new(big.Int).SetBytes(le)
	den := new(big.Int).Sub(big.NewInt(1), y)
	den.Mod(den, curveP)
	if y.Cmp(curveP) >= 0 || den.Sign() == 0 {
		return nil, errors.New("not an ed25519 public key")
	}
	u := new(big.Int).Add(big.NewInt(1), y)
	u.Mul(u, den.ModInverse(den, curveP))
	u.Mod(u, curveP)
	out := make([]byte, 32)
	u.FillBytes(out)
	slices.Reverse(out)
	return out, nil
}

// requestMAC is HMAC-SHA256 of a request's bytes under key.
func requestMAC(key, msg []byte) []byte {
	m := hmac.New(sha256.New, key)
	m.Write(msg)
	return m.Sum(nil)
}
