package daemon

import (
	"context"
	"time"

	"github.com/warren-dev/warren/homedir"
	"github.com/warren-dev/warren/protocol"
	"github.com/warren-dev/warren/server"
)

func (h *handler) status(ctx context.Context, _ protocol.Params, _ server.Stream) (any, error) {
	st := map[string]any{"pid": h.pid, "boot_id": h.c.BootID(), "version": h.version, "home": h.home,
		"uptime_s": int64(time.Since(h.started).Seconds()), "agents": h.c.AgentCount(), "pools": poolsMap(h.c.PoolStats()),
		"degraded": h.c.DegradedCount(), "open_logs": h.c.OpenLogs(),
		"quarantined": h.c.Quarantined()}
	if err := h.c.UserInboxDegraded(); err != nil {
		st["user_inbox_degraded"] = err.Error()
	}
	if msg := h.cfg.message(); msg != "" {
		st["config_error"] = msg
	}
	if runs := h.c.Interrupted(); len(runs) > 0 {
		st["interrupted"] = interruptedList(runs)
	}
	if h.draining.Load() {
		st["draining"] = true
	}
	if h.console != nil {
		st["console"] = map[string]any{"url": h.consoleURL}
	}
	if h.notifier != nil {
		st["notify"] = notifyStatus(h.notifier.Stats())
	}
	if h.front != nil {
		if cl := h.front.cluster(ctx, "active"); cl != nil {
			st["cluster"] = cl
		}
	}
	return st, nil
}

// providers lists the provider entries (never a key: only whether the
// entry's key variable is set).
func (h *handler) providers(context.Context, protocol.Params, server.Stream) (any, error) {
	return map[string]any{"providers": h.c.Providers()}, nil
}

// maxDrainS bounds daemon.shutdown's drain_s (a day).
const maxDrainS = 24 * 3600

// shutdownM stops the daemon, after letting running turns finish for up
// to drain_s seconds (SPEC 9). With a `home` param it stops only if that is
// the home this daemon serves (the same directory), so a client that
// reached it through a socket linked into another home stops nothing.
func (h *handler) shutdownM(_ context.Context, p protocol.Params, _ server.Stream) (any, error) {
	want, err := p.OptString("home", "")
	if err != nil {
		return nil, err
	}
	drainS, err := p.OptInt("drain_s", 0)
	if err != nil {
		return nil, err
	}
	if drainS < 0 || drainS > maxDrainS {
		return nil, protocol.Errorf(protocol.CodeInvalid, "param drain_s: must be 0 to %d seconds, got %d", maxDrainS, drainS)
	}
	if want != "" && !homedir.Same(want, h.home) {
		return nil, protocol.Errorf(protocol.CodeInvalid,
			"this daemon (pid %d) serves the home %s, not %s; it was not stopped. Its socket was reached through another home's path: remove that link",
			h.pid, h.home, want)
	}
	h.drain.Store(int64(drainS) * int64(time.Second))
	if h.shutdown != nil {
		go h.shutdown()
	}
	return map[string]any{"status": "shutting_down", "drain_s": drainS}, nil
}
