package console

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sync"
	"time"

	"github.com/warren-dev/warren/atomicfile"
	"github.com/warren-dev/warren/faultfs"
)

// PairFor is how long a pairing link works; SessionFor how long a session
// lasts once paired (until revoked, at most this).
const (
	PairFor    = 5 * time.Minute
	SessionFor = 30 * 24 * time.Hour
)

// pairLimit bounds pairing attempts (used or not) per minute.
const pairLimit = 20

// access holds the one-time pairing codes (in memory: a restart voids
// them) and the sessions (hashes, in console.json).
type access struct {
	fsys faultfs.FS
	path string
	now  func() time.Time

	mu       sync.Mutex
	pairs    map[string]time.Time // hash of a code -> when it expires
	sessions map[string]time.Time // hash of a session secret -> when it expires
	attempts []time.Time          // pairing attempts of the last minute
}

// file is console.json.
type file struct {
	Sessions []fileSession `json:"sessions"`
}

type fileSession struct {
	Hash    string `json:"hash"`
	Expires string `json:"expires"`
}

func loadAccess(fsys faultfs.FS, path string, now func() time.Time) (*access, error) {
	a := &access{fsys: fsys, path: path, now: now, pairs: map[string]time.Time{}, sessions: map[string]time.Time{}}
	f, err := fsys.OpenFile(path, os.O_RDONLY, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return a, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 4<<20))
	if err != nil {
		return nil, err
	}
	var cf file
	if err := json.Unmarshal(b, &cf); err != nil {
		return nil, fmt.Errorf("%s is not valid (%v): remove it, then pair again with warren console", path, err)
	}
	for _, s := range cf.Sessions {
		if t, err := time.Parse(time.RFC3339, s.Expires); err == nil && len(s.Hash) == 64 {
			a.sessions[s.Hash] = t
		}
	}
	return a, nil
}

func hash(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

func random() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return hex.EncodeToString(b), nil
}

// newPairing makes a one-time code valid for PairFor.
func (a *access) newPairing() (code string, expires time.Time, err error) {
	code, err = random()
	if err != nil {
		return "", time.Time{}, err
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	expires = a.now().Add(PairFor)
	a.pairs[hash(code)] = expires
	return code, expires, nil
}

// ErrRateLimited: too many pairing attempts in the last minute.
var ErrRateLimited = errors.New("too many pairing attempts; wait a minute")

// ErrBadPairing: the code is unknown, used or expired.
var ErrBadPairing = errors.New("this pairing link is not valid: it was used, it expired (links last 5 minutes), or it never existed; run warren console again")

// pair consumes code and returns a new session secret.
func (a *access) pair(code string) (string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	keep := a.attempts[:0]
	for _, t := range a.attempts {
		if now.Sub(t) < time.Minute {
			keep = append(keep, t)
		}
	}
	a.attempts = keep
	if len(a.attempts) >= pairLimit {
		return "", ErrRateLimited
	}
	a.attempts = append(a.attempts, now)
	h := hash(code)
	exp, ok := a.pairs[h]
	delete(a.pairs, h) // one use, whatever the outcome
	if !ok || now.After(exp) {
		return "", ErrBadPairing
	}
	secret, err := random()
	if err != nil {
		return "", err
	}
	a.sessions[hash(secret)] = now.Add(SessionFor)
	if err := a.saveLocked(); err != nil {
		delete(a.sessions, hash(secret))
		return "", err
	}
	return secret, nil
}

// valid reports whether secret is a live session's.
func (a *access) valid(secret string) bool {
	if secret == "" {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	exp, ok := a.sessions[hash(secret)]
	return ok && a.now().Before(exp)
}

// revoke ends every session and voids every pairing code.
func (a *access) revoke() (int, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := len(a.sessions)
	a.sessions, a.pairs = map[string]time.Time{}, map[string]time.Time{}
	return n, a.saveLocked()
}

func (a *access) saveLocked() error {
	cf := file{Sessions: []fileSession{}}
	now := a.now()
	for h, exp := range a.sessions {
		if now.Before(exp) {
			cf.Sessions = append(cf.Sessions, fileSession{Hash: h, Expires: exp.UTC().Format(time.RFC3339)})
		}
	}
	b, err := json.Marshal(cf)
	if err != nil {
		return err
	}
	return atomicfile.Write(a.fsys, a.path, b, 0o600)
}
