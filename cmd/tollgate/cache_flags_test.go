package main

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/tollgate/tollgate/cmd/tollgate/internal/apitest"
	"github.com/tollgate/tollgate/cmd/tollgate/internal/servertest"
)

// TestNoCaches: with both caches off, every payload is read from the store
// when its job is written to a stream, alone or from its group, and
// arrives whole.
func TestNoCaches(t *testing.T) {
	s := servertest.Start(t, "--payload-cache-size", "0", "--group-cache-size", "0")
	var jobs []map[string]any
	for i := range 10 {
		jobs = append(jobs, map[string]any{"type": "t", "queue": "q", "payload": map[string]any{"i": i}})
	}
	ids := budEnqueueBulk(t, s, jobs...)                                                                                      // one request: a group
	ids = append(ids, budEnqueueBulk(t, s, map[string]any{"type": "t", "queue": "q", "payload": map[string]any{"i": 10}})...) // alone
	take := apitest.OpenTake(t, s.URL, apitest.TakeOpts{Query: "queue=q&prefetch=20"})
	for i, id := range ids {
		j := take.NextJob(t, 10*time.Second)
		require.Equal(t, id, j.ID)
		require.Equal(t, map[string]any{"i": json.Number(strconv.Itoa(i))}, j.Payload, "job %d", i)
	}
}
