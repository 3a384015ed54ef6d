package prototest

import (
	"io"
	"testing"

	"github.com/tollgate/tollgate/protocol"
)

// FuzzMsgpackStreamFraming feeds arbitrary bytes, and valid frames split at
// a random point, to the length-prefixed frame reader.
func FuzzMsgpackStreamFraming(f *testing.F) {
	frame, _ := protocol.StreamMsgpack.AppendFrame(nil, &protocol.JobView{ID: "03fr1jkpcsipbsckqj0y6pgr7", Type: "t", Queue: "q", Status: protocol.StatusInFlight})
	two := append(append([]byte{}, frame...), 0, 0, 0, 0)
	two = append(two, frame...)
	f.Add(two, uint(3))
	f.Add([]byte{0, 0, 0, 5, 1}, uint(2))
	f.Add([]byte{0xff, 0xff, 0xff, 0xff}, uint(0))
	f.Fuzz(func(t *testing.T, data []byte, split uint) {
		if len(data) > 0 {
			split %= uint(len(data))
		}
		r := &splitReader{data: data, split: int(split)}
		for i := 0; i < 1000; i++ {
			b, err := ReadMsgpackFrame(r)
			if err != nil {
				return
			}
			if len(b) == 0 {
				continue // heartbeat
			}
			// decode the frame the way the server decodes msgpack bodies; a
			// generic msgpack.Unmarshal into a map trusts a map32 header's
			// length and allocates for it, which this target once found
			_, _ = protocol.MsgpackToJSON(b)
		}
	})
}

// splitReader returns data in two reads split at split.
type splitReader struct {
	data  []byte
	split int
	pos   int
}

func (r *splitReader) Read(p []byte) (int, error) {
	if r.pos >= len(r.data) {
		return 0, io.EOF
	}
	end := len(r.data)
	if r.pos < r.split {
		end = r.split
	}
	n := copy(p, r.data[r.pos:end])
	r.pos += n
	return n, nil
}
