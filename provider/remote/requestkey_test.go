package remote

import (
	"bytes"
	"crypto/ecdh"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha512"
	"encoding/json"
	"testing"
	"time"
)

// TestMontgomeryIsTheX25519Twin: the X25519 public key montgomery reads
// from an ed25519 public key is the one X25519 makes from the same seed's
// scalar, for many keys (RFC 7748's map, checked against crypto/ecdh).
func TestMontgomeryIsTheX25519Twin(t *testing.T) {
	for range 200 {
		pub, priv, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		h := sha512.Sum512(priv.Seed())
		x, err := ecdh.X25519().NewPrivateKey(h[:32])
		if err != nil {
			t.Fatal(err)
		}
		got, err := montgomery(pub)
		if err != nil {
			t.Fatal(err)
		}
		if want := x.PublicKey().Bytes(); !bytes.Equal(got, want) {
			t.Fatalf("montgomery(%x) = %x, want %x", pub, got, want)
		}
	}
}

// TestRequestKeysPairUp: the daemon and a worker make the same request
// key from their own private key and the other's public key; another
// worker, or another daemon, makes a different one; a request made with
// one checks with it only.
func TestRequestKeysPairUp(t *testing.T) {
	dPub, dPriv, _ := ed25519.GenerateKey(rand.Reader)
	wPub, wPriv, _ := ed25519.GenerateKey(rand.Reader)
	xPub, _, _ := ed25519.GenerateKey(rand.Reader)
	_, oPriv, _ := ed25519.GenerateKey(rand.Reader)
	atDaemon, err := DaemonRequestKey(dPriv, wPub)
	if err != nil {
		t.Fatal(err)
	}
	atWorker, err := WorkerRequestKey(wPriv, dPub)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(atDaemon, atWorker) || len(atDaemon) != 32 {
		t.Fatalf("the two sides' keys differ: %x, %x", atDaemon, atWorker)
	}
	withAnother, _ := DaemonRequestKey(dPriv, xPub)
	fromAnother, _ := DaemonRequestKey(oPriv, wPub)
	if bytes.Equal(withAnother, atDaemon) || bytes.Equal(fromAnother, atDaemon) {
		t.Fatal("another worker's or another daemon's key made the same request key")
	}
	now := time.Now()
	req, err := AuthRequest(atDaemon, "w1", now, []byte(`{"session":"s1"}`))
	if err != nil {
		t.Fatal(err)
	}
	if got, err := CheckRequest(atWorker, "w1", now, req); err != nil || string(got) != `{"session":"s1"}` {
		t.Fatalf("CheckRequest = %s, %v", got, err)
	}
	for name, key := range map[string][]byte{"another worker's": withAnother, "another daemon's": fromAnother} {
		if _, err := CheckRequest(key, "w1", now, req); err == nil {
			t.Errorf("a request checked with %s key", name)
		}
	}
	tampered := bytes.Replace(req, []byte(`s1`), []byte(`s2`), 1)
	if _, err := CheckRequest(atWorker, "w1", now, tampered); err == nil {
		t.Error("a changed request checked")
	}
}

// TestRequestKeyRefusesBadKeys: a key that is not a point's encoding
// (y >= p), or a low-order point (the identity, y = 1, whose X25519
// agreement is all zeros), makes no request key.
func TestRequestKeyRefusesBadKeys(t *testing.T) {
	_, priv, _ := ed25519.GenerateKey(rand.Reader)
	identity := make([]byte, 32)
	identity[0] = 1
	notAPoint := bytes.Repeat([]byte{0xff}, 32)
	notAPoint[31] = 0x7f
	order2 := bytes.Repeat([]byte{0xff}, 32) // y = -1 = p - 1: the point of order 2
	order2[0] = 0xec
	order2[31] = 0x7f
	for name, pub := range map[string][]byte{"identity": identity, "not a point": notAPoint, "order 2": order2, "short": identity[:31]} {
		if k, err := DaemonRequestKey(priv, pub); err == nil {
			t.Errorf("%s: made request key %x", name, k)
		}
	}
}

// TestAuthRequestIsWhatEncodingJSONWrites: the AuthedRequest AuthRequest
// writes by hand is byte for byte what encoding/json makes of the same
// fields.
func TestAuthRequestIsWhatEncodingJSONWrites(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	at := time.UnixMilli(1764470000123)
	for _, req := range []string{`{"session":"s1"}`, `{"prompt":"a \"quoted\" \u003cline\u003e\n","n":[1,2]}`, `[]`} {
		got, err := AuthRequest(key, "w-1_x", at, []byte(req))
		if err != nil {
			t.Fatal(err)
		}
		want, err := json.Marshal(AuthedRequest{Req: json.RawMessage(req), Worker: "w-1_x", At: at.UnixMilli(),
			MAC: requestMAC(key, requestBytes("w-1_x", at.UnixMilli(), []byte(req)))})
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("AuthRequest wrote\n%s\nencoding/json writes\n%s", got, want)
		}
	}
	if _, err := AuthRequest(key, "w1", at, nil); err == nil {
		t.Fatal("an empty request was wrapped")
	}
}
