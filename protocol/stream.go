package protocol

import (
	"encoding/binary"
)

// StreamFormat is the framing of a take stream (SPEC §1.4).
type StreamFormat int

// The three take-stream framings.
const (
	StreamNDJSON StreamFormat = iota
	StreamMsgpack
	StreamSSE
)

// ContentType is the response Content-Type of the stream format.
func (f StreamFormat) ContentType() string {
	switch f {
	case StreamMsgpack:
		return "application/vnd.zizq.msgpack-stream"
	case StreamSSE:
		return "text/event-stream"
	}
	return "application/x-ndjson"
}

// AppendFrame appends one job frame to dst.
func (f StreamFormat) AppendFrame(dst []byte, v *JobView) ([]byte, error) {
	switch f {
	case StreamMsgpack:
		b, err := MarshalMsgpack(v)
		if err != nil {
			return dst, err
		}
		dst = binary.BigEndian.AppendUint32(dst, uint32(len(b)))
		return append(dst, b...), nil
	case StreamSSE:
		start := len(dst)
		dst = append(dst, "data: "...)
		dst, err := AppendJobViewJSON(dst, v)
		if err != nil {
			return dst[:start], err
		}
		return append(dst, '\n', '\n'), nil
	}
	start := len(dst)
	dst, err := AppendJobViewJSON(dst, v)
	if err != nil {
		return dst[:start], err
	}
	return append(dst, '\n'), nil
}

// Heartbeat is the stream format's keep-alive frame.
func (f StreamFormat) Heartbeat() []byte {
	switch f {
	case StreamMsgpack:
		return []byte{0, 0, 0, 0}
	case StreamSSE:
		return []byte(":heartbeat\n\n")
	}
	return []byte("\n")
}
