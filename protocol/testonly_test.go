package protocol

import (
	"bytes"
	"math/big"

	"github.com/vmihailenco/msgpack/v5"
)

// JSONToMsgpack transcodes one JSON value to msgpack: integers that fit
// int64/uint64 become msgpack ints, other numbers float64.
func JSONToMsgpack(js []byte) ([]byte, error) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	if err := encodeJSONValue(enc, js); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// parseID decodes an ID's text into its 128-bit value.
func parseID(s string) (*big.Int, bool) {
	if !ValidID(s) {
		return nil, false
	}
	v, ok := new(big.Int).SetString(s, 36)
	return v, ok
}
