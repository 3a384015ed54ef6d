package protocol

import (
	"bytes"
	"math/rand"
	"strings"
	"testing"

	"github.com/vmihailenco/msgpack/v5"
)

// reflectRecord is MarshalRecord through the reflective msgpack encoder,
// the reference AppendJobRecord must match byte for byte.
func reflectRecord(t testing.TB, v any) []byte {
	var buf bytes.Buffer
	buf.WriteByte(RecordVersion)
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func randString(r *rand.Rand) string {
	lens := []int{0, 1, 5, 31, 32, 33, 200, 255, 256, 300, 70000}
	n := lens[r.Intn(len(lens))]
	if r.Intn(3) > 0 {
		n = r.Intn(40)
	}
	alphabet := "abcXYZ09-_/ é\"\\<>&\n\u2028"
	var sb strings.Builder
	for sb.Len() < n {
		sb.WriteByte(alphabet[r.Intn(len(alphabet))])
	}
	return sb.String()
}

func randUint(r *rand.Rand) uint64 {
	switch r.Intn(7) {
	case 0:
		return 0
	case 1:
		return uint64(r.Intn(128))
	case 2:
		return 127 + uint64(r.Intn(3))
	case 3:
		return 255 + uint64(r.Intn(3))
	case 4:
		return 65535 + uint64(r.Intn(3))
	case 5:
		return 1<<32 - 1 + uint64(r.Intn(3))
	}
	return r.Uint64()
}

// randJob builds a job with every optional field set or not at random.
func randJob(r *rand.Rand) *Job {
	statuses := []Status{StatusScheduled, StatusReady, StatusInFlight, StatusCompleted, StatusDead}
	j := &Job{
		ID:       randString(r),
		Type:     randString(r),
		Queue:    randString(r),
		Priority: uint16(randUint(r)),
		Status:   statuses[r.Intn(len(statuses))],
		ReadyAt:  randUint(r),
		Attempts: uint32(randUint(r)),
	}
	switch r.Intn(4) {
	case 0:
	case 1:
		j.Payload = []byte{}
	default:
		j.Payload = []byte(`{"p":"` + strings.Repeat("x", r.Intn(70000)) + `"}`)
	}
	if r.Intn(2) == 0 {
		v := uint32(randUint(r))
		j.RetryLimit = &v
	}
	if r.Intn(3) == 0 {
		j.Backoff = &Backoff{Exponent: r.Float64() * 10, BaseMs: uint32(randUint(r)), JitterMs: uint32(randUint(r))}
	}
	if r.Intn(3) == 0 {
		j.Retention = &Retention{}
		if r.Intn(2) == 0 {
			v := randUint(r)
			j.Retention.CompletedMs = &v
		}
		if r.Intn(2) == 0 {
			v := randUint(r)
			j.Retention.DeadMs = &v
		}
	}
	if r.Intn(2) == 0 {
		j.DequeuedAt = randUint(r)
	}
	if r.Intn(2) == 0 {
		j.FailedAt = randUint(r)
	}
	if r.Intn(2) == 0 {
		j.CompletedAt = randUint(r)
	}
	if r.Intn(2) == 0 {
		j.PurgeAt = randUint(r)
	}
	if r.Intn(2) == 0 {
		j.UniqueKey = randString(r)
	}
	if r.Intn(2) == 0 {
		j.UniqueWhile = randString(r)
	}
	if r.Intn(3) == 0 {
		j.Batch = &Batch{Key: randString(r), When: randString(r), Fold: randString(r)}
	}
	switch r.Intn(4) {
	case 0:
	case 1:
		j.Budgets = []Binding{}
	default:
		n := r.Intn(20)
		for i := 0; i < n; i++ {
			j.Budgets = append(j.Budgets, Binding{Cost: uint32(randUint(r)), Key: randString(r)})
		}
	}
	return j
}

func TestAppendJobRecordMatchesReflectiveEncoder(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	for i := 0; i < 2000; i++ {
		j := randJob(r)
		want := reflectRecord(t, j)
		got, err := MarshalRecord(j)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("job %d: record differs\n got %x\nwant %x", i, got, want)
		}
		var back Job
		if err := UnmarshalRecord(got, &back); err != nil {
			t.Fatalf("job %d: decode: %v", i, err)
		}
	}
	// The zero job too.
	if got, want := AppendJobRecord(nil, &Job{}), reflectRecord(t, &Job{}); !bytes.Equal(got, want) {
		t.Fatalf("zero job: got %x want %x", got, want)
	}
}
