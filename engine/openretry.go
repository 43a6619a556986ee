package engine

import (
	"errors"

	"github.com/warren-dev/warren/engine/internal/agentload"
)

// repairAdvice is what a listed agent's error tells the operator to do:
// `warren repair` for a damaged log, nothing more when the log could not be
// opened (agentload.ErrUnopened says to restart once the cause is gone).
func repairAdvice(id string, err error) string {
	if errors.Is(err, agentload.ErrUnopened) {
		return ""
	}
	return "; run `warren repair " + id + "` to keep a copy and cut the log to its last good entry"
}
