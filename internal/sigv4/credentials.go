package sigv4

import (
	"crypto/hmac"
	"crypto/sha256"
	"hash"
	"sync"
	"sync/atomic"
)

// Credentials is one access key pair the gateway accepts.
type Credentials struct {
	AccessKeyID     string
	SecretAccessKey string
}

// CredentialStore finds the secret for an access key ID. Implementations
// must be safe for concurrent use.
type CredentialStore interface {
	Lookup(accessKeyID string) (Credentials, bool)
}

// StaticStore is a fixed set of credentials keyed by access key ID. It is
// safe for concurrent use as long as it is not modified.
type StaticStore map[string]Credentials

// NewStaticStore returns a StaticStore holding creds.
func NewStaticStore(creds ...Credentials) StaticStore {
	s := make(StaticStore, len(creds))
	for _, c := range creds {
		s[c.AccessKeyID] = c
	}
	return s
}

// Lookup implements CredentialStore.
func (s StaticStore) Lookup(accessKeyID string) (Credentials, bool) {
	c, ok := s[accessKeyID]
	return c, ok
}

// maxCachedKeys bounds the signing-key cache. Keys change once a day per
// (secret, region, service), so a handful of entries is the steady state; the
// bound only matters for a flood of distinct scopes, when the cache is
// simply emptied.
const maxCachedKeys = 1024

// keyCache memoises signing-key derivation (four HMACs) per
// (secret, date, region, service), with the HMAC-SHA256 states keyed with
// each key for reuse.
type keyCache struct {
	last atomic.Pointer[signingKey] // the key used last: most requests' (one secret, one day)
	mu   sync.Mutex
	keys map[keyID]*signingKey
}

// keyID names a signing key: a struct, so a lookup builds no string.
type keyID struct{ secret, date, region, service string }

// signingKey is a derived key and a pool of HMAC-SHA256 states keyed with
// it: a request's signature needs one for a moment, and hmac.New costs
// three allocations and two SHA-256 blocks that Reset does not.
type signingKey struct {
	id   keyID
	key  []byte
	macs sync.Pool // of hash.Hash
}

// mac returns an HMAC-SHA256 keyed with k, reset; give it back with
// putMAC.
func (k *signingKey) mac() hash.Hash {
	if m, ok := k.macs.Get().(hash.Hash); ok {
		m.Reset()
		return m
	}
	return hmac.New(sha256.New, k.key)
}

func (k *signingKey) putMAC(m hash.Hash) { k.macs.Put(m) }

func (c *keyCache) get(secret, date, region, service string) *signingKey {
	id := keyID{secret, date, region, service}
	if k := c.last.Load(); k != nil && k.id == id {
		return k
	}
	c.mu.Lock()
	k, ok := c.keys[id]
	c.mu.Unlock()
	if ok {
		c.last.Store(k)
		return k
	}
	k = &signingKey{id: id, key: deriveSigningKey(secret, date, region, service)}
	c.last.Store(k)
	c.mu.Lock()
	if c.keys == nil || len(c.keys) >= maxCachedKeys {
		c.keys = make(map[keyID]*signingKey)
	}
	c.keys[id] = k
	c.mu.Unlock()
	return k
}

// deriveSigningKey is kSigning = HMAC(HMAC(HMAC(HMAC("AWS4"+secret, date),
// region), service), "aws4_request").
func deriveSigningKey(secret, date, region, service string) []byte {
	k := hmacSHA256([]byte("AWS4"+secret), date)
	k = hmacSHA256(k, region)
	k = hmacSHA256(k, service)
	return hmacSHA256(k, "aws4_request")
}

func hmacSHA256(key []byte, data string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(data))
	return m.Sum(nil)
}
