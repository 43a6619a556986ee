package server

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// Pool runs one Server per key, shared by reference count: the agents'
// own sockets of a daemon (daemon/agentsock.go) and of a worker
// (worker/sockets.go). Acquire starts a key's server, or shares the one
// running; the last release shuts it down. Safe for concurrent use.
type Pool struct {
	ctx context.Context // the owner's: the servers stop with it
	log hclog.Logger

	mu    sync.Mutex
	socks map[string]*pooled
}

type pooled struct {
	srv  *Server
	refs int
	done chan struct{} // closed when Serve returned
}

// NewPool returns an empty pool whose servers serve until ctx ends or
// their last release.
func NewPool(ctx context.Context, log hclog.Logger) *Pool {
	return &Pool{ctx: ctx, log: log, socks: map[string]*pooled{}}
}

// Acquire starts key's server on path with handler h (made only when none
// runs), or shares the running one, and returns the function that gives
// it back.
func (p *Pool) Acquire(key, path string, h func() Handler) (func(), error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ps, ok := p.socks[key]; ok {
		ps.refs++
		return func() { p.release(key, ps) }, nil
	}
	srv := New(Config{SocketPath: path, MaxConns: 16, MaxPending: 16}, h(), p.log.With("key", key))
	if err := srv.Listen(); err != nil {
		return nil, fmt.Errorf("listening on %s: %w (a shorter home path helps when it is too long)", path, err)
	}
	ps := &pooled{srv: srv, refs: 1, done: make(chan struct{})}
	go func() {
		defer close(ps.done)
		if err := srv.Serve(p.ctx); err != nil {
			p.log.Warn("a pooled socket stopped", "key", key, "err", err)
		}
	}()
	p.socks[key] = ps
	return func() { p.release(key, ps) }, nil
}

// release gives back one use of key's server; the last one shuts it down.
func (p *Pool) release(key string, ps *pooled) {
	p.mu.Lock()
	ps.refs--
	last := ps.refs == 0 && p.socks[key] == ps
	if last {
		delete(p.socks, key)
	}
	p.mu.Unlock()
	if last {
		p.stop(ps)
	}
}

func (p *Pool) stop(ps *pooled) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := ps.srv.Shutdown(ctx); err != nil {
		p.log.Warn("closing a pooled socket", "err", err)
	}
	<-ps.done
}

// CloseAll shuts every server down (the owner stops).
func (p *Pool) CloseAll() {
	p.mu.Lock()
	all := p.socks
	p.socks = map[string]*pooled{}
	p.mu.Unlock()
	for _, ps := range all {
		p.stop(ps)
	}
}
