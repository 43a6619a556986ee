package natsembed

import (
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/hashicorp/go-hclog"
)

// serverLog is the embedded server's logger (Options.Logger): warnings
// and errors to the daemon's log, each kind at most once per logEvery (a
// client that tries again and again is refused again and again), notices
// at debug level; debug and trace are off. A kind is the message without
// its digits: the server names each connection by its address and id.
type serverLog struct {
	log hclog.Logger

	mu   sync.Mutex
	last map[string]time.Time // by kind
}

// logEvery is how often one kind of message is logged at most.
const logEvery = time.Minute

func newServerLog(l hclog.Logger) *serverLog {
	return &serverLog{log: l, last: map[string]time.Time{}}
}

// due reports whether msg may be logged now.
func (l *serverLog) due(msg string) bool {
	kind := strings.Map(func(r rune) rune {
		if unicode.IsDigit(r) {
			return -1
		}
		return r
	}, msg)
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if t, ok := l.last[kind]; ok && now.Sub(t) < logEvery {
		return false
	}
	if len(l.last) > 1000 {
		clear(l.last)
	}
	l.last[kind] = now
	return true
}

func (l *serverLog) Noticef(format string, v ...any) { l.log.Debug(fmt.Sprintf(format, v...)) }
func (l *serverLog) Debugf(string, ...any)           {}
func (l *serverLog) Tracef(string, ...any)           {}

func (l *serverLog) Warnf(format string, v ...any) {
	if msg := fmt.Sprintf(format, v...); l.due(msg) {
		l.log.Warn(msg)
	}
}

func (l *serverLog) Errorf(format string, v ...any) {
	if msg := fmt.Sprintf(format, v...); l.due(msg) {
		l.log.Error(msg)
	}
}

func (l *serverLog) Fatalf(format string, v ...any) { l.log.Error(fmt.Sprintf(format, v...)) }
