package store

// Binary key layout (badger keys). This is its one description; the other
// files point here. Every key starts with a one-byte type and then the
// tenant, so the tenant is the first component of every name and two
// tenants can never address each other's entries:
//
//	chunk:    'c' | uvarint(len(tenant)) tenant | uvarint(len(bucket)) bucket |
//	          uvarint(len(key)) key | uvarint(len(etag)) etag |
//	          chunkSize (8 bytes, big-endian) | index (8 bytes, big-endian)
//	part:     chunk key | part (2 bytes, big-endian)
//	metadata: 'm' | uvarint(len(tenant)) tenant | uvarint(len(bucket)) bucket |
//	          uvarint(len(key)) key
//	flush:    'z'  (internal sentinel, see forceFlush; never holds data)
//
// Every variable-length field is length-prefixed, so the encoding is
// injective: tenant "a" + bucket "bc" and tenant "ab" + bucket "c" differ
// in their first length byte, and the chunk prefix of object key "k" is not
// a prefix of the chunk keys of object key "kk". The chunk prefix up to and
// including the object key (chunkPrefix) therefore names exactly the chunks
// of one object, for every ETag and chunk size, which is what DeleteObject
// iterates. The fixed-width big-endian chunk size and index keep one
// version's chunks in index order, each chunk's part keys right after its
// chunk key, in part order (value.go says when a chunk is stored in parts),
// which is how rebuildIndex finds a chunk's parts in one pass.

import (
	"encoding/binary"
	"errors"

	"github.com/distcache/distcache/internal/chunk"
)

const (
	typeChunk byte = 'c'
	typeMeta  byte = 'm'
	typeFlush byte = 'z'
)

var errBadKey = errors.New("store: malformed key")

func appendField(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

func objectKey(typ byte, o chunk.Object, extra int) []byte {
	n := 1 + 3*binary.MaxVarintLen64 + len(o.Tenant) + len(o.Bucket) + len(o.Key) + extra
	b := make([]byte, 0, n)
	b = append(b, typ)
	b = appendField(b, o.Tenant)
	b = appendField(b, o.Bucket)
	return appendField(b, o.Key)
}

// chunkPrefix is the key prefix shared by every chunk of o (all ETags, all
// chunk sizes).
func chunkPrefix(o chunk.Object) []byte { return objectKey(typeChunk, o, 0) }

// metaKey is the key of o's metadata entry.
func metaKey(o chunk.Object) []byte { return objectKey(typeMeta, o, 0) }

// chunkKey is the key of one chunk.
func chunkKey(id chunk.ID) []byte {
	b := objectKey(typeChunk, id.Object, binary.MaxVarintLen64+len(id.ETag)+16)
	b = appendField(b, id.ETag)
	b = binary.BigEndian.AppendUint64(b, uint64(id.Size))
	return binary.BigEndian.AppendUint64(b, uint64(id.Index))
}

func readField(b []byte) (field, rest []byte, ok bool) {
	n, w := binary.Uvarint(b)
	if w <= 0 || n > uint64(len(b)-w) {
		return nil, nil, false
	}
	return b[w : w+int(n)], b[w+int(n):], true
}

// partKey is the key of part i of the chunk whose key is ck.
func partKey(ck []byte, i int) []byte {
	return binary.BigEndian.AppendUint16(append(make([]byte, 0, len(ck)+2), ck...), uint16(i))
}

// partChunkKey is the key of the chunk whose part key is pk.
func partChunkKey(pk []byte) []byte { return pk[:len(pk)-2] }

// parsedChunkKey describes a chunk or part key: its chunk's ID, the length
// of its object prefix (chunkPrefix of the object) and, for a part key, the
// part's number (-1 for a chunk key).
type parsedChunkKey struct {
	id        chunk.ID
	prefixLen int
	part      int
}

func parseChunkKey(k []byte) (parsedChunkKey, error) {
	var p parsedChunkKey
	if len(k) == 0 || k[0] != typeChunk {
		return p, errBadKey
	}
	rest := k[1:]
	var fields [4][]byte
	for i := range fields {
		if i == 3 {
			p.prefixLen = len(k) - len(rest)
		}
		f, r, ok := readField(rest)
		if !ok {
			return p, errBadKey
		}
		fields[i], rest = f, r
	}
	p.part = -1
	switch len(rest) {
	case 16:
	case 18:
		p.part = int(binary.BigEndian.Uint16(rest[16:]))
	default:
		return p, errBadKey
	}
	p.id = chunk.ID{
		Object: chunk.Object{Tenant: string(fields[0]), Bucket: string(fields[1]), Key: string(fields[2])},
		ETag:   string(fields[3]),
		Size:   int64(binary.BigEndian.Uint64(rest[:8])),
		Index:  int64(binary.BigEndian.Uint64(rest[8:16])),
	}
	return p, nil
}

// diskKeys are the badger keys of the chunk whose key is ks, stored with
// parts part entries.
func diskKeys(ks string, parts int) [][]byte {
	keys := make([][]byte, 0, 1+parts)
	keys = append(keys, []byte(ks))
	for i := range parts {
		keys = append(keys, partKey(keys[0], i))
	}
	return keys
}
