package sigv4

import (
	"crypto/hmac"
	"crypto/sha256"
	"sync"
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
// (secret, date, region, service).
type keyCache struct {
	mu   sync.Mutex
	keys map[string][]byte
}

func (c *keyCache) get(secret, date, region, service string) []byte {
	id := secret + "\x00" + date + "\x00" + region + "\x00" + service
	c.mu.Lock()
	k, ok := c.keys[id]
	c.mu.Unlock()
	if ok {
		return k
	}
	k = deriveSigningKey(secret, date, region, service)
	c.mu.Lock()
	if c.keys == nil || len(c.keys) >= maxCachedKeys {
		c.keys = make(map[string][]byte)
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
