package claims

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/warren-dev/warren/store"
)

// Open on a cluster: an open refused while the servers elect leaders or
// after another daemon's claim gives the claim up and claims again after
// a pause; any other refusal gives it up and is returned; on the local
// store the open's error is returned at once and the claim kept.
func TestOpenStandsByUntilTheOpenSucceeds(t *testing.T) {
	for _, tc := range []struct {
		name      string
		clustered bool
		errs      []error // the open's results, in order; then nil
		want      error
		claims    int  // Own calls
		pauses    int  // Pause calls
		held      bool // the claim is held at the end
	}{
		{"cluster, retried", true, []error{store.ErrUnavailable, store.ErrFenced}, nil, 3, 2, true},
		{"cluster, refused", true, []error{errBad}, errBad, 1, 0, false},
		{"local, refused", false, []error{store.ErrUnavailable}, store.ErrUnavailable, 1, 0, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newOwner()
			s := New(Options{Owner: o, Ctx: context.Background()})
			pauses, opens := 0, 0
			sb := Standby{Clustered: tc.clustered, Every: time.Millisecond, Pause: func() error { pauses++; return nil }}
			err := s.Open("USER", sb, func(l store.Lease) error {
				if l.ID() != "USER" {
					t.Fatalf("opened under the lease of %q", l.ID())
				}
				defer func() { opens++ }()
				if opens < len(tc.errs) {
					return tc.errs[opens]
				}
				return nil
			})
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("Open = %v, want %v", err, tc.want)
			}
			if o.calls["USER"] != tc.claims || pauses != tc.pauses || s.Holds("USER") != tc.held {
				t.Fatalf("claims %d, pauses %d, held %v; want %d, %d, %v",
					o.calls["USER"], pauses, s.Holds("USER"), tc.claims, tc.pauses, tc.held)
			}
		})
	}
}

// A pause that ends (the daemon stops) ends the standby with its error;
// a claim that cannot be made is returned as the claim's.
func TestOpenEndsWithThePause(t *testing.T) {
	s := New(Options{Owner: newOwner(), Ctx: context.Background()})
	sb := Standby{Clustered: true, Pause: func() error { return context.Canceled }}
	err := s.Open("USER", sb, func(store.Lease) error { return store.ErrUnavailable })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Open = %v, want the pause's error", err)
	}
	err = New(Options{Owner: newOwner("USER"), Ctx: context.Background()}).Open("USER", Standby{},
		func(store.Lease) error { t.Fatal("opened without a claim"); return nil })
	if !errors.Is(err, store.ErrOwned) || err.Error() != "claiming the USER inbox: "+store.ErrOwned.Error() {
		t.Fatalf("Open = %v, want the claim's error", err)
	}
}

var errBad = errors.New("bad log")
