package protocol

// Waiting is the additive `waiting` field of GET /jobs/{id} for a ready job
// that is parked on a budget: which budget holds it back, its place in that
// budget's line (from 1) and, for time_based budgets, when the tokens for it
// and every job ahead of it are expected to have dripped in (Unix ms).
type Waiting struct {
	AffordableAt uint64 `json:"affordable_at,omitempty" msgpack:"affordable_at,omitempty"`
	Budget       string `json:"budget" msgpack:"budget"`
	Cost         uint32 `json:"cost" msgpack:"cost"`
	Position     int    `json:"position" msgpack:"position"`
}
