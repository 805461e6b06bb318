package client

import (
	"strconv"
	"sync"
)

// metaCache keeps the Stat answers of immutable caches. A node started
// with --immutable says so on its metadata answers (Cache-Control:
// immutable): it never revalidates an object's metadata itself, so the
// client may keep it too and skip one round trip per read (a GetObject
// through the gateway is a Stat and the chunk reads). Answers of other
// nodes are never kept. This client's own Put and Delete, and a read that
// finds the version gone (ErrChanged), drop the entry.
type metaCache struct {
	mu sync.Mutex
	m  map[string]Meta
}

// maxMetas bounds the cache: past it, it is cleared (the next Stat of each
// object asks a node again).
const maxMetas = 1 << 16

// cacheControlImmutable is how a node marks metadata that never changes.
const cacheControlImmutable = "immutable"

func metaKey(bucket, key string) string {
	return strconv.Itoa(len(bucket)) + ":" + bucket + key
}

func (mc *metaCache) get(bucket, key string) (Meta, bool) {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	m, ok := mc.m[metaKey(bucket, key)]
	return m, ok
}

func (mc *metaCache) put(bucket, key string, m Meta) {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	if mc.m == nil || len(mc.m) >= maxMetas {
		mc.m = map[string]Meta{}
	}
	mc.m[metaKey(bucket, key)] = m
}

func (mc *metaCache) forget(bucket, key string) {
	mc.mu.Lock()
	defer mc.mu.Unlock()
	delete(mc.m, metaKey(bucket, key))
}

// Forget drops what the client keeps of the object's metadata (of every
// object when key is empty): the gateway calls it for writes it passes to
// S3 without the client (multipart uploads, copies, batch deletes).
func (c *Client) Forget(bucket, key string) {
	if key == "" {
		c.metas.mu.Lock()
		clear(c.metas.m)
		c.metas.mu.Unlock()
		return
	}
	c.metas.forget(bucket, key)
}
