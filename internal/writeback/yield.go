package writeback

// Persistence yields to the writes the node is taking. A held write is
// acknowledged once its holders have it on disk; sending it to S3 can wait
// a little. While writes keep coming (ClickHouse's INSERTs come in bursts
// of a dozen files each), uploading the earlier ones competes with them
// for the CPU (hashing, TLS, the SDK) and the disk (the drops' records),
// and every held write of the burst waits longer for it. So the persister
// starts no upload while the node took a held write within Yield, for at
// most MaxYield in a row: writes that keep coming for longer are persisted
// as before, MaxYield late at most, and a node whose pinned space is half
// full persists without waiting, so that yielding never fills it.

import "time"

// Defaults of Persister.Yield and Persister.MaxYield.
const (
	// DefaultYield is longer than ClickHouse takes to build its next part
	// between the files of two INSERTs (40-50 ms measured in B5).
	DefaultYield    = 100 * time.Millisecond
	DefaultMaxYield = 2 * time.Second
)

// noteWrite records that a held write is being taken (the clock's time:
// yielding is about the machine's work now, not the journal's clock).
func (j *Journal) noteWrite() {
	j.mu.Lock()
	j.lastWrite = time.Now()
	j.mu.Unlock()
}

// lastWriteAt is when the last held write was taken here.
func (j *Journal) lastWriteAt() time.Time {
	j.mu.Lock()
	defer j.mu.Unlock()
	return j.lastWrite
}

// halfFull reports whether the pinned space is at least half used.
func (j *Journal) halfFull() bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	return 2*j.used >= j.limit
}

// yieldFor is how long the persister holds back its next pick at now (0:
// pick now).
func (p *Persister) yieldFor(now time.Time) time.Duration {
	yield, most := p.Yield, p.MaxYield
	if yield < 0 {
		return 0
	}
	if yield == 0 {
		yield = DefaultYield
	}
	if most <= 0 {
		most = DefaultMaxYield
	}
	quietAt := p.Journal.lastWriteAt().Add(yield)
	full := p.Journal.halfFull()
	p.yieldMu.Lock()
	defer p.yieldMu.Unlock()
	if !now.Before(quietAt) || full {
		p.yieldingSince = time.Time{}
		return 0
	}
	if p.yieldingSince.IsZero() {
		p.yieldingSince = now
	}
	until := quietAt
	if limit := p.yieldingSince.Add(most); limit.Before(until) {
		until = limit
	}
	if !now.Before(until) {
		return 0 // writes kept coming for MaxYield: persist meanwhile
	}
	return until.Sub(now)
}
