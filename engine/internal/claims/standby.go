package claims

import (
	"errors"
	"fmt"
	"time"

	"github.com/warren-dev/warren/schedule"
	"github.com/warren-dev/warren/store"
)

// Standby is how a daemon stands by for the USER inbox.
type Standby struct {
	// Clustered: the store's leases can lapse, so a held claim is waited
	// for; on another store the first attempt's result is returned.
	Clustered bool
	// Limit bounds one claim attempt; Every is the interval between
	// attempts, on Clock.
	Limit, Every time.Duration
	Clock        schedule.Clock
	// Pause waits between an open that failed and the next claim (Open);
	// its error ends the standby.
	Pause func() error
	// Waiting, when set, is told true when the claim is found held by
	// another daemon (the daemon stands by) and false once it is claimed.
	Waiting func(bool)
}

// StandBy claims id (the USER inbox) within sb.Limit per attempt. On a
// cluster store a daemon that finds it held stands by, trying again every
// sb.Every, until the holder's lease lapses or the Set's context ends; on
// another store the first attempt's result is returned.
func (s *Set) StandBy(id string, sb Standby) (store.Lease, error) {
	logged := false
	for tries := 0; ; tries++ {
		l, err := s.Own(id, sb.Limit)
		if err == nil || !sb.Clustered {
			if logged && sb.Waiting != nil {
				sb.Waiting(false)
			}
			return l, err
		}
		switch {
		case !errors.Is(err, store.ErrOwned):
			// The cluster did not answer in time (a leader election, a
			// server going away): try again on the next tick.
			if tries%40 == 0 {
				s.opts.Logger.Warn("claiming the USER inbox failed; trying again", "err", err)
			}
		case !logged:
			logged = true
			if sb.Waiting != nil {
				sb.Waiting(true)
			}
			s.opts.Logger.Info("standing by: another daemon runs this cluster's USER inbox; its agents are taken over when its lease lapses", "detail", err)
		}
		if err := schedule.Sleep(s.opts.Ctx, sb.Clock, sb.Every); err != nil {
			return nil, errors.Join(errors.New("stopped standing by for the USER inbox"), err)
		}
	}
}

// Open claims id (StandBy) and opens what the claim guards with open. On a
// cluster store a failed open gives the claim up (another daemon may take
// it at once); when the servers may still be electing leaders
// (store.ErrUnavailable) or another daemon claimed id between the claim
// and the open (store.ErrFenced), the standby goes on after sb.Pause.
// Any other result is returned.
func (s *Set) Open(id string, sb Standby, open func(store.Lease) error) error {
	for tries := 0; ; tries++ {
		lease, err := s.StandBy(id, sb)
		if err != nil {
			return fmt.Errorf("claiming the USER inbox: %w", err)
		}
		err = open(lease)
		if err == nil || !sb.Clustered {
			return err
		}
		s.Drop(s.opts.Ctx, id)
		if !errors.Is(err, store.ErrUnavailable) && !errors.Is(err, store.ErrFenced) {
			return err
		}
		if tries%10 == 0 {
			s.opts.Logger.Warn("opening the USER inbox failed; claiming it again", "err", err)
		}
		if err := sb.Pause(); err != nil {
			return errors.Join(errors.New("stopped standing by for the USER inbox"), err)
		}
	}
}
