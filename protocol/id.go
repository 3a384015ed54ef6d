package protocol

import (
	"crypto/rand"
	"encoding/binary"
	"math/bits"
)

// IDLength is the length of a job ID's text form (SCRU128, base 36).
const IDLength = 25

const (
	maxCounter       = 1<<24 - 1
	maxTimestamp     = 1<<48 - 1
	counterHiRenewMs = 1000  // renew counter_hi at least once a second
	rollbackAllowMs  = 10000 // clock steps back by less than this are absorbed
)

// IDGenerator makes SCRU128 identifiers: 48-bit millisecond timestamp,
// 24-bit counter_hi, 24-bit counter_lo and 32 bits of entropy, written as 25
// lowercase base-36 digits. IDs from one generator strictly increase, which
// is what makes FIFO within a priority work. It is not safe for concurrent
// use; its owner (the queue actor) serialises calls.
type IDGenerator struct {
	timestamp uint64
	counterHi uint32
	counterLo uint32
	tsHi      uint64 // timestamp when counter_hi was last renewed
	random    func() uint32
}

// NewIDGenerator returns a generator seeded from crypto/rand.
func NewIDGenerator() *IDGenerator {
	return &IDGenerator{random: cryptoUint32}
}

func cryptoUint32() uint32 {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return binary.BigEndian.Uint32(b[:])
}

// Next returns the next ID for the current time nowMs (Unix milliseconds).
func (g *IDGenerator) Next(nowMs uint64) string {
	if nowMs > g.timestamp {
		g.timestamp = nowMs
		g.counterLo = g.random() & maxCounter
		if nowMs-g.tsHi >= counterHiRenewMs || g.tsHi == 0 {
			g.tsHi = nowMs
			g.counterHi = g.random() & maxCounter
		}
	} else if nowMs+rollbackAllowMs > g.timestamp {
		g.counterLo++
		if g.counterLo > maxCounter {
			g.counterLo = 0
			g.counterHi++
			if g.counterHi > maxCounter {
				g.counterHi = 0
				g.timestamp++ // borrow the next millisecond
				g.counterLo = g.random() & maxCounter
			}
		}
	} else {
		// The clock went back a long way: restart from it (monotonicity is
		// lost, as in the reference generator).
		g.timestamp = nowMs
		g.tsHi = nowMs
		g.counterHi = g.random() & maxCounter
		g.counterLo = g.random() & maxCounter
	}
	return formatID(g.timestamp&maxTimestamp, g.counterHi, g.counterLo, g.random())
}

const base36 = "0123456789abcdefghijklmnopqrstuvwxyz"

// formatID writes the 128-bit value as 25 base-36 digits.
func formatID(ts uint64, hi, lo, entropy uint32) string {
	// high 64 bits: ts(48) | hi(24) top 16 bits; low 64 bits: hi low 8 | lo(24) | entropy(32)
	return IDKey{Hi: ts<<16 | uint64(hi)>>8, Lo: uint64(hi&0xff)<<56 | uint64(lo)<<32 | uint64(entropy)}.String()
}

// IDKey is a job ID as its 128-bit value. Keys order as their IDs do (25
// base-36 digits of one length) and hold no pointer, so the engine's
// in-memory ID indexes compare them without reading the ID strings and
// the collector does not scan them.
type IDKey struct{ Hi, Lo uint64 }

// Less orders keys as their IDs.
func (k IDKey) Less(o IDKey) bool { return k.Hi < o.Hi || (k.Hi == o.Hi && k.Lo < o.Lo) }

// Millis is the ID's timestamp: when it was minted, in Unix ms.
func (k IDKey) Millis() uint64 { return k.Hi >> 16 }

// MaxIDKey is above every key of an ID.
var MaxIDKey = IDKey{Hi: ^uint64(0), Lo: ^uint64(0)}

// String is the key's ID.
func (k IDKey) String() string {
	high, low := k.Hi, k.Lo
	var out [IDLength]byte
	for i := IDLength - 1; i >= 0; i-- {
		// divide the 128-bit (high, low) by 36
		qh := high / 36
		r := high % 36
		// (r<<64 + low) / 36 without overflow: split low into two 32-bit halves
		mid := r<<32 | low>>32
		qm := mid / 36
		r = mid % 36
		lo32 := r<<32 | low&0xffffffff
		ql := lo32 / 36
		r = lo32 % 36
		high = qh
		low = qm<<32 | ql
		out[i] = base36[r]
	}
	return string(out[:])
}

// pow36x12 is 36^12, the largest power of 36 below 2^63.
const pow36x12 = 4738381338321616896

// ParseIDKey returns the key of an ID. It reports false when s is not of
// an ID's form (ValidID) or its value does not fit in 128 bits (no minted
// ID is above 2^128).
func ParseIDKey(s string) (IDKey, bool) {
	if !ValidID(s) {
		return IDKey{}, false
	}
	// 25 digits: 1, then two runs of 12, each run folded in with one
	// 128-bit multiply by 36^12
	var k IDKey
	k.Lo = uint64(digit36(s[0]))
	for _, run := range [2]string{s[1:13], s[13:25]} {
		var v uint64
		for i := 0; i < len(run); i++ {
			v = v*36 + uint64(digit36(run[i]))
		}
		// k = k*36^12 + v
		h1, l1 := bits.Mul64(k.Lo, pow36x12)
		h2, l2 := bits.Mul64(k.Hi, pow36x12)
		if h2 != 0 {
			return IDKey{}, false
		}
		hi, carry := bits.Add64(h1, l2, 0)
		if carry != 0 {
			return IDKey{}, false
		}
		lo, c2 := bits.Add64(l1, v, 0)
		if hi, carry = bits.Add64(hi, 0, c2); carry != 0 {
			return IDKey{}, false
		}
		k = IDKey{Hi: hi, Lo: lo}
	}
	return k, true
}

// digit36 is the value of a base-36 digit of [0-9a-z].
func digit36(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return c - 'a' + 10
}

// ValidID reports whether s has the form of a job ID: 25 bytes of [0-9a-z].
func ValidID(s string) bool {
	if len(s) != IDLength {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'z') {
			return false
		}
	}
	return true
}

// IDTimeMs is the Unix millisecond timestamp an ID was minted at (its top
// 48 bits), or 0 when s is not an ID.
func IDTimeMs(s string) uint64 {
	k, ok := ParseIDKey(s)
	if !ok {
		return 0
	}
	return k.Hi >> 16
}
