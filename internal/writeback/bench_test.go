package writeback

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/testutil"
)

// BenchmarkJournalWrite is a held 10 KiB PUT's write to the journal, as a
// node makes it before acknowledging (durable on return), by 1 and 16
// concurrent writers of distinct keys. Each written version is dropped
// again (as once S3 has it), so the journal stays small. ns/op is the
// inverse of the throughput; µs/write what each writer waited.
func BenchmarkJournalWrite(b *testing.B) {
	body := testutil.RandomBytes(rand.New(rand.NewPCG(1, 1)), 10<<10)
	for _, writers := range []int{1, 16} {
		b.Run(fmt.Sprintf("10KiB/writers=%d", writers), func(b *testing.B) {
			j, err := Open(b.TempDir(), 1<<40)
			testutil.Must(b, err)
			defer j.Close()
			var next, took atomic.Int64
			var wg sync.WaitGroup
			b.SetBytes(int64(len(body)))
			b.ResetTimer()
			for w := range writers {
				wg.Go(func() {
					for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
						start := time.Now()
						e, err := j.Write(Entry{Name: Name{"team-a", "bucket-a", strconv.Itoa(w) + "/" + strconv.FormatInt(i, 10)},
							Version: j.NextVersion(), Op: OpPut, Size: int64(len(body)), LastModified: time.Now()}, bytes.NewReader(body))
						if err != nil {
							b.Error(err)
							return
						}
						took.Add(int64(time.Since(start)))
						j.Drop(e)
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(took.Load())/float64(b.N)/1e3, "µs/write") // a write's latency, mean
		})
	}
}
