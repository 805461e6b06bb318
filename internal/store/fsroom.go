package store

// The filesystem's own limit.
//
// DiskBytes is a bound the operator promises the filesystem can hold. When it
// cannot (the bound is set larger than the volume, or something else fills
// the volume), badger would meet ENOSPC, and badger writes its value log and
// memtables through mmap: a write into a page the filesystem cannot back is a
// SIGBUS, which kills the process (found by e2e/processfaults TestDiskFull).
// So the store never lets that happen: each measurement also reads the
// filesystem's free space (statfs, the space available to unprivileged
// users), and the bound in force is the smaller of DiskBytes and what is
// under Dir plus that free space, less fsReserve. Admission (tryCharge) and
// reclaiming use it, so a store on a too-small filesystem behaves like a
// store with a smaller bound: it evicts to stay within it, refuses what
// cannot fit (ErrNoSpace: the node serves those bytes from S3) and says so in
// its log (once per minute at most, when the limit starts or stops applying)
// and in Stats (DiskFree, DiskLimit).

import (
	"errors"
	"time"
)

const (
	// fsReserve is kept free on the filesystem on top of the store's own
	// reserve: room for other writers between two measurements, and
	// filesystem metadata du does not see.
	fsReserve = 4 << 20
	// fsLogEvery rate-limits the log line about the filesystem limit.
	fsLogEvery = time.Minute
)

// limitLocked is the bound in force: DiskBytes, or less when the filesystem
// has less room. s.mu must be held.
func (s *Store) limitLocked() int64 {
	limit := s.opts.DiskBytes
	if s.opts.Pinned != nil {
		limit -= s.opts.Pinned()
	}
	if s.usage.fsFree >= 0 {
		limit = min(limit, s.usage.measured+s.usage.fsFree-fsReserve)
	}
	return limit
}

// noteFilesystemLocked records the free space measured with usage and logs
// when the filesystem starts or stops being the limit. s.mu must be held.
func (s *Store) noteFilesystemLocked(free int64, err error) {
	if err != nil {
		free = -1
		if !errors.Is(err, errors.ErrUnsupported) && (s.fsErrLogged.IsZero() || time.Since(s.fsErrLogged) >= fsLogEvery) {
			s.fsErrLogged = time.Now()
			s.log.Warn("cannot read the filesystem's free space; relying on --disk-bytes alone", "dir", s.opts.Dir, "err", err)
		}
	}
	s.usage.fsFree = free
	limited := s.limitLocked() < s.opts.DiskBytes
	if limited == s.fsLimited || time.Since(s.fsLogged) < fsLogEvery {
		return
	}
	s.fsLimited, s.fsLogged = limited, time.Now()
	if limited {
		s.log.Warn("the filesystem holding the store has less room than the disk bound: caching only what fits, serving the rest from S3",
			"dir", s.opts.Dir, "diskBytes", s.opts.DiskBytes, "usedBytes", s.usage.measured, "freeBytes", free,
			"limitBytes", s.limitLocked())
	} else {
		s.log.Info("the filesystem holding the store has room for the disk bound again", "dir", s.opts.Dir,
			"diskBytes", s.opts.DiskBytes, "freeBytes", free)
	}
}

// fsRoom reports whether the filesystem has room for need more bytes plus
// fsReserve right now. The limit above uses the free space of the last
// measurement; this fresh statfs (a microsecond) also catches another writer
// that filled the filesystem since. Unknown free space counts as room.
func (s *Store) fsRoom(need int64) bool {
	free, err := fsAvailable(s.opts.Dir)
	return err != nil || free-need >= fsReserve
}

func (s *Store) reserve() int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.reserveLocked()
}
