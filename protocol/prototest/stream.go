// Package prototest holds what only tests need of the wire format: a reader
// for the length-prefixed msgpack take stream (the server only writes it).
package prototest

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
)

// MaxFrameBytes bounds one msgpack-stream frame ReadMsgpackFrame accepts.
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
