package main

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestScanTakeFrameMatchesEncodingJSON(t *testing.T) {
	frames := []string{
		`{"attempts":0,"budgets":[{"cost":1,"key":"a-multi-wif"},{"cost":1,"key":"a-multi-tb"}],"dequeued_at":1764467000123,` +
			`"id":"0abcdefghijklmnopqrstuvw","payload":{"s":41,"t":123456789,"x":"pad \"quoted\" ]}"},"priority":32768,"queue":"q","ready_at":1,"status":"in_flight","type":"bench"}`,
		`{"id":"0abc","payload":{"t":5},"dequeued_at":null}`,
		` { "payload" : { "s" : -3 , "t" : 0 } , "id" : "x" } `,
		`{"id":"x","payload":[1,2],"dequeued_at":7}`,
	}
	for _, line := range frames {
		var want takeFrame
		wantErr := json.Unmarshal([]byte(line), &want)
		got, err := decodeTakeFrame([]byte(line))
		if (err == nil) != (wantErr == nil) || !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\n got %+v (%v)\nwant %+v (%v)", line, got, err, want, wantErr)
		}
	}
	var f takeFrame
	if err := scanTakeFrame([]byte(frames[0]), &f); err != nil {
		t.Errorf("the scanner does not follow a usual frame: %v", err)
	}
}

func TestScanEnqueueReply(t *testing.T) {
	view := `{"id":"ID%d","payload":{"s":"a,b]}"},"budgets":[{"key":"k","cost":1}]}`
	var b strings.Builder
	b.WriteString(`{"jobs":[`)
	for i := range 3 {
		if i > 0 {
			b.WriteString(",")
		}
		b.WriteString(strings.Replace(view, "%d", string(rune('0'+i)), 1))
	}
	b.WriteString(`]}`)
	n, last, err := scanEnqueueReply([]byte(b.String()))
	if err != nil || n != 3 || last != "ID2" {
		t.Fatalf("got %d jobs, last %q, err %v; want 3, ID2", n, last, err)
	}
	if n, _, err := scanEnqueueReply([]byte(`{"jobs":[]}`)); err != nil || n != 0 {
		t.Fatalf("empty reply: %d, %v", n, err)
	}
	for _, bad := range []string{`{"jobs":[{"id":"a"}`, `{"jobs":{"id":"a"}}`, `{"jobs":[{"id":"a\u0041"}]}`} {
		if _, _, err := scanEnqueueReply([]byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}
