package main

import (
	"encoding/json"
	"errors"
	"strconv"
)

// The harness shares the machine with the server it measures, so it reads
// the few fields it needs from each take frame and enqueue reply with the
// small scanner below instead of decoding whole job objects through
// encoding/json: on 2 cores every CPU second the client spends is one the
// server does not get. Anything the scanner does not expect (an escape in
// an id, a malformed value) makes the caller fall back to encoding/json.

var errScan = errors.New("unexpected JSON")

// skipSpace returns the index of the first non-whitespace byte at or after i.
func skipSpace(b []byte, i int) int {
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// skipValue returns the index just past the JSON value starting at b[i]
// (after whitespace). It follows strings and nesting but does not validate
// scalars: the server's encoder is trusted for those.
func skipValue(b []byte, i int) (int, error) {
	i = skipSpace(b, i)
	depth := 0
	for i < len(b) {
		switch b[i] {
		case '"':
			i++
			for i < len(b) && b[i] != '"' {
				if b[i] == '\\' {
					i++
				}
				i++
			}
			if i >= len(b) {
				return 0, errScan
			}
			i++
			if depth == 0 {
				return i, nil
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			if depth == 0 {
				return i, nil // end of a scalar at the container's end
			}
			depth--
			if depth == 0 {
				return i + 1, nil
			}
		case ',', ' ', '\t', '\n', '\r':
			if depth == 0 {
				return i, nil
			}
		}
		i++
	}
	if depth == 0 {
		return i, nil
	}
	return 0, errScan
}

// objectFields calls fn with each key (without quotes, escapes refused)
// and raw value of the JSON object in b; fn returns false to stop early.
func objectFields(b []byte, fn func(key, raw []byte) bool) error {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return errScan
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return nil
	}
	for i < len(b) {
		key, next, err := plainString(b, i)
		if err != nil {
			return err
		}
		i = skipSpace(b, next)
		if i >= len(b) || b[i] != ':' {
			return errScan
		}
		start := skipSpace(b, i+1)
		end, err := skipValue(b, start)
		if err != nil || end == start {
			return errScan
		}
		if !fn(key, b[start:end]) {
			return nil
		}
		i = skipSpace(b, end)
		if i < len(b) && b[i] == '}' {
			return nil
		}
		if i >= len(b) || b[i] != ',' {
			return errScan
		}
		i = skipSpace(b, i+1)
	}
	return errScan
}

// plainString reads the string at b[i] (after whitespace), refusing escapes.
func plainString(b []byte, i int) (s []byte, next int, err error) {
	i = skipSpace(b, i)
	if i >= len(b) || b[i] != '"' {
		return nil, 0, errScan
	}
	for j := i + 1; j < len(b); j++ {
		switch b[j] {
		case '"':
			return b[i+1 : j], j + 1, nil
		case '\\':
			return nil, 0, errScan
		}
	}
	return nil, 0, errScan
}

// scanTakeFrame reads the fields of a take frame the worker uses.
func scanTakeFrame(line []byte, f *takeFrame) error {
	var failed error
	err := objectFields(line, func(key, raw []byte) bool {
		switch string(key) {
		case "id":
			s, _, err := plainString(raw, 0)
			if err != nil {
				failed = err
				return false
			}
			f.ID = string(s)
		case "dequeued_at":
			if string(raw) != "null" {
				f.DequeuedAt, failed = strconv.ParseInt(string(raw), 10, 64)
			}
		case "ready_at":
			if string(raw) != "null" {
				f.ReadyAt, failed = strconv.ParseInt(string(raw), 10, 64)
			}
		case "payload":
			failed = objectFields(raw, func(key, raw []byte) bool {
				var err error
				switch string(key) {
				case "s":
					var s int64
					if s, err = strconv.ParseInt(string(raw), 10, 64); err == nil {
						f.Payload.S = &s
					}
				case "t":
					f.Payload.T, err = strconv.ParseInt(string(raw), 10, 64)
				}
				if err != nil {
					failed = err
					return false
				}
				return true
			})
		}
		return failed == nil
	})
	if err == nil {
		err = failed
	}
	return err
}

// decodeTakeFrame reads a take frame with the scanner, or with
// encoding/json when the scanner does not follow it.
func decodeTakeFrame(line []byte) (takeFrame, error) {
	var f takeFrame
	if scanTakeFrame(line, &f) == nil {
		return f, nil
	}
	f = takeFrame{}
	err := json.Unmarshal(line, &f)
	return f, err
}

// scanEnqueueReply returns the number of jobs in a bulk enqueue reply
// ({"jobs":[...]}) and the id of the last one.
func scanEnqueueReply(body []byte) (n int, lastID string, err error) {
	var failed error
	err = objectFields(body, func(key, raw []byte) bool {
		if string(key) != "jobs" {
			return true
		}
		i := skipSpace(raw, 0)
		if i >= len(raw) || raw[i] != '[' {
			failed = errScan
			return false
		}
		i = skipSpace(raw, i+1)
		if i < len(raw) && raw[i] == ']' {
			return false
		}
		var last []byte
		for i < len(raw) {
			end, err := skipValue(raw, i)
			if err != nil || end == i {
				failed = errScan
				return false
			}
			n++
			last = raw[i:end]
			i = skipSpace(raw, end)
			if i < len(raw) && raw[i] == ']' {
				break
			}
			if i >= len(raw) || raw[i] != ',' {
				failed = errScan
				return false
			}
			i = skipSpace(raw, i+1)
		}
		var idErr error
		if err := objectFields(last, func(key, raw []byte) bool {
			if string(key) == "id" {
				var s []byte
				s, _, idErr = plainString(raw, 0)
				lastID = string(s)
				return false
			}
			return true
		}); err != nil {
			idErr = err
		}
		failed = idErr
		return false
	})
	if err == nil {
		err = failed
	}
	return n, lastID, err
}
