// Package chunk holds the data model shared by the store, the cache node, the
// ring and the client: how an object version is cut into fixed-size chunks and
// how a chunk is named.
package chunk

import (
	"fmt"
	"time"
)

// Object names an object as one tenant sees it. The tenant is part of every
// name so two tenants reading the same bucket never share cache entries.
type Object struct {
	Tenant string
	Bucket string
	Key    string
}

// String is unambiguous (quoted parts), so it can key maps and singleflight.
func (o Object) String() string { return fmt.Sprintf("%q/%q/%q", o.Tenant, o.Bucket, o.Key) }

// ID names one chunk of one version of an object. The ETag is part of the
// identity, so an overwritten object can never be answered with old chunks;
// the chunk size is too, so changing the chunk size never mixes layouts.
type ID struct {
	Object
	ETag  string
	Size  int64 // chunk size in bytes (the layout), not this chunk's length
	Index int64
}

func (id ID) String() string {
	return fmt.Sprintf("%s@%q#%d/%d", id.Object, id.ETag, id.Index, id.Size)
}

// Meta is the object metadata the cache keeps beside the chunks.
type Meta struct {
	Size         int64     `json:"size"`
	ETag         string    `json:"etag"`
	ContentType  string    `json:"contentType,omitempty"`
	LastModified time.Time `json:"lastModified"`
	// Headers are the other headers S3 keeps with the version (user
	// metadata, Cache-Control, ...).
	Headers Headers `json:"headers,omitempty"`
	// FetchedAt is when S3 last confirmed this metadata; revalidation is due
	// once FetchedAt+TTL has passed (never in immutable mode).
	FetchedAt time.Time `json:"fetchedAt"`
	// Held names the nodes that hold this version until S3 has it
	// (WriteBack) or for good (Transient), comma-separated; empty for an
	// object S3 holds. Never stored: it comes from the nodes' journals.
	Held string `json:"-"`
}

// Count is the number of chunks of an object of the given size.
func Count(objectSize, chunkSize int64) int64 {
	if objectSize <= 0 {
		return 0
	}
	return (objectSize + chunkSize - 1) / chunkSize
}

// Bounds is the byte offset and length of chunk index within an object.
// ok is false when the index is outside the object.
func Bounds(objectSize, chunkSize, index int64) (off, length int64, ok bool) {
	if index < 0 || index >= Count(objectSize, chunkSize) {
		return 0, 0, false
	}
	off = index * chunkSize
	length = min(chunkSize, objectSize-off)
	return off, length, true
}

// Span is the inclusive range of chunk indexes that hold bytes
// [off, off+length) of an object. length must be positive.
func Span(off, length, chunkSize int64) (first, last int64) {
	return off / chunkSize, (off + length - 1) / chunkSize
}
