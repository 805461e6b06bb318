// Package store is the cache node's local storage: a bounded RAM tier
// (ristretto) in front of badger on local NVMe, with a hard byte bound on the
// disk, per-tenant quotas, a checksum per chunk verified on every disk hit,
// and warm restarts.
//
// Files, by concern:
//
//   - store.go: Options, Stats, the Store type, Open and Close;
//   - read.go: GetChunk and GetMeta, reading and verifying values;
//   - write.go: PutChunk, PutValue, PutMeta and ReplaceMeta;
//   - delete.go: DeleteObject, claims and tombstones, dropping corrupt chunks;
//   - evict.go: making room, by the eviction policy and by tenant quota;
//   - index.go: the in-memory index and the eviction policies;
//   - keys.go: the badger key layout (documented there, and only there);
//   - value.go: the value layout (chunks whole or in parts, metadata);
//   - space.go, fsroom.go: how the disk bound is kept, value-log GC and
//     the filesystem's own limit included;
//   - recover.go: opening a damaged store, and rebuilding the index at Open;
//   - badger.go: badger's options and logger.
//
// Tiers: GetChunk looks in RAM, then on disk. A disk hit is verified (CRC-32C)
// and then promoted to RAM, so the RAM tier only ever holds verified payloads
// (or payloads handed to PutChunk by the caller). Every chunk in RAM is also
// in the disk index: evicting or deleting a chunk on disk removes its RAM
// copy, which is how DeleteObject also invalidates RAM.
//
// Index and disk: at rest the index holds exactly the chunks badger holds,
// with their sizes (a failed delete aside, which leaves an unindexed chunk
// that is never served and that DeleteObject or the next Open removes). The
// store's lock is not held across badger calls, so for each chunk key the
// badger write or delete and the index update are ordered by a claim on the
// key (Store.inflight) instead of a lock: see there.
//
// Tenants: the tenant is the first component of every badger key (keys.go)
// and of the index, and quotas evict only the tenant's own chunks.
package store
