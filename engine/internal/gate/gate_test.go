package gate

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/warren-dev/warren/eventlog"
	"github.com/warren-dev/warren/toolexec"
)

type fake struct {
	calls     []string
	appendErr error
}

// fakeAgent is agent id of the fake; its steps go to the fake's record.
type fakeAgent struct {
	f  *fake
	id string
}

func (f *fake) Agent(id string) (*fakeAgent, bool) { return &fakeAgent{f, id}, id == "c" }
func (a *fakeAgent) Append(event string, data any) (eventlog.Entry, error) {
	a.f.calls = append(a.f.calls, fmt.Sprintf("append %s %s %+v", a.id, event, data))
	return eventlog.Entry{}, a.f.appendErr
}
func (a *fakeAgent) SetPermit(p bool) {
	a.f.calls = append(a.f.calls, fmt.Sprintf("permit %s %v", a.id, p))
}
func (f *fake) Wake(a *fakeAgent) { f.calls = append(f.calls, "wake "+a.id) }

func (f *fake) want(t *testing.T, want ...string) {
	t.Helper()
	if !reflect.DeepEqual(f.calls, want) {
		t.Fatalf("steps:\n  %s\nwant:\n  %s", strings.Join(f.calls, "\n  "), strings.Join(want, "\n  "))
	}
	f.calls = nil
}

// A gate change is logged first and withdraws the permit; only ungating
// wakes; a permit is logged, granted, then wakes; a refused append
// changes nothing.
func TestGateAndPermit(t *testing.T) {
	f := &fake{}
	if err := Set[*fakeAgent](f, "c", "kid", true); err != nil {
		t.Fatal(err)
	}
	f.want(t, "append c tool.gate {Action:gate AgentName:kid}", "permit c false")
	if err := Set[*fakeAgent](f, "c", "kid", false); err != nil {
		t.Fatal(err)
	}
	f.want(t, "append c tool.gate {Action:ungate AgentName:kid}", "permit c false", "wake c")
	if err := Permit[*fakeAgent](f, "c", "kid"); err != nil {
		t.Fatal(err)
	}
	f.want(t, "append c tool.permit_turn {Action: AgentName:kid}", "permit c true", "wake c")

	f.appendErr = errors.New("disk full")
	if err := Set[*fakeAgent](f, "c", "kid", false); !errors.Is(err, f.appendErr) {
		t.Fatalf("Set = %v", err)
	}
	if err := Permit[*fakeAgent](f, "c", "kid"); !errors.Is(err, f.appendErr) {
		t.Fatalf("Permit = %v", err)
	}
	f.want(t, "append c tool.gate {Action:ungate AgentName:kid}", "append c tool.permit_turn {Action: AgentName:kid}")

	if err := Set[*fakeAgent](f, "x", "kid", false); !errors.Is(err, toolexec.ErrNoAgent) {
		t.Fatalf("Set for no agent = %v", err)
	}
	if err := Permit[*fakeAgent](f, "x", "kid"); !errors.Is(err, toolexec.ErrNoAgent) {
		t.Fatalf("Permit for no agent = %v", err)
	}
	f.want(t)
}
