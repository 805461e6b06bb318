package ring

import (
	"encoding/binary"
	"math"

	"github.com/cespare/xxhash/v2"

	"github.com/distcache/distcache/internal/chunk"
)

// Placement hashing (algorithm "rendezvous-xxhash64"), byte for byte:
//
//	key(id)      = str(Tenant) str(Bucket) str(Key) str(ETag) u64be(Size) u64be(Index)
//	str(s)       = uvarint(len(s)) s
//	keyHash      = xxh64(seed, key(id))
//	memberHash   = xxh64(seed, str(Name))
//	h            = fmix64(keyHash XOR memberHash)            (MurmurHash3's finalizer)
//	u            = (float64(h >> 11) + 0.5) / 2^53           (in (0,1), never 0 or 1)
//	score        = -Weight / ln(u)
//
// The member with the highest score owns the chunk; equal scores (which
// take a 2^-53 coincidence) go to the member whose name sorts first. Every
// string is length-prefixed, so no two different ids share an encoding
// (tenant "a" + bucket "bc" is not tenant "ab" + bucket "c").
//
// Hashing the key once and combining it with a precomputed per-member hash
// keeps a placement at one xxh64 of the key plus, per member, a multiply-xor
// mix and a logarithm.

// AppendKey appends the placement key of id (the encoding above) to dst.
func AppendKey(dst []byte, id chunk.ID) []byte {
	dst = appendString(dst, id.Tenant)
	dst = appendString(dst, id.Bucket)
	dst = appendString(dst, id.Key)
	dst = appendString(dst, id.ETag)
	dst = binary.BigEndian.AppendUint64(dst, uint64(id.Size))
	dst = binary.BigEndian.AppendUint64(dst, uint64(id.Index))
	return dst
}

// KeyOf returns the placement key of id (see AppendKey).
func KeyOf(id chunk.ID) []byte { return AppendKey(nil, id) }

func appendString(dst []byte, s string) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(s)))
	return append(dst, s...)
}

// keyHash is xxh64(seed, key(id)), without allocating for keys up to a few
// hundred bytes.
func keyHash(seed uint64, id chunk.ID) uint64 {
	var buf [256]byte
	b := AppendKey(buf[:0], id)
	var d xxhash.Digest
	d.ResetWithSeed(seed)
	_, _ = d.Write(b)
	return d.Sum64()
}

// memberHash is xxh64(seed, str(name)).
func memberHash(seed uint64, name string) uint64 {
	var d xxhash.Digest
	d.ResetWithSeed(seed)
	_, _ = d.Write(appendString(make([]byte, 0, binary.MaxVarintLen64+len(name)), name))
	return d.Sum64()
}

func fmix64(x uint64) uint64 {
	x ^= x >> 33
	x *= 0xff51afd7ed558ccd
	x ^= x >> 33
	x *= 0xc4ceb9fe1a85ec53
	x ^= x >> 33
	return x
}

// score is member n's rendezvous score for a chunk with key hash kh.
func (n *node) score(kh uint64) float64 {
	u := (float64(fmix64(kh^n.hash)>>11) + 0.5) * 0x1p-53
	return n.weight / -math.Log(u)
}
