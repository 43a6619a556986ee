package session

import (
	"fmt"
	"testing"
	"time"
)

const (
	bootNow = "boot-now"
	bootOld = "boot-old"
)

var (
	tNow    = time.Date(2026, 11, 22, 10, 0, 0, 0, time.UTC)
	tPast   = tNow.Add(-time.Minute)
	tFuture = tNow.Add(time.Minute)
)

// oracle is an independent formulation of the status rules: it classifies
// the run first (none/ended, parked in a wait, active) and decides per class.
func oracle(s *Session, f Facts, bootID string, now time.Time) Status {
	if f.Corrupt {
		return StatusCorrupt
	}
	if f.Terminated {
		return StatusTerminated
	}
	if s != nil && s.State == StateTerminated {
		return StatusTerminated
	}
	if f.RunID == "" {
		return StatusIdle
	}
	if f.RunEnded {
		return StatusIdle
	}
	// Interruption still in force?
	reason := ""
	if f.Interrupted && !f.Resumed {
		reason = f.InterruptReason
		if reason != "wait_timeout" {
			reason = "process_restart"
		}
	}
	if reason == "process_restart" {
		return StatusInterruptedStartup
	}
	// Which boot does the run belong to?
	runBoot := f.RunBootID
	var dl time.Time = f.WaitDeadline
	if s != nil && s.Run != nil && s.Run.RunID == f.RunID {
		if runBoot == "" {
			runBoot = s.Run.BootID
		}
		if dl.IsZero() && s.Run.Wait != nil {
			dl = s.Run.Wait.Deadline
		}
	}
	ours := runBoot != "" && runBoot == bootID
	if !f.Waiting {
		if !ours {
			return StatusInterruptedStartup
		}
		if reason == "wait_timeout" {
			return StatusInterruptedWaiting
		}
		return StatusRunning
	}
	if reason == "wait_timeout" {
		return StatusInterruptedWaiting
	}
	if f.Token == "live" && (dl.IsZero() || now.Before(dl)) {
		return StatusSuspended
	}
	return StatusInterruptedWaiting
}

func snapshots() map[string]*Session {
	mk := func(st State, run *Run) *Session {
		return &Session{ID: "0123456789abcdef0123456789abcdef", State: st, Run: run}
	}
	out := map[string]*Session{"nil": nil}
	for _, st := range []State{StateIdle, StateRunning, StateSuspended, StateTerminated} {
		out[string(st)+"/norun"] = mk(st, nil)
		out[string(st)+"/r1-old"] = mk(st, &Run{RunID: "r1", BootID: bootOld})
		out[string(st)+"/r1-now"] = mk(st, &Run{RunID: "r1", BootID: bootNow})
		out[string(st)+"/r1-now-wait-past"] = mk(st, &Run{RunID: "r1", BootID: bootNow, Wait: &Wait{Deadline: tPast}})
		out[string(st)+"/r1-old-wait-future"] = mk(st, &Run{RunID: "r1", BootID: bootOld, Wait: &Wait{Deadline: tFuture}})
		out[string(st)+"/r0-now"] = mk(st, &Run{RunID: "r0", BootID: bootNow, Wait: &Wait{Deadline: tPast}})
	}
	return out
}

// TestDeriveCrossProduct checks Derive against the oracle for every
// combination of the inputs' relevant values.
func TestDeriveCrossProduct(t *testing.T) {
	snaps := snapshots()
	bools := []bool{false, true}
	n := 0
	seen := map[Status]int{}
	for sname, s := range snaps {
		for _, corrupt := range bools {
			for _, term := range bools {
				for _, runID := range []string{"", "r1"} {
					for _, rboot := range []string{"", bootOld, bootNow} {
						for _, ended := range bools {
							for _, intr := range bools {
								for _, reason := range []string{ReasonProcessRestart, ReasonWaitTimeout, "", "weird"} {
									for _, resumed := range bools {
										for _, waiting := range bools {
											for _, tok := range []TokenState{"", TokenNone, TokenLive, TokenConsumed, TokenRevoked, TokenExpired} {
												for _, dl := range []time.Time{{}, tPast, tNow, tFuture} {
													f := Facts{Corrupt: corrupt, Terminated: term, RunID: runID, RunBootID: rboot, RunEnded: ended,
														Interrupted: intr, InterruptReason: reason, Resumed: resumed, Waiting: waiting, Token: tok, WaitDeadline: dl}
													got := Derive(s, f, bootNow, tNow)
													want := oracle(s, f, bootNow, tNow)
													n++
													seen[got]++
													if got != want {
														t.Fatalf("snapshot %s, facts %+v: Derive = %s, oracle = %s", sname, f, got, want)
													}
													if m := NeedsRestartMark(s, f, bootNow); m && got != StatusInterruptedStartup {
														t.Fatalf("snapshot %s, facts %+v: NeedsRestartMark but status %s", sname, f, got)
													}
													if m := NeedsWaitTimeout(s, f, tNow); m && got != StatusInterruptedWaiting {
														t.Fatalf("snapshot %s, facts %+v: NeedsWaitTimeout but status %s", sname, f, got)
													}
												}
											}
										}
									}
								}
							}
						}
					}
				}
			}
		}
	}
	for _, st := range Statuses() {
		if seen[st] == 0 {
			t.Errorf("status %s never produced by the cross product", st)
		}
	}
	t.Logf("%d combinations", n)
}

func TestDeriveRules(t *testing.T) {
	idle := &Session{State: StateIdle}
	cases := []struct {
		name string
		s    *Session
		f    Facts
		want Status
	}{
		{"no run is idle", idle, Facts{}, StatusIdle},
		{"no snapshot, no run is idle", nil, Facts{}, StatusIdle},
		{"completed run is idle", idle, Facts{RunID: "r", RunBootID: bootNow, RunEnded: true}, StatusIdle},
		{"failed run from earlier boot is idle", idle, Facts{RunID: "r", RunBootID: bootOld, RunEnded: true}, StatusIdle},
		{"open run of this boot is running", idle, Facts{RunID: "r", RunBootID: bootNow}, StatusRunning},
		{"snapshot state does not override the log", &Session{State: StateSuspended}, Facts{RunID: "r", RunBootID: bootNow}, StatusRunning},
		{"open run of earlier boot is interrupted_startup", idle, Facts{RunID: "r", RunBootID: bootOld}, StatusInterruptedStartup},
		{"marked process_restart is interrupted_startup", idle, Facts{RunID: "r", RunBootID: bootOld, Interrupted: true, InterruptReason: ReasonProcessRestart}, StatusInterruptedStartup},
		{"marked restart holds even if boot is ours", idle, Facts{RunID: "r", RunBootID: bootNow, Interrupted: true, InterruptReason: ReasonProcessRestart}, StatusInterruptedStartup},
		{"resumed interrupted run under this boot is running", idle, Facts{RunID: "r", RunBootID: bootNow, Interrupted: true, InterruptReason: ReasonProcessRestart, Resumed: true}, StatusRunning},
		{"cancelled interrupted run is idle", idle, Facts{RunID: "r", RunBootID: bootOld, Interrupted: true, InterruptReason: ReasonProcessRestart, RunEnded: true}, StatusIdle},
		{"unknown boot is not ours", idle, Facts{RunID: "r"}, StatusInterruptedStartup},
		{"boot from the snapshot of the same run", &Session{State: StateRunning, Run: &Run{RunID: "r", BootID: bootNow}}, Facts{RunID: "r"}, StatusRunning},
		{"snapshot of another run gives no boot", &Session{State: StateRunning, Run: &Run{RunID: "other", BootID: bootNow}}, Facts{RunID: "r"}, StatusInterruptedStartup},
		{"live token wait is suspended", idle, Facts{RunID: "r", RunBootID: bootNow, Waiting: true, Token: TokenLive, WaitDeadline: tFuture}, StatusSuspended},
		{"wait survives a restart", idle, Facts{RunID: "r", RunBootID: bootOld, Waiting: true, Token: TokenLive}, StatusSuspended},
		{"expired token is interrupted_waiting", idle, Facts{RunID: "r", RunBootID: bootNow, Waiting: true, Token: TokenExpired}, StatusInterruptedWaiting},
		{"revoked token is interrupted_waiting", idle, Facts{RunID: "r", RunBootID: bootNow, Waiting: true, Token: TokenRevoked}, StatusInterruptedWaiting},
		{"missing token is interrupted_waiting", idle, Facts{RunID: "r", RunBootID: bootNow, Waiting: true}, StatusInterruptedWaiting},
		{"deadline passed is interrupted_waiting", idle, Facts{RunID: "r", RunBootID: bootNow, Waiting: true, Token: TokenLive, WaitDeadline: tPast}, StatusInterruptedWaiting},
		{"deadline exactly now has passed", idle, Facts{RunID: "r", RunBootID: bootNow, Waiting: true, Token: TokenLive, WaitDeadline: tNow}, StatusInterruptedWaiting},
		{"deadline from the snapshot", &Session{State: StateSuspended, Run: &Run{RunID: "r", Wait: &Wait{Deadline: tPast}}}, Facts{RunID: "r", RunBootID: bootNow, Waiting: true, Token: TokenLive}, StatusInterruptedWaiting},
		{"wait_timeout mark is interrupted_waiting", idle, Facts{RunID: "r", RunBootID: bootNow, Waiting: true, Token: TokenLive, Interrupted: true, InterruptReason: ReasonWaitTimeout}, StatusInterruptedWaiting},
		{"startup beats waiting", idle, Facts{RunID: "r", RunBootID: bootOld, Waiting: true, Token: TokenExpired, Interrupted: true, InterruptReason: ReasonProcessRestart}, StatusInterruptedStartup},
		{"resumed wait is running", idle, Facts{RunID: "r", RunBootID: bootNow, Token: TokenConsumed}, StatusRunning},
		{"terminated snapshot", &Session{State: StateTerminated}, Facts{RunID: "r", RunBootID: bootOld}, StatusTerminated},
		{"terminated in the log", idle, Facts{Terminated: true, RunID: "r", RunBootID: bootNow, Waiting: true, Token: TokenLive}, StatusTerminated},
		{"corrupt beats everything", &Session{State: StateTerminated}, Facts{Corrupt: true, Terminated: true}, StatusCorrupt},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if got := Derive(c.s, c.f, bootNow, tNow); got != c.want {
				t.Fatalf("Derive = %s, want %s", got, c.want)
			}
			if got := oracle(c.s, c.f, bootNow, tNow); got != c.want {
				t.Fatalf("oracle = %s, want %s", got, c.want)
			}
		})
	}
}

func TestRecoveryMarksAreIdempotent(t *testing.T) {
	f := Facts{RunID: "r", RunBootID: bootOld}
	if !NeedsRestartMark(nil, f, bootNow) {
		t.Fatal("open run from an earlier boot needs a mark")
	}
	f.Interrupted, f.InterruptReason = true, ReasonProcessRestart // appended once
	if NeedsRestartMark(nil, f, bootNow) {
		t.Fatal("a marked run needs no second mark")
	}
	if NeedsRestartMark(nil, f, "boot-third") {
		t.Fatal("a marked run needs no mark on the next boot either")
	}
	f.Resumed, f.RunBootID = true, bootNow // resumed, then the daemon dies again
	if !NeedsRestartMark(nil, f, "boot-third") {
		t.Fatal("a resumed run interrupted again needs a new mark")
	}
	w := Facts{RunID: "r", RunBootID: bootOld, Waiting: true, Token: TokenLive, WaitDeadline: tPast}
	if NeedsRestartMark(nil, w, bootNow) {
		t.Fatal("a waiting run is not interrupted by a restart")
	}
	if !NeedsWaitTimeout(nil, w, tNow) {
		t.Fatal("an overdue wait needs a timeout")
	}
	w.Interrupted, w.InterruptReason, w.Token = true, ReasonWaitTimeout, TokenExpired
	if NeedsWaitTimeout(nil, w, tNow) {
		t.Fatal("a timed-out wait needs no second timeout")
	}
}

func ExampleDerive() {
	f := Facts{RunID: "r1", RunBootID: "boot-1"}
	fmt.Println(Derive(nil, f, "boot-1", time.Now()))
	fmt.Println(Derive(nil, f, "boot-2", time.Now()))
	// Output:
	// running
	// interrupted_startup
}

// TestEarlierClaimInterrupts: on a cluster store a run is interrupted when
// the agent was claimed again since its turn began, even by the same
// daemon (same boot id: it lost its lease and claimed the agent back); a
// run of the current claim is not. The mark is appended once.
func TestEarlierClaimInterrupts(t *testing.T) {
	own := Facts{RunID: "r", RunBootID: bootNow}
	if NeedsRestartMark(nil, own, bootNow) || Derive(nil, own, bootNow, tNow) != StatusRunning {
		t.Fatal("a run of the current claim and boot is running, not interrupted")
	}
	reclaimed := Facts{RunID: "r", RunBootID: bootNow, EarlierClaim: true}
	if !NeedsRestartMark(nil, reclaimed, bootNow) {
		t.Fatal("a run begun under an earlier claim needs a mark, whatever the boot")
	}
	if got := Derive(nil, reclaimed, bootNow, tNow); got != StatusInterruptedStartup {
		t.Fatalf("run under an earlier claim: %s, want %s", got, StatusInterruptedStartup)
	}
	reclaimed.Interrupted, reclaimed.InterruptReason = true, ReasonProcessRestart
	if NeedsRestartMark(nil, reclaimed, bootNow) {
		t.Fatal("a marked run needs no second mark")
	}
	waiting := Facts{RunID: "r", RunBootID: bootNow, EarlierClaim: true, Waiting: true, Token: TokenLive}
	if NeedsRestartMark(nil, waiting, bootNow) {
		t.Fatal("a waiting run is not interrupted by a claim")
	}
}
