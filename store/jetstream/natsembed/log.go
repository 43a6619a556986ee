package natsembed

import (
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
)

// serverLog is the embedded server's logger (Options.Logger): warnings
// and errors to the daemon's log, each format at most once per
// logEvery (a client that tries again and again is refused again and
// again), notices at debug level; debug and trace are off.
type serverLog struct {
	log hclog.Logger

	mu   sync.Mutex
	last map[string]time.Time // by format
}

// logEvery is how often one kind of message is logged at most.
const logEvery = time.Minute

func newServerLog(l hclog.Logger) *serverLog {
	return &serverLog{log: l, last: map[string]time.Time{}}
}

// due reports whether a message of format may be logged now.
func (l *serverLog) due(format string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if t, ok := l.last[format]; ok && now.Sub(t) < logEvery {
		return false
	}
	if len(l.last) > 1000 {
		clear(l.last)
	}
	l.last[format] = now
	return true
}

func (l *serverLog) Noticef(format string, v ...any) { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l *serverLog) Debugf(string, ...any)           {}
func (l *serverLog) Tracef(string, ...any)           {}

func (l *serverLog) Warnf(format string, v ...any) {
	if l.due(format) {
		l.log.Warn(fmt.Sprintf(format, v...))
	}
}

func (l *serverLog) Errorf(format string, v ...any) {
	if l.due(format) {
		l.log.Error(fmt.Sprintf(format, v...))
	}
}

func (l *serverLog) Fatalf(format string, v ...any) { l.log.Error(fmt.Sprintf(format, v...)) }
