package engine

import (
	"context"
	"fmt"
	"testing"

	"github.com/warren-dev/warren/faultfs"
	"github.com/warren-dev/warren/provider/inproc"
	"github.com/warren-dev/warren/schema"
)

// BenchmarkBudgetCheck measures the check before a model request
// (budgetSpent) of the leaf of a chain 10 deep, each agent with two more
// children beside the chain (30 agents): with a budget on the root only,
// and on every agent of the chain (set by the operator, so the walk goes
// to the root and sums every subtree on the way):
//
//	go test -run '^$' -bench BudgetCheck ./engine/
func BenchmarkBudgetCheck(b *testing.B) {
	b.Run("root", func(b *testing.B) { benchBudgetCheck(b, false) })
	b.Run("every-level", func(b *testing.B) { benchBudgetCheck(b, true) })
}

func benchBudgetCheck(b *testing.B, every bool) {
	c := benchCore(b, "/home", faultfs.NewMem(), inproc.New("inproc", inproc.Options{}), 4, true)
	ctx := context.Background()
	parent := ""
	var leaf string
	lim := int64(1 << 40)
	for depth := range 10 {
		spec := CreateSpec{Name: fmt.Sprintf("a%d", depth), ParentID: parent, Provider: "inproc", Model: "echo"}
		if every || depth == 0 {
			spec.Budget = &schema.BudgetSetData{Tokens: &lim}
		}
		id, err := c.CreateAgent(ctx, spec)
		if err != nil {
			b.Fatal(err)
		}
		for i := range 2 {
			if _, err := c.CreateAgent(ctx, CreateSpec{Name: fmt.Sprintf("s%d", i), ParentID: id, Provider: "inproc", Model: "echo"}); err != nil {
				b.Fatal(err)
			}
		}
		parent, leaf = id, id
	}
	a, _ := c.agent(leaf)
	b.ResetTimer()
	for b.Loop() {
		if why, _ := c.budgetSpent(a); why != "" {
			b.Fatal(why)
		}
	}
}
