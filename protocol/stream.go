package protocol

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
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

// MaxFrameBytes bounds one msgpack-stream frame a reader accepts.
const MaxFrameBytes = 64 << 20

// ErrFrameTooLarge is returned by ReadMsgpackFrame for an oversized frame.
var ErrFrameTooLarge = errors.New("msgpack stream frame too large")

// ReadMsgpackFrame reads one length-prefixed frame; a heartbeat (length 0)
// returns an empty slice.
func ReadMsgpackFrame(r io.Reader) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if n > MaxFrameBytes {
		return nil, ErrFrameTooLarge
	}
	// Grow with the data actually read, so a lying header cannot make the
	// reader allocate megabytes up front.
	var buf bytes.Buffer
	if _, err := io.CopyN(&buf, r, int64(n)); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return buf.Bytes(), nil
}
