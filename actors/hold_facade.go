package actors

import (
	"context"

	"github.com/tollgate/tollgate/protocol"
)

// HoldBudget holds a budget (SPEC §10.2) and returns its state once the
// hold is durable and applied.
func (e *Engine) HoldBudget(ctx context.Context, key string, req protocol.HoldRequest) (*BudgetState, error) {
	if err := e.whenLoaded(ctx); err != nil {
		return nil, err
	}
	if err := e.store.Admit(); err != nil {
		return nil, err
	}
	if _, err := e.call(ctx, &PutHold{Key: key, Req: req}); err != nil {
		return nil, err
	}
	return e.BudgetState(ctx, key)
}

// ReleaseBudget lifts a budget's hold.
func (e *Engine) ReleaseBudget(ctx context.Context, key string) error {
	if err := e.whenLoaded(ctx); err != nil {
		return err
	}
	_, err := e.call(ctx, &DeleteHold{Key: key})
	return err
}
