package engine

import (
	"errors"
	"fmt"
	"syscall"
	"time"

	"github.com/warren-dev/warren/store"
)

// Open faults at recovery (issue 16, "faults heal without a restart"): a
// log that cannot be opened for lack of a resource (ENOSPC, EMFILE,
// ENFILE, ENOMEM, EDQUOT, EROFS) is not damaged. Recovery used to list such
// an agent as corrupt, with `warren repair` as the advice, and every agent
// under it as unplaceable, until a restart. Now recovery retries those
// opens with a backoff (SPEC 9: requests wait while recovery runs, and
// nobody sees half-recovered state) for up to openRetryLimit, logging why
// it waits; an agent whose log still cannot be opened is then listed with
// the cause and "restart the daemon once it is gone" (its files untouched),
// and the agents under it say so too. Once a log is open, its later faults
// heal by themselves (eventlog, "Faults and healing"), including the
// reopen of a log closed for the open-files cap. A cluster that did not
// answer after the store's own retries (store.ErrUnavailable: servers
// still electing leaders) is waited for the same way.

// openRetryLimit bounds how long recovery waits for resources to come back.
const openRetryLimit = 60 * time.Second

// errUnopened marks an agent whose log recovery could not open for lack of
// a resource.
var errUnopened = errors.New("its log could not be opened for lack of a resource (nothing is damaged or lost; restart the daemon once the cause is gone)")

// resourceFault reports whether err is a lack of a resource that may come
// back, rather than damage.
func resourceFault(err error) bool {
	if errors.Is(err, store.ErrUnavailable) {
		return true
	}
	for _, e := range []error{syscall.ENOSPC, syscall.EMFILE, syscall.ENFILE, syscall.ENOMEM, syscall.EDQUOT, syscall.EROFS} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// retryOpenFaults reloads, with a backoff, the agents whose log could not
// be opened for lack of a resource, until they open or openRetryLimit has
// passed; those still failing get errUnopened.
func (c *Core) retryOpenFaults(all []*loaded) {
	var failing []int
	for i, l := range all {
		if l.err != nil && resourceFault(l.err) {
			failing = append(failing, i)
		}
	}
	wait, waited := 100*time.Millisecond, time.Duration(0)
	for len(failing) > 0 && waited < openRetryLimit {
		first := all[failing[0]]
		c.log.Warn("cannot open agent logs for lack of a resource; recovery waits and retries", "agents", len(failing),
			"agent", first.id, "err", first.err, "retry_in", wait)
		if err := c.opts.Sleep(c.ctx, wait); err != nil {
			break
		}
		waited += wait
		wait = min(wait*2, 5*time.Second)
		next := failing[:0]
		for _, i := range failing {
			all[i] = c.load(all[i].id)
			if all[i].err != nil && resourceFault(all[i].err) {
				next = append(next, i)
			}
		}
		failing = next
	}
	for _, i := range failing {
		all[i].err = fmt.Errorf("%w: %w", errUnopened, all[i].err)
	}
}

// repairAdvice is what a listed agent's error tells the operator to do:
// `warren repair` for a damaged log, nothing more when the log could not be
// opened (errUnopened says to restart once the cause is gone).
func repairAdvice(id string, err error) string {
	if errors.Is(err, errUnopened) {
		return ""
	}
	return "; run `warren repair " + id + "` to keep a copy and cut the log to its last good entry"
}
