package daemon

import (
	"context"
	"errors"
	"net"
	"net/http"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/config"
	"github.com/warren-dev/warren/console"
	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/protocol"
	"github.com/warren-dev/warren/server"
)

// The web console (SPEC 14, package console): an HTTP listener of its own,
// separate from the socket, serving the socket's methods to paired
// browsers through the same handler (the same validation and codes).

// startWeb starts the console's listener when web.Listen is set; stop
// closes it (its event streams end first).
func startWeb(h *handler, home string, web config.HTTP, logger hclog.Logger) (stop func(), err error) {
	if web.Listen == "" {
		return func() {}, nil
	}
	tls := web.TLSCert != ""
	con, err := console.New(console.Options{Handler: h, FS: faultfs.OS{}, Home: home, Logger: logger.Named("console"), Secure: tls})
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", web.Listen)
	if err != nil {
		return nil, err
	}
	scheme := "http"
	if tls {
		scheme = "https"
	}
	h.console, h.consoleURL = con, scheme+"://"+ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	srv := &http.Server{Handler: con, ReadHeaderTimeout: 10 * time.Second,
		BaseContext: func(net.Listener) context.Context { return ctx }, ErrorLog: logger.Named("console").StandardLogger(nil)}
	done := make(chan struct{})
	go func() {
		defer close(done)
		var err error
		if tls {
			err = srv.ServeTLS(ln, web.TLSCert, web.TLSKey)
		} else {
			err = srv.Serve(ln)
		}
		if err != nil && !errors.Is(err, http.ErrServerClosed) {
			logger.Error("the web console stopped", "err", err)
		}
	}()
	logger.Info("web console", "url", h.consoleURL)
	return func() {
		cancel() // ends the event streams
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		_ = srv.Shutdown(sctx)
		<-done
	}, nil
}

// consolePair is console.pair: a one-time pairing link.
func (h *handler) consolePair(context.Context, protocol.Params, server.Stream) (any, error) {
	if h.console == nil {
		return nil, protocol.Errorf(protocol.CodeInvalid, `the web console is off: start the daemon with --http 127.0.0.1:7777, or set "http": {"listen": "127.0.0.1:7777"} in config.json and restart it`)
	}
	code, exp, err := h.console.Pair()
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "pairing: %v", err)
	}
	return map[string]any{"url": h.consoleURL + "/pair?code=" + code, "expires": exp.UTC().Format(time.RFC3339)}, nil
}

// consoleRevoke is console.revoke: every session ends.
func (h *handler) consoleRevoke(context.Context, protocol.Params, server.Stream) (any, error) {
	if h.console == nil {
		return nil, protocol.Errorf(protocol.CodeInvalid, "the web console is off: there are no sessions to revoke")
	}
	n, err := h.console.Revoke()
	if err != nil {
		return nil, protocol.Errorf(protocol.CodeInternal, "revoking: %v", err)
	}
	return map[string]any{"revoked": n}, nil
}
