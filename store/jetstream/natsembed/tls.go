package natsembed

import (
	"crypto/tls"
	"errors"
	"fmt"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// TLSFiles are the PEM files of a node's TLS: its certificate and key
// (valid for the addresses it listens and routes on, for server and
// client use: the node is both to its peers) and the CA that signed every
// node's certificate.
type TLSFiles struct {
	Cert, Key, CA string
}

// Check reports a set that is incomplete.
func (t *TLSFiles) Check() error {
	if t.Cert == "" || t.Key == "" || t.CA == "" {
		return errors.New("TLS needs a certificate, its key and the CA that signed the cluster's certificates (all three)")
	}
	return nil
}

// apply turns on mutual TLS for the clients and the routes of opts.
func (t *TLSFiles) apply(opts *server.Options) error {
	if err := t.Check(); err != nil {
		return err
	}
	const timeout = 5 // seconds for a handshake
	gen := func(what string) (*tls.Config, error) {
		c, err := server.GenTLSConfig(&server.TLSConfigOpts{CertFile: t.Cert, KeyFile: t.Key, CaFile: t.CA, Verify: true, Timeout: timeout})
		if err != nil {
			return nil, fmt.Errorf("natsembed: TLS for %s: %w", what, err)
		}
		return c, nil
	}
	tc, err := gen("clients")
	if err != nil {
		return err
	}
	rc, err := gen("routes")
	if err != nil {
		return err
	}
	opts.TLSConfig, opts.TLS, opts.TLSVerify, opts.TLSTimeout = tc, true, true, timeout
	// A node solicits routes as a client too: it verifies its peers
	// against the same CA (as nats-server's own config file does).
	rc.RootCAs = rc.ClientCAs
	opts.Cluster.TLSConfig, opts.Cluster.TLSTimeout = rc, timeout
	return nil
}

// ClientOptions are the nats.go options of a client of a server with
// these files: the CA to verify it, the certificate to present.
func (t *TLSFiles) ClientOptions() []nats.Option {
	return []nats.Option{nats.RootCAs(t.CA), nats.ClientCert(t.Cert, t.Key)}
}
