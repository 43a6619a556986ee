package natsembed

import (
	"crypto/ed25519"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"math"
	"net/url"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nkeys"
)

// Users decides who may connect to an embedded server as a client
// (Options.Users): every client presents an nkey user's public key
// ("U...") and signs the server's nonce with it; Users gets the key of a
// client whose signature verifies and returns the name the server knows
// it by and its permissions (nil: every subject), or false to refuse it.
// It is asked at each connection, so a key added or removed applies from
// the next one; a connection already made keeps what it was given until
// DropRefused drops it.
type Users func(nkey string) (name string, perms *server.Permissions, ok bool)

// nkeyAuth is the server's check of a client against Users
// (server.Options.CustomClientAuthentication). Routes are not clients:
// they sign in with Options.RouteSecret (and TLS, when it is on).
type nkeyAuth struct{ users Users }

func (a nkeyAuth) Check(c server.ClientAuthentication) bool {
	o := c.GetOpts()
	if o == nil || o.Nkey == "" || o.Sig == "" {
		return false
	}
	sig, err := base64.RawURLEncoding.DecodeString(o.Sig)
	if err != nil {
		if sig, err = base64.StdEncoding.DecodeString(o.Sig); err != nil {
			return false
		}
	}
	pub, err := nkeys.FromPublicKey(o.Nkey)
	if err != nil || pub.Verify(c.GetNonce(), sig) != nil {
		return false
	}
	name, perms, ok := a.users(o.Nkey)
	if !ok {
		return false
	}
	c.RegisterUser(&server.User{Username: name, Permissions: perms})
	return true
}

// RoutePassword is the password of the routes between the servers of
// the daemons that share key (Options.RouteSecret): a server without the
// key cannot join their cluster, whatever its TLS certificate (a
// worker's is signed by the same CA).
func RoutePassword(key ed25519.PrivateKey) string {
	m := hmac.New(sha256.New, key.Seed())
	m.Write([]byte("warren NATS routes"))
	return base64.RawURLEncoding.EncodeToString(m.Sum(nil))
}

// NkeyOf is the nkey user public key ("U...") of an ed25519 public key:
// a warren key (a daemon's or a worker's, package remote) is an nkey
// user's key as it is.
func NkeyOf(pub ed25519.PublicKey) string {
	s, err := nkeys.Encode(nkeys.PrefixByteUser, pub)
	if err != nil { // only for a key that is not 32 bytes
		return ""
	}
	return string(s)
}

// ClientKey is the nats.go option that connects as the nkey user of key.
func ClientKey(key ed25519.PrivateKey) (nats.Option, error) {
	kp, err := nkeys.FromRawSeed(nkeys.PrefixByteUser, key.Seed())
	if err != nil {
		return nil, fmt.Errorf("natsembed: the key is not an nkey seed: %w", err)
	}
	pub, err := kp.PublicKey()
	if err != nil {
		return nil, err
	}
	return nats.Nkey(pub, kp.Sign), nil
}

// Connect connects to url as the nkey user of key, or without a key when
// key is nil, the URL carries a user of its own, or the server asks for
// none (a server that runs without users: an external one, or one of an
// earlier warren). A server that refuses the key is an error that says
// what to do.
func Connect(url string, key ed25519.PrivateKey, opts ...nats.Option) (*nats.Conn, error) {
	nc, err := connect(url, key, opts)
	if errors.Is(err, nats.ErrAuthorization) {
		if key == nil {
			return nil, fmt.Errorf("%w (the servers let in only signed-in keys: the daemon's is in a node's workers.json; warren export and migrate take it with --keys)", err)
		}
		return nil, fmt.Errorf("%w (the servers do not know this key: a daemon's key is in its home's workers.json, which every node of a cluster shares; a worker's is its token, made by `warren worker token` on the daemon's home)", err)
	}
	return nc, err
}

func connect(urls string, key ed25519.PrivateKey, opts []nats.Option) (*nats.Conn, error) {
	if key == nil || hasUser(urls) {
		return nats.Connect(urls, opts...)
	}
	ko, err := ClientKey(key)
	if err != nil {
		return nil, err
	}
	nc, err := nats.Connect(urls, append(opts[:len(opts):len(opts)], ko)...)
	if errors.Is(err, nats.ErrNkeysNotSupported) {
		return nats.Connect(urls, opts...)
	}
	return nc, err
}

// hasUser reports whether one of urls (comma-separated) carries a user
// (nats://user:pass@host): the operator's credentials for servers of
// their own, which an nkey would override.
func hasUser(urls string) bool {
	for _, u := range strings.Split(urls, ",") {
		if p, err := url.Parse(strings.TrimSpace(u)); err == nil && p.User != nil {
			return true
		}
	}
	return false
}

// DropRefused disconnects the clients of srv that signed in with a key
// allowed no longer lets in (a worker's token issued again, or taken out
// of the keys): Users is asked at each connection only, so without this
// such a connection would keep what it was given until it reconnects.
// It returns how many it dropped.
func DropRefused(srv *server.Server, allowed func(nkey string) bool) (int, error) {
	cz, err := srv.Connz(&server.ConnzOptions{Username: true, Limit: math.MaxInt32})
	if err != nil {
		return 0, err
	}
	dropped := 0
	for _, ci := range cz.Conns {
		nkey := ci.AuthorizedUser
		if !strings.HasPrefix(nkey, "U") || len(nkey) != 56 {
			continue // not a client that signed in with a key
		}
		if allowed(nkey) {
			continue
		}
		if err := srv.DisconnectClientByID(ci.Cid); err == nil {
			dropped++
		}
	}
	return dropped, nil
}
