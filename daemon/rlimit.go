package daemon

import (
	"syscall"

	"github.com/hashicorp/go-hclog"

	"github.com/warren-dev/warren/config"
)

// fileLimit raises the soft RLIMIT_NOFILE to the hard limit, as servers
// do, and returns the open-log cap for the limit in force
// (config.MaxOpenLogsFor), logging the figures. The Go runtime already
// raises the soft limit at start (to the hard limit less one, and gives
// child processes the original soft limit back); the daemon raises it only
// when that did not happen, so agent processes still start with the limit
// the daemon was given. A limit that cannot be read or raised is logged;
// the cap then follows what is known.
func fileLimit(logger hclog.Logger) int {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		logger.Warn("cannot read the file descriptor limit (RLIMIT_NOFILE); keeping the default cap on open logs",
			"err", err, "max_open_logs", config.DefaultMaxOpenLogs)
		return config.DefaultMaxOpenLogs
	}
	was := lim.Cur
	if lim.Max > 0 && lim.Cur < lim.Max-1 {
		raised := syscall.Rlimit{Cur: lim.Max, Max: lim.Max}
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &raised); err != nil {
			logger.Warn("cannot raise the soft file descriptor limit to the hard one", "soft", lim.Cur, "hard", lim.Max, "err", err)
		} else {
			lim = raised
		}
	}
	logs := config.MaxOpenLogsFor(lim.Cur)
	args := []any{"soft", lim.Cur, "hard", lim.Max, "max_open_logs", logs}
	if was != lim.Cur {
		args = append(args, "raised_from", was)
	}
	if logs < config.DefaultMaxOpenLogs {
		logger.Info("file descriptor limit is low: fewer event logs are kept open, the others are reopened when used (raise it with ulimit -n or LimitNOFILE=)", args...)
	} else {
		logger.Info("file descriptor limit", args...)
	}
	return logs
}
