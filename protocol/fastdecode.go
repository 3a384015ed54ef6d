package protocol

import "bytes"

// This file decodes the common shapes of enqueue requests (POST /jobs and
// POST /jobs/bulk) and bulk acks (POST /jobs/success) without reflection. It accepts a strict subset of what
// encoding/json accepts and gives up (ok == false) on anything else:
// strings with escapes or non-ASCII bytes, keys it does not know or sees
// twice, null, the backoff, retention and batch objects, and numbers that
// are not plain decimal integers in range (negative ones included).
// create_with is decoded (allocation, strategy: type, duration_ms, burst):
// many-budgets workloads make their budgets with it on every job. A payload
// beyond the canonical limits (CheckCanonical) also makes it give up. On giving up the
// caller decodes the body with encoding/json as before, which then yields
// the same value or its exact error; FuzzFastDecodeMatchesEncodingJSON
// checks that whatever this decoder accepts, encoding/json decodes to the
// same value.

// fastDecode decodes body into v when v is an enqueue request and the body
// has a shape this decoder knows. It reports whether it did; v is only
// written when it did.
func fastDecode(body []byte, v any) bool {
	d := fastDecoder{s: body}
	switch r := v.(type) {
	case *BulkEnqueueRequest:
		jobs, ok := d.bulk()
		if !ok {
			return false
		}
		*r = BulkEnqueueRequest{Jobs: jobs}
		return true
	case *EnqueueRequest:
		j, ok := d.job()
		if !ok || !d.end() {
			return false
		}
		*r = j.req
		return true
	case *AckManyRequest:
		ids, ok := d.ackMany()
		if !ok {
			return false
		}
		*r = AckManyRequest{IDs: ids}
		return true
	}
	return false
}

// ackMany decodes {"ids":["...", ...]} and nothing else.
func (d *fastDecoder) ackMany() ([]string, bool) {
	ids := []string{}
	ok := d.soleField("ids", func() bool {
		return d.array(func() bool {
			id, ok := d.plainString()
			ids = append(ids, string(id))
			return ok
		})
	})
	return ids, ok
}

// fastDecoder is a cursor over a JSON body plus a cache of the short names
// (types, queues, budget keys) seen in it: a bulk of a thousand jobs usually
// repeats a few of them, and each distinct one is allocated once.
type fastDecoder struct {
	s     []byte
	i     int
	names map[string]string
	// the bindings of a bulk's jobs are carved from these slabs rather
	// than allocated one by one (bindings)
	bindingSlab []fastBinding
	listSlab    []*BindingRequest
	scratch     []*BindingRequest
	// lastBindings is the raw "budgets" value of the previous job that had
	// one, and its decoded list: the jobs of a bulk often repeat it, and a
	// repeat shares the list (requests are only read).
	lastBindingsRaw []byte
	lastBindings    []*BindingRequest
}

// bindingSlabLen is how many bindings a slab chunk holds.
const bindingSlabLen = 128

// fastJob holds an EnqueueRequest together with the values its pointer
// fields point to, so that one allocation serves them all.
type fastJob struct {
	req         EnqueueRequest
	typ, queue  string
	uniqueKey   string
	uniqueWhile string
	priority    uint16
	readyAt     uint64
	retryLimit  uint32
}

// fastBinding is a BindingRequest with the values it points to.
type fastBinding struct {
	req  BindingRequest
	key  string
	cost uint32
}

// the keys of a job object this decoder knows, as bits of a seen-mask
const (
	seenType = 1 << iota
	seenQueue
	seenPayload
	seenPriority
	seenReadyAt
	seenRetryLimit
	seenUniqueKey
	seenUniqueWhile
	seenBudgets
)

// bulk decodes {"jobs":[job, ...]} and nothing else.
func (d *fastDecoder) bulk() ([]*EnqueueRequest, bool) {
	jobs := []*EnqueueRequest{}
	ok := d.soleField("jobs", func() bool {
		return d.array(func() bool {
			j, ok := d.job()
			if ok {
				jobs = append(jobs, &j.req)
			}
			return ok
		})
	})
	return jobs, ok
}

// job decodes one job object.
func (d *fastDecoder) job() (*fastJob, bool) {
	j := &fastJob{}
	seen := 0
	ok := d.object(func(key []byte) bool {
		var bit int
		ok := false
		switch string(key) {
		case "type":
			bit = seenType
			j.typ, ok = d.name()
			j.req.Type = &j.typ
		case "queue":
			bit = seenQueue
			j.queue, ok = d.name()
			j.req.Queue = &j.queue
		case "payload":
			bit = seenPayload
			var raw []byte
			var spaced bool
			raw, spaced, ok = d.value()
			// a payload beyond the canonical limits is left to the
			// fallback, which names the rule it breaks
			ok = ok && CheckCanonical(raw, "") == nil
			if ok {
				if spaced {
					ok = j.req.Payload.UnmarshalJSON(raw) == nil
				} else {
					j.req.Payload = append(Payload(make([]byte, 0, len(raw))), raw...)
				}
			}
		case "priority":
			bit = seenPriority
			var n uint64
			n, ok = d.uint(1<<16 - 1)
			j.priority = uint16(n)
			j.req.Priority = &j.priority
		case "ready_at":
			bit = seenReadyAt
			j.readyAt, ok = d.uint(1<<64 - 1)
			j.req.ReadyAt = &j.readyAt
		case "retry_limit":
			bit = seenRetryLimit
			var n uint64
			n, ok = d.uint(1<<32 - 1)
			j.retryLimit = uint32(n)
			j.req.RetryLimit = &j.retryLimit
		case "unique_key":
			bit = seenUniqueKey
			var s []byte
			s, ok = d.plainString()
			j.uniqueKey = string(s)
			j.req.UniqueKey = &j.uniqueKey
		case "unique_while":
			bit = seenUniqueWhile
			j.uniqueWhile, ok = d.name()
			j.req.UniqueWhile = &j.uniqueWhile
		case "budgets":
			bit = seenBudgets
			j.req.Budgets, ok = d.repeatedBindings()
		default:
			return false
		}
		if !ok || seen&bit != 0 {
			return false
		}
		seen |= bit
		return true
	})
	return j, ok
}

// bindings decodes [{"key":..., "cost":...}, ...].
func (d *fastDecoder) bindings() ([]*BindingRequest, bool) {
	d.scratch = d.scratch[:0]
	ok := d.array(func() bool {
		b := d.newBinding()
		var seenKey, seenCost bool
		ok := d.object(func(key []byte) bool {
			var ok bool
			switch string(key) {
			case "key":
				if seenKey {
					return false
				}
				seenKey = true
				b.key, ok = d.name()
				b.req.Key = &b.key
			case "cost":
				if seenCost {
					return false
				}
				seenCost = true
				var n uint64
				n, ok = d.uint(1<<32 - 1)
				b.cost = uint32(n)
				b.req.Cost = &b.cost
			case "create_with":
				if b.req.CreateWith != nil {
					return false
				}
				b.req.CreateWith, ok = d.budget()
			}
			return ok
		})
		d.scratch = append(d.scratch, &b.req)
		return ok
	})
	return d.bindingList(d.scratch), ok
}

// repeatedBindings decodes a "budgets" value, or finds it a byte-for-byte
// repeat of the previous job's and returns that one's list. (A complete
// JSON value ends itself, so input that starts with one holds that value.)
func (d *fastDecoder) repeatedBindings() ([]*BindingRequest, bool) {
	d.skipSpace()
	if prev := d.lastBindingsRaw; len(prev) > 0 && bytes.HasPrefix(d.s[d.i:], prev) {
		d.i += len(prev)
		return d.lastBindings, true
	}
	start := d.i
	list, ok := d.bindings()
	if ok {
		d.lastBindingsRaw, d.lastBindings = d.s[start:d.i], list
	}
	return list, ok
}

// newBinding returns a zero fastBinding carved from the decoder's slab.
func (d *fastDecoder) newBinding() *fastBinding {
	if len(d.bindingSlab) == 0 {
		d.bindingSlab = make([]fastBinding, bindingSlabLen)
	}
	b := &d.bindingSlab[0]
	d.bindingSlab = d.bindingSlab[1:]
	return b
}

// bindingList copies list into a slice of its own, carved from the
// decoder's slab when it is short (an empty list stays non-nil, as
// encoding/json decodes []).
func (d *fastDecoder) bindingList(list []*BindingRequest) []*BindingRequest {
	n := len(list)
	if n == 0 {
		return []*BindingRequest{}
	}
	if n > bindingSlabLen/4 {
		return append([]*BindingRequest(nil), list...)
	}
	if len(d.listSlab) < n {
		d.listSlab = make([]*BindingRequest, bindingSlabLen)
	}
	out := d.listSlab[:n:n]
	d.listSlab = d.listSlab[n:]
	copy(out, list)
	return out
}

// budget decodes a budget definition, {"allocation":N,"strategy":{"type":
// "...","duration_ms":N,"burst":N}}, each field optional (the checks come
// later, as for encoding/json's result).
func (d *fastDecoder) budget() (*BudgetRequest, bool) {
	r := &BudgetRequest{}
	ok := d.object(func(key []byte) bool {
		switch string(key) {
		case "allocation":
			return fastOptInt(d, &r.Allocation, 1<<31-1)
		case "strategy":
			if r.Strategy != nil {
				return false
			}
			var ok bool
			r.Strategy, ok = d.strategy()
			return ok
		}
		return false
	})
	return r, ok
}

// strategy decodes a budget strategy object.
func (d *fastDecoder) strategy() (*StrategyRequest, bool) {
	r := &StrategyRequest{}
	ok := d.object(func(key []byte) bool {
		switch string(key) {
		case "type":
			if r.Type != nil {
				return false
			}
			s, ok := d.name()
			r.Type = &s
			return ok
		case "duration_ms":
			return fastOptInt(d, &r.DurationMs, 1<<63-1)
		case "burst":
			return fastOptInt(d, &r.Burst, 1<<31-1)
		}
		return false
	})
	return r, ok
}

// fastOptInt decodes an optional integer field (a plain decimal up to max)
// into *dst; a field seen twice gives up.
func fastOptInt[T int32 | int64](d *fastDecoder, dst **T, max uint64) bool {
	if *dst != nil {
		return false
	}
	n, ok := d.uint(max)
	v := T(n)
	*dst = &v
	return ok
}

// soleField decodes {"<name>": value} with nothing after it; value
// decodes the field's value.
func (d *fastDecoder) soleField(name string, value func() bool) bool {
	if !d.consume('{') {
		return false
	}
	key, ok := d.plainString()
	return ok && string(key) == name && d.consume(':') && value() && d.consume('}') && d.end()
}

// array decodes a JSON array, calling elem to decode each element.
func (d *fastDecoder) array(elem func() bool) bool {
	if !d.consume('[') {
		return false
	}
	if d.consume(']') {
		return true
	}
	for {
		if !elem() {
			return false
		}
		if d.consume(']') {
			return true
		}
		if !d.consume(',') {
			return false
		}
	}
}

// object decodes a JSON object, calling field with each key (a plain
// string, see plainString) to decode its value.
func (d *fastDecoder) object(field func(key []byte) bool) bool {
	if !d.consume('{') {
		return false
	}
	if d.consume('}') {
		return true
	}
	for {
		key, ok := d.plainString()
		if !ok || !d.consume(':') || !field(key) {
			return false
		}
		if d.consume('}') {
			return true
		}
		if !d.consume(',') {
			return false
		}
	}
}

// skipSpace moves past JSON whitespace.
func (d *fastDecoder) skipSpace() {
	for d.i < len(d.s) {
		switch d.s[d.i] {
		case ' ', '\t', '\n', '\r':
			d.i++
		default:
			return
		}
	}
}

// consume moves past c (after whitespace) and reports whether it was there.
func (d *fastDecoder) consume(c byte) bool {
	d.skipSpace()
	if d.i < len(d.s) && d.s[d.i] == c {
		d.i++
		return true
	}
	return false
}

// end reports whether only whitespace is left.
func (d *fastDecoder) end() bool {
	d.skipSpace()
	return d.i == len(d.s)
}

// plainString reads a string of ASCII without control characters or
// escapes (DEL passes, as encoding/json decodes it unchanged) and returns
// its contents (a slice of the body).
func (d *fastDecoder) plainString() ([]byte, bool) {
	if !d.consume('"') {
		return nil, false
	}
	start := d.i
	for j := start; j < len(d.s); j++ {
		switch c := d.s[j]; {
		case c == '"':
			d.i = j + 1
			return d.s[start:j], true
		case c < 0x20 || c >= 0x80 || c == '\\':
			return nil, false
		}
	}
	return nil, false
}

// name reads a plain string that is likely to repeat across the jobs of a
// bulk (a type, queue or budget key) and allocates each distinct one once.
func (d *fastDecoder) name() (string, bool) {
	b, ok := d.plainString()
	if !ok {
		return "", false
	}
	if s, ok := d.names[string(b)]; ok {
		return s, true
	}
	if d.names == nil {
		d.names = make(map[string]string, 4)
	}
	s := string(b)
	if len(d.names) < 64 {
		d.names[s] = s
	}
	return s, true
}

// uint reads a plain decimal integer of at most 19 digits (no sign,
// fraction, exponent or leading zero) that is at most max.
func (d *fastDecoder) uint(max uint64) (uint64, bool) {
	d.skipSpace()
	start := d.i
	var n uint64
	for d.i < len(d.s) && d.s[d.i] >= '0' && d.s[d.i] <= '9' {
		n = n*10 + uint64(d.s[d.i]-'0')
		d.i++
	}
	digits := d.i - start
	if digits == 0 || digits > 19 || (digits > 1 && d.s[start] == '0') || n > max {
		return 0, false
	}
	if d.i < len(d.s) {
		switch d.s[d.i] {
		case '.', 'e', 'E':
			return 0, false
		}
	}
	return n, true
}

// value returns the raw bytes of the next JSON value, validated here in
// one pass (the grammar of RFC 8259, as encoding/json checks it), and
// whether they hold whitespace outside strings. null is refused: it is left
// to encoding/json's rules.
func (d *fastDecoder) value() (raw []byte, spaced bool, ok bool) {
	d.skipSpace()
	start := d.i
	if d.i < len(d.s) && d.s[d.i] == 'n' {
		return nil, false, false
	}
	v := jsonValidator{s: d.s, i: d.i}
	if !v.value(0) || v.i-start > maxFastValue {
		return nil, false, false
	}
	d.i = v.i
	return d.s[start:v.i], v.spaced, true
}

// jsonValidator checks one JSON value from s[i:], moving i past it.
type jsonValidator struct {
	s      []byte
	i      int
	spaced bool // whitespace seen between tokens
}

func (v *jsonValidator) space() {
	for v.i < len(v.s) {
		switch v.s[v.i] {
		case ' ', '\t', '\n', '\r':
			v.spaced = true
			v.i++
		default:
			return
		}
	}
}

func (v *jsonValidator) value(depth int) bool {
	if depth >= maxFastDepth || v.i >= len(v.s) {
		return false
	}
	switch c := v.s[v.i]; {
	case c == '{':
		v.i++
		v.space()
		if v.i < len(v.s) && v.s[v.i] == '}' {
			v.i++
			return true
		}
		for {
			if !v.str() {
				return false
			}
			v.space()
			if v.i >= len(v.s) || v.s[v.i] != ':' {
				return false
			}
			v.i++
			v.space()
			if !v.value(depth + 1) {
				return false
			}
			v.space()
			if v.i >= len(v.s) {
				return false
			}
			switch v.s[v.i] {
			case ',':
				v.i++
				v.space()
			case '}':
				v.i++
				return true
			default:
				return false
			}
		}
	case c == '[':
		v.i++
		v.space()
		if v.i < len(v.s) && v.s[v.i] == ']' {
			v.i++
			return true
		}
		for {
			if !v.value(depth + 1) {
				return false
			}
			v.space()
			if v.i >= len(v.s) {
				return false
			}
			switch v.s[v.i] {
			case ',':
				v.i++
				v.space()
			case ']':
				v.i++
				return true
			default:
				return false
			}
		}
	case c == '"':
		return v.str()
	case c == '-' || (c >= '0' && c <= '9'):
		return v.number()
	case c == 't':
		return v.literal("true")
	case c == 'f':
		return v.literal("false")
	case c == 'n':
		return v.literal("null")
	}
	return false
}

func (v *jsonValidator) literal(word string) bool {
	if len(v.s)-v.i < len(word) || string(v.s[v.i:v.i+len(word)]) != word {
		return false
	}
	v.i += len(word)
	return true
}

// str checks a string: no control characters, only the escapes JSON has.
// Bytes of 0x80 and above pass unchecked, as encoding/json lets them.
func (v *jsonValidator) str() bool {
	if v.i >= len(v.s) || v.s[v.i] != '"' {
		return false
	}
	for i := v.i + 1; i < len(v.s); i++ {
		switch c := v.s[i]; {
		case c == '"':
			v.i = i + 1
			return true
		case c < 0x20:
			return false
		case c == '\\':
			i++
			if i >= len(v.s) {
				return false
			}
			switch v.s[i] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if i+4 >= len(v.s) {
					return false
				}
				for _, h := range v.s[i+1 : i+5] {
					if !isHex(h) {
						return false
					}
				}
				i += 4
			default:
				return false
			}
		}
	}
	return false
}

func isHex(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

// number checks -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
func (v *jsonValidator) number() bool {
	s, i := v.s, v.i
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && s[i] >= '1' && s[i] <= '9':
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	default:
		return false
	}
	if i < len(s) && s[i] == '.' {
		i++
		d := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		d := i
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i == d {
			return false
		}
	}
	v.i = i
	return true
}

// maxFastValue bounds the payloads this decoder takes and maxFastDepth
// their nesting (encoding/json refuses more than 10000 levels); anything
// beyond is rare and goes through encoding/json.
const (
	maxFastValue = 1 << 20
	maxFastDepth = 1000
)
