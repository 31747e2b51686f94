package expr

import (
	"fmt"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/ast"
	"github.com/google/cel-go/common/types"
)

// sizes is the static cost estimate's view of what it cannot know: every
// list, map and string whose size the expression does not fix (a param, a
// step's output, what a function makes of them) holds at most AssumedSize
// items or bytes. So the estimate refuses what is costly whatever the
// inputs (lists.range(30000000), seven nested maps over ten items, three
// over a param); what only large inputs make costly is stopped by the
// meter at run time.
type sizes struct{}

func (sizes) EstimateSize(checker.AstNode) *checker.SizeEstimate {
	return &checker.SizeEstimate{Min: 0, Max: AssumedSize}
}

// EstimateCallCost prices lists.range, which cel-go does not: by its
// argument when that is a number written in the expression.
func (sizes) EstimateCallCost(_, overloadID string, _ *checker.AstNode, args []checker.AstNode) *checker.CallEstimate {
	if overloadID != "lists_range" || len(args) != 1 {
		return nil
	}
	n := uint64(AssumedSize)
	min := uint64(0)
	if e := args[0].Expr(); e.Kind() == ast.LiteralKind {
		if v, ok := e.AsLiteral().(types.Int); ok {
			n = 0
			if v > 0 {
				n = uint64(v)
			}
			min = n
		}
	}
	return &checker.CallEstimate{
		CostEstimate: checker.CostEstimate{Min: 1 + min, Max: 1 + n},
		ResultSize:   &checker.SizeEstimate{Min: min, Max: n},
	}
}

// estimate is the most an expression may cost (see sizes), refusing one
// whose estimate is over CostLimit. Without an estimate it is taken at
// CostLimit, which the meter holds it to at run time.
func estimate(a *cel.Ast) (uint64, error) {
	e, err := environment()
	if err != nil {
		return 0, err
	}
	est, err := e.EstimateCost(a, sizes{})
	if err != nil {
		return CostLimit, nil
	}
	if est.Max > CostLimit {
		return 0, &Error{Msg: fmt.Sprintf("it may cost up to %s operations, more than one evaluation may spend (%d); lists, maps and strings it cannot size are taken as %d items or bytes", costString(est.Max), CostLimit, AssumedSize)}
	}
	return est.Max, nil
}

func costString(n uint64) string {
	if n == ^uint64(0) {
		return "unbounded"
	}
	return fmt.Sprint(n)
}
