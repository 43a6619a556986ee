package remote

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/warren-dev/warren/atomicfile"
	"github.com/warren-dev/warren/faultfs"
)

// KeysFile is the file in a daemon's home that holds its workers' public
// keys (doc.go, Authority).
const KeysFile = "workers.json"

// TokenPrefix starts every worker token.
const TokenPrefix = "wwt1_"

// keysDoc is KeysFile's format: {"daemon": "<seed>", "workers": {"<id>":
// "<public key>"}}, base64url without padding: the daemon's ed25519 seed
// (its request keys with the workers come from it) and each worker's
// 32-byte public key.
type keysDoc struct {
	Daemon  string            `json:"daemon,omitempty"`
	Workers map[string]string `json:"workers"`
}

// Keys is what KeysFile holds.
type Keys struct {
	// Daemon authenticates the daemon's requests to workers (its request
	// keys come from it) and signs it in to its NATS servers (nil before
	// the daemon's first start with an embedded server or the first
	// token).
	Daemon ed25519.PrivateKey
	// Workers is each worker's public key, by id.
	Workers map[string]ed25519.PublicKey
}

// maxKeysFile bounds KeysFile's size.
const maxKeysFile = 1 << 20

// LoadKeys reads a keys file (empty when it does not exist).
func LoadKeys(fsys faultfs.FS, path string) (Keys, error) {
	out := Keys{Workers: map[string]ed25519.PublicKey{}}
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return out, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxKeysFile+1))
	if err != nil {
		return out, fmt.Errorf("reading %s: %w", path, err)
	}
	if len(data) > maxKeysFile {
		return out, fmt.Errorf("%s is larger than %d bytes", path, maxKeysFile)
	}
	var doc keysDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		return out, fmt.Errorf("%s is not a workers key file (%v): remove it and issue the tokens again with `warren worker token NAME`", path, err)
	}
	if doc.Daemon != "" {
		seed, err := base64.RawURLEncoding.DecodeString(doc.Daemon)
		if err != nil || len(seed) != ed25519.SeedSize {
			return out, fmt.Errorf("%s: the daemon's key is damaged: copy the file from another node of the cluster, or remove it and issue the tokens again (every node then needs the new file)", path)
		}
		out.Daemon = ed25519.NewKeyFromSeed(seed)
	}
	for id, k := range doc.Workers {
		raw, err := base64.RawURLEncoding.DecodeString(k)
		if err != nil || len(raw) != ed25519.PublicKeySize || CheckID(id) != nil {
			return out, fmt.Errorf("%s: worker %q has a bad key: issue its token again with `warren worker token %s`", path, id, id)
		}
		out.Workers[id] = ed25519.PublicKey(raw)
	}
	return out, nil
}

// DaemonKey returns the daemon's key from the keys file at path, and
// makes it (writing the file, made true) when there is none yet: a daemon
// that runs its own NATS server signs in to it with this key
// (natsembed.Users), from its first start, so that issuing the first
// token changes nothing for a running daemon.
func DaemonKey(fsys faultfs.FS, path string) (key ed25519.PrivateKey, made bool, err error) {
	keys, err := LoadKeys(fsys, path)
	if err != nil || keys.Daemon != nil {
		return keys.Daemon, false, err
	}
	unlock, err := lockKeys(fsys, path)
	if err != nil {
		return nil, false, err
	}
	defer unlock()
	if keys, err = LoadKeys(fsys, path); err != nil || keys.Daemon != nil { // made meanwhile
		return keys.Daemon, false, err
	}
	if _, keys.Daemon, err = ed25519.GenerateKey(rand.Reader); err != nil {
		return nil, false, err
	}
	if err := writeKeys(fsys, path, keys); err != nil {
		return nil, false, err
	}
	return keys.Daemon, true, nil
}

// IssueToken makes a key pair for worker id, records its public key in
// the keys file at path (replacing an earlier one: the old token stops
// working; the daemon's own key is made with the first token unless the
// daemon made it at its start) and returns the token, which only the
// worker keeps: its private key and the daemon's public key, which the
// worker checks every request with.
func IssueToken(fsys faultfs.FS, path, id string) (string, error) {
	if err := CheckID(id); err != nil {
		return "", err
	}
	unlock, err := lockKeys(fsys, path)
	if err != nil {
		return "", err
	}
	defer unlock()
	keys, err := LoadKeys(fsys, path)
	if err != nil {
		return "", err
	}
	if keys.Daemon == nil {
		if _, keys.Daemon, err = ed25519.GenerateKey(rand.Reader); err != nil {
			return "", err
		}
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", err
	}
	keys.Workers[id] = pub
	if err := writeKeys(fsys, path, keys); err != nil {
		return "", err
	}
	daemonPub := keys.Daemon.Public().(ed25519.PublicKey)
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(append(priv.Seed(), daemonPub...)), nil
}

// lockKeys takes the exclusive flock on <path>.lock, which every change
// of the keys file holds: a token issued while the daemon makes its key
// at its first start, or two tokens issued at once, would otherwise each
// write the file as it read it, and one would be lost. The lock is a
// kernel object, taken on the OS filesystem only (the crashable memory
// one of the tests has no processes to share it with).
func lockKeys(fsys faultfs.FS, path string) (unlock func(), err error) {
	if _, ok := fsys.(faultfs.OS); !ok {
		return func() {}, nil
	}
	lock := path + ".lock"
	f, err := os.OpenFile(lock, os.O_CREATE|os.O_RDWR|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening the lock of the workers' keys %s: %w", lock, err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("locking the workers' keys %s: %w", lock, err)
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); _ = f.Close() }, nil
}

// writeKeys replaces the keys file at path with keys.
func writeKeys(fsys faultfs.FS, path string, keys Keys) error {
	doc := keysDoc{Daemon: base64.RawURLEncoding.EncodeToString(keys.Daemon.Seed()), Workers: map[string]string{}}
	for k, v := range keys.Workers {
		doc.Workers[k] = base64.RawURLEncoding.EncodeToString(v)
	}
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return err
	}
	if err := atomicfile.Write(fsys, path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}

// ParseToken reads a worker token: the worker's private key and the
// daemon's public key.
func ParseToken(token string) (ed25519.PrivateKey, ed25519.PublicKey, error) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(token), TokenPrefix)
	raw, err := base64.RawURLEncoding.DecodeString(rest)
	if !ok || err != nil || len(raw) != ed25519.SeedSize+ed25519.PublicKeySize {
		return nil, nil, errors.New("not a worker token (it starts with " + TokenPrefix + "; make one with `warren worker token NAME` on the daemon's machine)")
	}
	return ed25519.NewKeyFromSeed(raw[:ed25519.SeedSize]), ed25519.PublicKey(raw[ed25519.SeedSize:]), nil
}

// AuthedRequest is what the daemon sends a worker: the request's JSON,
// the worker it is for and when it was made (Unix milliseconds), and the
// HMAC-SHA256 of "<worker>\n<at>\n<req>" under the request key the
// daemon and that worker share (DaemonRequestKey, WorkerRequestKey).
type AuthedRequest struct {
	Req    json.RawMessage `json:"req"`
	Worker string          `json:"worker"`
	At     int64           `json:"at"`
	MAC    []byte          `json:"mac"`
}

// RequestWindow is how far a request's time may be from the worker's
// clock.
const RequestWindow = 2 * time.Minute

func requestBytes(worker string, at int64, req []byte) []byte {
	return append(fmt.Appendf(nil, "%s\n%d\n", worker, at), req...)
}

// AuthRequest wraps req (compact JSON, as encoding/json makes it) for
// worker at time now, authenticated with the request key the daemon
// shares with it. It writes the AuthedRequest's JSON itself: encoding/json
// would scan req again (most of a request's cost at the daemon).
func AuthRequest(key []byte, worker string, now time.Time, req []byte) ([]byte, error) {
	if len(req) == 0 {
		return nil, errors.New("an empty request")
	}
	at := now.UnixMilli()
	mac := requestMAC(key, requestBytes(worker, at, req))
	name, err := json.Marshal(worker)
	if err != nil {
		return nil, err
	}
	b := make([]byte, 0, len(req)+len(name)+96)
	b = append(append(append(b, `{"req":`...), req...), `,"worker":`...)
	b = append(append(b, name...), `,"at":`...)
	b = append(strconv.AppendInt(b, at, 10), `,"mac":"`...)
	b = append(base64.StdEncoding.AppendEncode(b, mac), `"}`...)
	return b, nil
}

// CheckRequest checks a request for worker with the request key it
// shares with its daemon, at time now, and returns the request's JSON.
func CheckRequest(key []byte, worker string, now time.Time, data []byte) (json.RawMessage, error) {
	var ar AuthedRequest
	if err := json.Unmarshal(data, &ar); err != nil || len(ar.Req) == 0 {
		return nil, errors.New("the request is not authenticated (an old daemon, or not a daemon)")
	}
	if ar.Worker != worker {
		return nil, fmt.Errorf("the request is for worker %q", ar.Worker)
	}
	if d := now.Sub(time.UnixMilli(ar.At)); d > RequestWindow || d < -RequestWindow {
		return nil, fmt.Errorf("the request was made %s from this worker's clock (more than %s: a replay, or clocks apart)", d.Round(time.Second), RequestWindow)
	}
	if !hmac.Equal(ar.MAC, requestMAC(key, requestBytes(ar.Worker, ar.At, ar.Req))) {
		return nil, errors.New("the request is not from the daemon that issued this worker's token")
	}
	return ar.Req, nil
}

// Signed is what a worker publishes each beat: its registration's JSON
// and the ed25519 signature of exactly those bytes.
type Signed struct {
	Reg json.RawMessage `json:"reg"`
	Sig []byte          `json:"sig"`
}

// Sign makes a worker's signed beat.
func Sign(key ed25519.PrivateKey, reg Registration) ([]byte, error) {
	body, err := json.Marshal(reg)
	if err != nil {
		return nil, err
	}
	return json.Marshal(Signed{Reg: body, Sig: ed25519.Sign(key, body)})
}
