package remote

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/warren-dev/warren/atomicfile"
	"github.com/warren-dev/warren/faultfs"
)

// KeysFile is the file in a daemon's home that holds its workers' public
// keys (doc.go, Authority).
const KeysFile = "workers.json"

// TokenPrefix starts every worker token.
const TokenPrefix = "wwt1_"

// keysDoc is KeysFile's format: {"workers": {"<id>": "<public key>"}},
// each key base64url (no padding) of the 32-byte ed25519 public key.
type keysDoc struct {
	Workers map[string]string `json:"workers"`
}

// maxKeysFile bounds KeysFile's size.
const maxKeysFile = 1 << 20

// LoadKeys reads a keys file: worker id to public key (none when the
// file does not exist).
func LoadKeys(fsys faultfs.FS, path string) (map[string]ed25519.PublicKey, error) {
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return map[string]ed25519.PublicKey{}, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxKeysFile+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", path, err)
	}
	if len(data) > maxKeysFile {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxKeysFile)
	}
	var doc keysDoc
	if err := json.Unmarshal(data, &doc); err != nil {
		return nil, fmt.Errorf("%s is not a workers key file (%v): remove it and issue the tokens again with `warren worker token NAME`", path, err)
	}
	out := make(map[string]ed25519.PublicKey, len(doc.Workers))
	for id, k := range doc.Workers {
		raw, err := base64.RawURLEncoding.DecodeString(k)
		if err != nil || len(raw) != ed25519.PublicKeySize || CheckID(id) != nil {
			return nil, fmt.Errorf("%s: worker %q has a bad key: issue its token again with `warren worker token %s`", path, id, id)
		}
		out[id] = ed25519.PublicKey(raw)
	}
	return out, nil
}

// IssueToken makes a key pair for worker id, records its public key in
// the keys file at path (replacing an earlier one: the old token stops
// working) and returns the token, which only the worker keeps.
func IssueToken(fsys faultfs.FS, path, id string) (string, error) {
	if err := CheckID(id); err != nil {
		return "", err
	}
	keys, err := LoadKeys(fsys, path)
	if err != nil {
		return "", err
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", err
	}
	doc := keysDoc{Workers: map[string]string{}}
	for k, v := range keys {
		doc.Workers[k] = base64.RawURLEncoding.EncodeToString(v)
	}
	doc.Workers[id] = base64.RawURLEncoding.EncodeToString(pub)
	data, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		return "", err
	}
	if err := atomicfile.Write(fsys, path, append(data, '\n'), 0o600); err != nil {
		return "", fmt.Errorf("writing %s: %w", path, err)
	}
	return TokenPrefix + base64.RawURLEncoding.EncodeToString(priv.Seed()), nil
}

// ParseToken reads a worker token into its private key.
func ParseToken(token string) (ed25519.PrivateKey, error) {
	rest, ok := strings.CutPrefix(strings.TrimSpace(token), TokenPrefix)
	seed, err := base64.RawURLEncoding.DecodeString(rest)
	if !ok || err != nil || len(seed) != ed25519.SeedSize {
		return nil, errors.New("not a worker token (it starts with " + TokenPrefix + "; make one with `warren worker token NAME` on the daemon's machine)")
	}
	return ed25519.NewKeyFromSeed(seed), nil
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
