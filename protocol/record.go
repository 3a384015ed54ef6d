package protocol

import (
	"bytes"
	"fmt"

	"github.com/vmihailenco/msgpack/v5"
)

// RecordVersion is the schema-version byte every stored value begins with.
const RecordVersion byte = 1

// MarshalRecord encodes a stored value: version byte, then msgpack.
func MarshalRecord(v any) ([]byte, error) {
	if j, ok := v.(*Job); ok && j != nil {
		return AppendJobRecord(make([]byte, 0, jobRecordSize(j)), j), nil
	}
	var buf bytes.Buffer
	buf.WriteByte(RecordVersion)
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// UnmarshalRecord decodes a stored value written by MarshalRecord. Unknown
// fields are ignored, for forward compatibility.
func UnmarshalRecord(b []byte, v any) error {
	if len(b) == 0 {
		return fmt.Errorf("empty record")
	}
	if b[0] != RecordVersion {
		return fmt.Errorf("unknown record version %d", b[0])
	}
	return msgpack.Unmarshal(b[1:], v)
}
