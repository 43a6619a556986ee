package agentload

import (
	"context"
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
// nobody sees half-recovered state) for up to RetryLimit, logging why
// it waits; an agent whose log still cannot be opened is then listed with
// the cause and "restart the daemon once it is gone" (its files untouched),
// and the agents under it say so too. Once a log is open, its later faults
// heal by themselves (eventlog, "Faults and healing"), including the
// reopen of a log closed for the open-files cap. A cluster that did not
// answer after the store's own retries (store.ErrUnavailable: servers
// still electing leaders) is waited for the same way.

// ResourceFault reports whether err is a lack of a resource that may come
// back, rather than damage.
func ResourceFault(err error) bool {
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

// RetryOpenFaults reloads, with a backoff, the agents whose log could not
// be opened for lack of a resource, until they open, RetryLimit has
// passed or ctx ends; those still failing get ErrUnopened.
func (ld *Loader[B]) RetryOpenFaults(ctx context.Context, all []*Agent[B]) {
	var failing []int
	for i, l := range all {
		if l.Err != nil && ResourceFault(l.Err) {
			failing = append(failing, i)
		}
	}
	wait, waited := 100*time.Millisecond, time.Duration(0)
	for len(failing) > 0 && waited < RetryLimit {
		first := all[failing[0]]
		ld.log().Warn("cannot open agent logs for lack of a resource; recovery waits and retries", "agents", len(failing),
			"agent", first.ID, "err", first.Err, "retry_in", wait)
		if err := ld.Sleep(ctx, wait); err != nil {
			break
		}
		waited += wait
		wait = min(wait*2, 5*time.Second)
		next := failing[:0]
		for _, i := range failing {
			all[i] = ld.Load(all[i].ID)
			if all[i].Err != nil && ResourceFault(all[i].Err) {
				next = append(next, i)
			}
		}
		failing = next
	}
	for _, i := range failing {
		all[i].Err = fmt.Errorf("%w: %w", ErrUnopened, all[i].Err)
	}
}
