package main

import (
	"io"
	"testing"

	"github.com/stretchr/testify/require"
)

// TestBudgetPoolsFlag: --budget-pools (SPEC §10.4) defaults to memory,
// takes durable from the flag or TOLLGATE_BUDGET_POOLS, and refuses other
// values naming the flag.
func TestBudgetPoolsFlag(t *testing.T) {
	cfg, err := parseServe(nil, io.Discard)
	require.NoError(t, err)
	require.Equal(t, "memory", cfg.BudgetPools)

	cfg, err = parseServe([]string{"--budget-pools", "durable"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, "durable", cfg.BudgetPools)

	t.Setenv("TOLLGATE_BUDGET_POOLS", "durable")
	cfg, err = parseServe(nil, io.Discard)
	require.NoError(t, err)
	require.Equal(t, "durable", cfg.BudgetPools)
	cfg, err = parseServe([]string{"--budget-pools=memory"}, io.Discard)
	require.NoError(t, err)
	require.Equal(t, "memory", cfg.BudgetPools, "the flag wins over the variable")

	for _, bad := range []string{"Durable", "disk", ""} {
		_, err := parseServe([]string{"--budget-pools", bad}, io.Discard)
		require.ErrorContains(t, err, "--budget-pools", "%q", bad)
	}
}
