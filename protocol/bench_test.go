package protocol

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
)

func benchJob() *Job {
	return &Job{
		ID: "0000000000000000abcdef", Type: "bench", Queue: "q", Priority: DefaultPriority,
		Status: StatusInFlight, ReadyAt: 1700000000000, DequeuedAt: 1700000000001,
		Payload: []byte(`{"s":1,"t":1700000000000000000,"p":"` + strings.Repeat("x", 160) + `"}`),
	}
}

// BenchmarkEncodeJobRecord is the stored-record encoding of one job.
func BenchmarkEncodeJobRecord(b *testing.B) {
	j := benchJob()
	b.ReportAllocs()
	size := 0
	for b.Loop() {
		rec, err := MarshalRecord(j)
		if err != nil {
			b.Fatal(err)
		}
		size = len(rec)
	}
	b.ReportMetric(float64(size), "bytes/record")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkDecodeJobRecord is the decoding of one stored record (startup).
func BenchmarkDecodeJobRecord(b *testing.B) {
	rec, err := MarshalRecord(benchJob())
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		var j Job
		if err := UnmarshalRecord(rec, &j); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkEncodeStreamFrame is one NDJSON take-stream frame.
func BenchmarkEncodeStreamFrame(b *testing.B) {
	v := benchJob().View(1700000000002, true)
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = StreamNDJSON.AppendFrame(buf[:0], v); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(len(buf)), "bytes/frame")
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "frames/s")
}

// BenchmarkEncodeStreamFrameMsgpack is one msgpack take-stream frame.
func BenchmarkEncodeStreamFrameMsgpack(b *testing.B) {
	v := benchJob().View(1700000000002, true)
	var buf []byte
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = StreamMsgpack.AppendFrame(buf[:0], v); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "frames/s")
}

// BenchmarkDecodeBulkEnqueue decodes a POST /jobs/bulk body of 1000 jobs;
// the metric is jobs decoded per second.
func BenchmarkDecodeBulkEnqueue(b *testing.B) {
	var sb strings.Builder
	sb.WriteString(`{"jobs":[`)
	for i := 0; i < 1000; i++ {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"type":"bench","queue":"q","payload":{"s":%d,"t":1700000000000000000,"p":"%s"}}`, i, strings.Repeat("x", 160))
	}
	sb.WriteString(`]}`)
	body := []byte(sb.String())
	b.SetBytes(int64(len(body)))
	b.ReportAllocs()
	for b.Loop() {
		var req BulkEnqueueRequest
		if err := Decode(JSON, body, &req); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)*1000/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkEncodeEnqueueViews encodes 1000 enqueue-response views as JSON.
func BenchmarkEncodeEnqueueViews(b *testing.B) {
	views := make([]*JobView, 1000)
	for i := range views {
		views[i] = benchJob().EnqueueView(1700000000002, false, false)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := AppendJobViewsJSON(nil, views); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)*1000/b.Elapsed().Seconds(), "views/s")
}

// BenchmarkEncodeJobRecordReflect is the reflective msgpack encoding
// AppendJobRecord replaced, for comparison.
func BenchmarkEncodeJobRecordReflect(b *testing.B) {
	j := benchJob()
	b.ReportAllocs()
	for b.Loop() {
		_ = reflectRecord(b, j)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "records/s")
}

// BenchmarkEncodeStreamFrameEncodingJSON is the encoding/json frame
// AppendJobViewJSON replaced (View allocated per job, as before), for
// comparison.
func BenchmarkEncodeStreamFrameEncodingJSON(b *testing.B) {
	j := benchJob()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(j.View(1700000000002, true)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "frames/s")
}
