package projection

import (
	"fmt"
	"testing"

	"github.com/leanovate/gopter"
	"github.com/leanovate/gopter/prop"

	"github.com/warren-dev/warren/history"
)

// history.Build folds the same events beside the projection (it keeps every
// completed turn with its calls' arguments, which the projection forgets):
// on generated valid logs the two agree on the open turn, that is on which
// run a restart would resume, with which prompt, and whether it was
// interrupted.
func TestHistoryOpenTurnAgreesWithTheFold(t *testing.T) {
	params := gopter.DefaultTestParametersWithSeed(12)
	params.MinSuccessfulTests = 300
	props := gopter.NewProperties(params)
	props.Property("history's open turn == the projection's open run", prop.ForAll(func(steps []step) string {
		es := entries(genLog(steps))
		p, err := foldLive(es)
		if err != nil {
			return "fold: " + err.Error()
		}
		hs := make([]history.Entry, len(es))
		for i, e := range es {
			hs[i] = history.Entry{Seq: e.Seq, Event: e.Event, Data: e.Data}
		}
		h, err := history.Build(hs)
		if err != nil {
			return "history: " + err.Error()
		}
		r, o := p.OpenRun(), h.Open
		switch {
		case r == nil && o == nil:
			return ""
		case r == nil || o == nil:
			return fmt.Sprintf("open run %+v, history's open turn %+v", r, o)
		case r.RunID != o.RunID || r.Turn != o.Turn || r.Prompt != o.Prompt || r.Interrupted != o.Interrupted || r.Reason != o.Reason:
			return fmt.Sprintf("open run %+v, history's open turn %+v", r, o)
		}
		return ""
	}, genSteps()))
	props.TestingRun(t)
}
