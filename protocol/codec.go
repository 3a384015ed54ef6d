package protocol

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strconv"
	"unicode/utf8"

	"github.com/vmihailenco/msgpack/v5"
	"github.com/vmihailenco/msgpack/v5/msgpcode"
)

// Format is a body encoding.
type Format int

// The two body formats of SPEC §1.2.
const (
	JSON Format = iota
	Msgpack
)

// String names the format as error texts do ("JSON", "MessagePack").
func (f Format) String() string {
	if f == Msgpack {
		return "MessagePack"
	}
	return "JSON"
}

// ContentType is the response Content-Type of the format.
func (f Format) ContentType() string {
	if f == Msgpack {
		return "application/msgpack"
	}
	return "application/json"
}

// maxNesting bounds the depth of decoded values.
const maxNesting = 256

// Decode decodes a request body in format f into v. msgpack bodies are first
// transcoded to JSON (rejecting bin and ext values), so both formats share one
// set of decoding and validation rules. Errors are CodeInvalid with the
// texts of SPEC §1.5 ("invalid JSON: ..." / "invalid MessagePack: ...").
func Decode(f Format, body []byte, v any) error {
	if f == Msgpack {
		js, err := MsgpackToJSON(body)
		if err != nil {
			return Invalid("invalid MessagePack: %s", err.Error())
		}
		body = js
	}
	if err := decodeJSON(body, v); err != nil {
		return Invalid("invalid %s: %s", f, err.Error())
	}
	return nil
}

func decodeJSON(body []byte, v any) error {
	if len(bytes.TrimSpace(body)) == 0 {
		return errors.New("EOF while parsing a value")
	}
	// Fastest path: the usual enqueue shapes, without reflection
	// (fastdecode.go); it gives up on anything unusual.
	if fastDecode(body, v) {
		if r, ok := v.(interface{ checkRequired() error }); ok {
			return r.checkRequired()
		}
		return nil
	}
	// Fast path: a body json.Unmarshal accepts is one valid value with at
	// most whitespace after it, which the decoder below decodes the same
	// way; Unmarshal does it without copying the body into a decoder
	// buffer. Any failure starts over on the decoder for its exact error.
	if err := json.Unmarshal(body, v); err == nil {
		if err := CheckCanonical(body, ""); err != nil {
			return err
		}
		if r, ok := v.(interface{ checkRequired() error }); ok {
			return r.checkRequired()
		}
		return nil
	}
	if rv := reflect.ValueOf(v); rv.Kind() == reflect.Pointer && !rv.IsNil() {
		rv.Elem().Set(reflect.Zero(rv.Elem().Type()))
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	if err := dec.Decode(v); err != nil {
		return cleanJSONError(err)
	}
	// Decoder.More is false before '}' and ']', so look at the rest itself
	if len(bytes.TrimLeft(body[dec.InputOffset():], " \t\n\r")) > 0 {
		return errors.New("trailing characters")
	}
	if err := CheckCanonical(body, ""); err != nil {
		return err
	}
	if r, ok := v.(interface{ checkRequired() error }); ok {
		return r.checkRequired()
	}
	return nil
}

func cleanJSONError(err error) error {
	var ute *json.UnmarshalTypeError
	if errors.As(err, &ute) {
		field := ute.Field
		if field == "" {
			return fmt.Errorf("invalid type: %s, expected %s", ute.Value, ute.Type)
		}
		return fmt.Errorf("field '%s': invalid value %s, expected %s", field, ute.Value, ute.Type)
	}
	return err
}

// Encode encodes v as a response body in format f.
func Encode(f Format, v any) ([]byte, error) {
	if f == Msgpack {
		return MarshalMsgpack(v)
	}
	switch x := v.(type) {
	case *JobView:
		return AppendJobViewJSON(make([]byte, 0, 256+jobViewPayloadLen(x)), x)
	case JSONAppender:
		return x.AppendJSON(nil)
	}
	return json.Marshal(v)
}

// JSONAppender is a response body that writes its own JSON, byte for byte
// what json.Marshal would write, without reflection.
type JSONAppender interface {
	AppendJSON(dst []byte) ([]byte, error)
}

// AppendJobViewsJSON appends a JSON array of views as json.Marshal writes
// a []*JobView (null for a nil slice).
func AppendJobViewsJSON(dst []byte, views []*JobView) ([]byte, error) {
	if views == nil {
		return append(dst, "null"...), nil
	}
	dst = append(dst, '[')
	var err error
	for i, v := range views {
		if i > 0 {
			dst = append(dst, ',')
		}
		if dst, err = AppendJobViewJSON(dst, v); err != nil {
			return dst, err
		}
	}
	return append(dst, ']'), nil
}

// MarshalMsgpack encodes v with string-keyed maps and the smallest integer
// encodings (SPEC §1.3).
func MarshalMsgpack(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := msgpack.NewEncoder(&buf)
	enc.UseCompactInts(true)
	enc.UseCompactFloats(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// MsgpackToJSON transcodes one msgpack value to compact JSON. Integers keep
// their exact value, floats keep a fraction or exponent so they stay floats,
// maps must have string keys, and bin/ext values are refused.
func MsgpackToJSON(b []byte) ([]byte, error) {
	dec := msgpack.NewDecoder(bytes.NewReader(b))
	var out bytes.Buffer
	out.Grow(len(b) + len(b)/2)
	if err := transcodeValue(dec, &out, 0); err != nil {
		return nil, err
	}
	if _, err := dec.PeekCode(); err == nil {
		return nil, errors.New("trailing bytes after the value")
	}
	return out.Bytes(), nil
}

func transcodeValue(dec *msgpack.Decoder, out *bytes.Buffer, depth int) error {
	if depth > maxNesting {
		return errors.New("value nested too deeply")
	}
	c, err := dec.PeekCode()
	if err != nil {
		return fmt.Errorf("unexpected end of input")
	}
	switch {
	case c == msgpcode.Nil:
		_ = dec.Skip()
		out.WriteString("null")
	case c == msgpcode.True || c == msgpcode.False:
		v, err := dec.DecodeBool()
		if err != nil {
			return err
		}
		out.WriteString(strconv.FormatBool(v))
	case msgpcode.IsFixedNum(c) || c == msgpcode.Int8 || c == msgpcode.Int16 || c == msgpcode.Int32 || c == msgpcode.Int64:
		v, err := dec.DecodeInt64()
		if err != nil {
			return err
		}
		out.WriteString(strconv.FormatInt(v, 10))
	case c == msgpcode.Uint8 || c == msgpcode.Uint16 || c == msgpcode.Uint32 || c == msgpcode.Uint64:
		v, err := dec.DecodeUint64()
		if err != nil {
			return err
		}
		out.WriteString(strconv.FormatUint(v, 10))
	case c == msgpcode.Float || c == msgpcode.Double:
		v, err := dec.DecodeFloat64()
		if err != nil {
			return err
		}
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return errors.New("NaN and infinite floats cannot be represented")
		}
		out.Write(appendFloat(nil, v))
	case msgpcode.IsString(c):
		s, err := dec.DecodeString()
		if err != nil {
			return err
		}
		writeJSONString(out, s)
	case msgpcode.IsBin(c):
		return errors.New("binary values cannot be represented")
	case msgpcode.IsExt(c):
		return errors.New("extension values cannot be represented")
	case msgpcode.IsFixedArray(c) || c == msgpcode.Array16 || c == msgpcode.Array32:
		n, err := dec.DecodeArrayLen()
		if err != nil {
			return err
		}
		out.WriteByte('[')
		for i := 0; i < n; i++ {
			if i > 0 {
				out.WriteByte(',')
			}
			if err := transcodeValue(dec, out, depth+1); err != nil {
				return err
			}
		}
		out.WriteByte(']')
	case msgpcode.IsFixedMap(c) || c == msgpcode.Map16 || c == msgpcode.Map32:
		n, err := dec.DecodeMapLen()
		if err != nil {
			return err
		}
		out.WriteByte('{')
		for i := 0; i < n; i++ {
			if i > 0 {
				out.WriteByte(',')
			}
			kc, err := dec.PeekCode()
			if err != nil {
				return errors.New("unexpected end of input")
			}
			if !msgpcode.IsString(kc) {
				return errors.New("map keys must be strings")
			}
			k, err := dec.DecodeString()
			if err != nil {
				return err
			}
			writeJSONString(out, k)
			out.WriteByte(':')
			if err := transcodeValue(dec, out, depth+1); err != nil {
				return err
			}
		}
		out.WriteByte('}')
	default:
		return fmt.Errorf("unsupported msgpack code 0x%02x", c)
	}
	return nil
}

// appendFloat formats a float so that JSON readers still see a float.
func appendFloat(dst []byte, v float64) []byte {
	start := len(dst)
	dst = strconv.AppendFloat(dst, v, 'g', -1, 64)
	if !bytes.ContainsAny(dst[start:], ".eE") {
		dst = append(dst, '.', '0')
	}
	return dst
}

// writeJSONString writes s as a JSON string. Bytes that are not UTF-8 are
// written as they are (json.Marshal would turn them into U+FFFD), so that
// CheckCanonical refuses a msgpack string the way it refuses a JSON one.
func writeJSONString(out *bytes.Buffer, s string) {
	if utf8.ValidString(s) {
		b, _ := json.Marshal(s)
		out.Write(b)
		return
	}
	out.WriteByte('"')
	for len(s) > 0 {
		n := 0
		for n < len(s) {
			r, size := utf8.DecodeRuneInString(s[n:])
			if r == utf8.RuneError && size == 1 {
				break
			}
			n += size
		}
		if n > 0 {
			b, _ := json.Marshal(s[:n])
			out.Write(b[1 : len(b)-1])
		}
		if n < len(s) {
			out.WriteByte(s[n]) // the invalid byte, raw
			n++
		}
		s = s[n:]
	}
	out.WriteByte('"')
}

func encodeJSONValue(enc *msgpack.Encoder, js []byte) error {
	dec := json.NewDecoder(bytes.NewReader(js))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return err
	}
	return encodeAny(enc, v)
}

func encodeAny(enc *msgpack.Encoder, v any) error {
	switch x := v.(type) {
	case nil:
		return enc.EncodeNil()
	case bool:
		return enc.EncodeBool(x)
	case string:
		return enc.EncodeString(x)
	case json.Number:
		s := string(x)
		if !bytes.ContainsAny([]byte(s), ".eE") {
			if i, err := strconv.ParseInt(s, 10, 64); err == nil {
				return enc.EncodeInt(i)
			}
			if u, err := strconv.ParseUint(s, 10, 64); err == nil {
				return enc.EncodeUint(u)
			}
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return err
		}
		return enc.EncodeFloat64(f)
	case []any:
		if err := enc.EncodeArrayLen(len(x)); err != nil {
			return err
		}
		for _, e := range x {
			if err := encodeAny(enc, e); err != nil {
				return err
			}
		}
		return nil
	case map[string]any:
		if err := enc.EncodeMapLen(len(x)); err != nil {
			return err
		}
		for _, k := range sortedKeys(x) {
			if err := enc.EncodeString(k); err != nil {
				return err
			}
			if err := encodeAny(enc, x[k]); err != nil {
				return err
			}
		}
		return nil
	}
	return fmt.Errorf("unexpected JSON value %T", v)
}

// Payload is a job payload held as compact canonical JSON. JSON bodies keep
// it as written (compacted, numbers exact); msgpack bodies are transcoded to
// it. It encodes back to either format.
type Payload []byte

// UnmarshalJSON stores a compacted copy of the value ("null" included, so a
// present null payload is distinguishable from an absent one).
func (p *Payload) UnmarshalJSON(b []byte) error {
	// The decoder hands over a valid value: without whitespace bytes it is
	// already compact (json.Compact would return it unchanged).
	if len(b) > 0 && !bytes.ContainsAny(b, " \t\n\r") {
		*p = append(Payload(make([]byte, 0, len(b))), b...)
		return nil
	}
	var buf bytes.Buffer
	if err := json.Compact(&buf, b); err != nil {
		return err
	}
	*p = Payload(buf.Bytes())
	return nil
}

// MarshalJSON writes the stored JSON as is.
func (p Payload) MarshalJSON() ([]byte, error) {
	if len(p) == 0 {
		return []byte("null"), nil
	}
	return p, nil
}

var _ msgpack.CustomEncoder = Payload(nil)
var _ msgpack.CustomDecoder = (*Payload)(nil)

// EncodeMsgpack writes the payload as a msgpack value (wire responses).
func (p Payload) EncodeMsgpack(enc *msgpack.Encoder) error {
	if len(p) == 0 {
		return enc.EncodeNil()
	}
	return encodeJSONValue(enc, p)
}

// DecodeMsgpack reads a msgpack value into canonical JSON.
func (p *Payload) DecodeMsgpack(dec *msgpack.Decoder) error {
	raw, err := dec.DecodeRaw()
	if err != nil {
		return err
	}
	js, err := MsgpackToJSON(raw)
	if err != nil {
		return err
	}
	*p = Payload(js)
	return nil
}
