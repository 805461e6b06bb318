package store

// Chunk value layout (badger value of a chunk key; the keys are in keys.go):
//
//	version (1 byte, = 1) | crc (4 bytes, big-endian) | payload length (4 bytes, big-endian) | payload
//
// crc is CRC-32C (Castagnoli) of the payload, computed as the CRC-32C of the
// badger key followed by the payload: seeding it with the key also catches a
// value that ends up under the wrong key (for example through a damaged
// value pointer). It is verified on every read from disk; a value that is
// truncated, has an unknown version, a wrong length or a wrong checksum is
// treated as corrupt and never returned.
//
// A chunk longer than partBytes is stored in parts instead (version 2):
//
//	chunk key:  version (1 byte, = 2) | crc (4 bytes) | payload length (4 bytes) |
//	            part length (4 bytes, big-endian)
//	part i key: payload bytes [i*part length, min((i+1)*part length, payload length))
//
// written in one transaction. crc is as for version 1 (the chunk key, then
// the whole payload) and is verified once the parts are put together. Why
// parts: badger copies each value-log entry through a buffer it allocates
// afresh for every write batch, grown to fit the entry; for a 4 MiB chunk
// that buffer (zeroed, faulted in, copied through) was over a quarter of a
// filling node's CPU. A chunk's parts share one buffer of a part's size.
//
// Metadata values ('m' keys) are: version (1 byte, = 1) | JSON of chunk.Meta.

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/crc32"
	"math"

	"github.com/dgraph-io/badger/v4"

	"github.com/distcache/distcache/internal/chunk"
)

const (
	valueVersion   = 1
	valueHeaderLen = 9
	partsVersion   = 2
	partsHeaderLen = 13
	metaVersion    = 1
	maxPayload     = math.MaxUint32 - valueHeaderLen
)

// partBytes is the part length of chunks stored in parts: a chunk longer
// than this is split. With 512 KiB parts, 300 fills of 4 MiB chunks
// (BenchmarkFill -benchtime 300x) took 1.4-1.5 CPU-seconds, against 3.1-4.3
// as whole values, most of it system time faulting in badger's buffers;
// 256 and 128 KiB parts cost about the same in a bare badger test.
const partBytes = 512 << 10

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// errCorrupt marks a stored value that cannot be trusted.
var errCorrupt = errors.New("store: corrupt value")

func chunkCRC(key, payload []byte) uint32 {
	return crc32.Update(crc32.Checksum(key, castagnoli), castagnoli, payload)
}

// Value is a chunk's payload with room in front of it for the header it
// is stored with, so that a chunk read into Payload is stored by PutValue
// without being copied (a 4 MiB copy into fresh memory per fill was a
// fifth of a filling node's CPU).
type Value struct{ buf []byte }

// NewValue returns a Value for n payload bytes.
func NewValue(n int) Value { return Value{buf: make([]byte, valueHeaderLen+n)} }

// Payload is where the chunk's bytes go.
func (v Value) Payload() []byte { return v.buf[valueHeaderLen:] }

// seal writes the header for key over the room in front and returns the
// whole value.
func (v Value) seal(key []byte) []byte {
	payload := v.Payload()
	v.buf[0] = valueVersion
	binary.BigEndian.PutUint32(v.buf[1:5], chunkCRC(key, payload))
	binary.BigEndian.PutUint32(v.buf[5:9], uint32(len(payload)))
	return v.buf
}

// entries returns what PutValue writes for key: the sealed value, or the
// header and the parts (subslices of v's payload, not copies).
func (v Value) entries(key []byte) []*badger.Entry {
	payload := v.Payload()
	if len(payload) <= partBytes {
		return []*badger.Entry{badger.NewEntry(key, v.seal(key))}
	}
	h := partsHeader{crc: chunkCRC(key, payload), length: len(payload), partLen: partBytes}
	es := []*badger.Entry{badger.NewEntry(key, h.encode())}
	for i := range h.parts() {
		from, to := h.part(i)
		es = append(es, badger.NewEntry(partKey(key, i), payload[from:to]))
	}
	return es
}

// partsHeader is a version 2 chunk value.
type partsHeader struct {
	crc             uint32
	length, partLen int
}

func (h partsHeader) parts() int { return (h.length + h.partLen - 1) / h.partLen }

// part returns the bounds of part i in the payload.
func (h partsHeader) part(i int) (from, to int) {
	return i * h.partLen, min((i+1)*h.partLen, h.length)
}

func (h partsHeader) encode() []byte {
	v := make([]byte, partsHeaderLen)
	v[0] = partsVersion
	binary.BigEndian.PutUint32(v[1:5], h.crc)
	binary.BigEndian.PutUint32(v[5:9], uint32(h.length))
	binary.BigEndian.PutUint32(v[9:13], uint32(h.partLen))
	return v
}

func decodePartsHeader(v []byte) (partsHeader, error) {
	if len(v) != partsHeaderLen || v[0] != partsVersion {
		return partsHeader{}, fmt.Errorf("%w: not a chunk stored in parts (%d bytes)", errCorrupt, len(v))
	}
	h := partsHeader{
		crc:     binary.BigEndian.Uint32(v[1:5]),
		length:  int(binary.BigEndian.Uint32(v[5:9])),
		partLen: int(binary.BigEndian.Uint32(v[9:13])),
	}
	if h.partLen == 0 || h.length == 0 {
		return partsHeader{}, fmt.Errorf("%w: chunk of %d bytes in parts of %d", errCorrupt, h.length, h.partLen)
	}
	return h, nil
}

// decodeChunkValue verifies v and returns its payload (a subslice of v).
func decodeChunkValue(key, v []byte) ([]byte, error) {
	if len(v) < valueHeaderLen {
		return nil, fmt.Errorf("%w: %d bytes, shorter than the header", errCorrupt, len(v))
	}
	if v[0] != valueVersion {
		return nil, fmt.Errorf("%w: unknown format version %d", errCorrupt, v[0])
	}
	payload := v[valueHeaderLen:]
	if n := binary.BigEndian.Uint32(v[5:9]); int64(n) != int64(len(payload)) {
		return nil, fmt.Errorf("%w: header says %d payload bytes, have %d", errCorrupt, n, len(payload))
	}
	if want, got := binary.BigEndian.Uint32(v[1:5]), chunkCRC(key, payload); want != got {
		return nil, fmt.Errorf("%w: crc32c %08x, want %08x", errCorrupt, got, want)
	}
	return payload, nil
}

func encodeMeta(m chunk.Meta) ([]byte, error) {
	j, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return append([]byte{metaVersion}, j...), nil
}

func decodeMeta(v []byte) (chunk.Meta, error) {
	var m chunk.Meta
	if len(v) < 1 || v[0] != metaVersion {
		return m, fmt.Errorf("%w: bad metadata version", errCorrupt)
	}
	if err := json.Unmarshal(v[1:], &m); err != nil {
		return m, fmt.Errorf("%w: metadata: %v", errCorrupt, err)
	}
	return m, nil
}

func uvarintLen(x uint64) int64 {
	n := int64(1)
	for x >= 0x80 {
		x >>= 7
		n++
	}
	return n
}

// storedValueLen recovers the exact length of a badger value from what a
// key-only iteration exposes (Item.EstimatedSize and Item.ValueSize), so the
// index can be rebuilt at Open without reading the value log.
//
// From badger v4's source (iterator.go, structs.go): for a value stored
// inline in the LSM tree, EstimatedSize = len(key)+len(value) and ValueSize =
// len(value); for a value in the value log, both derive from the entry length
// vp.Len = header + len(key)+8 + len(value) + 4 (crc), where the header is
// meta, userMeta and the uvarints of len(key)+8, len(value) and expiresAt (0,
// one byte), and ValueSize = vp.Len - (len(key)+8) - 6 - 4. ok is false if the
// numbers fit neither case (a different badger format); the caller then reads
// the value. TestStoredValueLen pins this against the badger in go.mod.
func storedValueLen(keyLen int, estimated, valueSize int64) (int64, bool) {
	k := int64(keyLen)
	switch estimated - valueSize {
	case k:
		return valueSize, valueSize >= 0
	case k + 18:
		klenTs := k + 8
		r := estimated - klenTs - 4 - 3 - uvarintLen(uint64(klenTs))
		for n := int64(1); n <= binary.MaxVarintLen32; n++ {
			if v := r - n; v >= 0 && uvarintLen(uint64(v)) == n {
				return v, true
			}
		}
	}
	return 0, false
}
