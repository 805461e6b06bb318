package clickhouse

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/testutil/benchtest"
)

// TestRunQuick runs the whole part on a tiny table: real MinIO behind the
// toxiproxy link, real cachenode processes, real chdb. It checks the
// harness, not speed: every cell measured, the S3 traffic where each row
// says it comes from, and the same answers everywhere.
func TestRunQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("runs MinIO, cachenode processes and chdb")
	}
	env := benchtest.Env(t, "b2")
	env.Bin = filepath.Join(env.Root, "bin") // chdb's virtualenv is there too
	if p := os.Getenv("MINIO_BIN"); p != "" && p != filepath.Join(env.Bin, "minio") {
		t.Logf("MINIO_BIN=%s; the bench uses %s", p, filepath.Join(env.Bin, "minio"))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	res, err := measure(ctx, env)
	if err != nil {
		t.Fatal(err)
	}

	if res.Load.Rows != quickRows || res.Load.Compressed <= 0 || res.Load.ScatteredRows <= 0 {
		t.Fatalf("load: %+v", res.Load)
	}
	// The link adds its latency to every request.
	if res.Probe.Link1KiB < DefaultLink.Latency {
		t.Errorf("a GET through the link took %v, less than the injected %v", res.Probe.Link1KiB, DefaultLink.Latency)
	}
	scat := indexOf("scattered")
	for _, ri := range res.shownRows() {
		for qi, q := range queries {
			for h, c := range res.Cells[ri][qi] {
				// (Hot, rows 2 and 7 may read nothing from their endpoint.)
				if c.Seconds <= 0 || c.CHGets <= 0 && ri != 1 && !(ri == chPageRow && h == 1) {
					t.Errorf("row %d %s run %d: %+v", ri+1, q, h, c)
				}
				// ClickHouse's page cache is off everywhere but row 7.
				if ri != chPageRow && c.CHPageHits+c.CHPageMisses != 0 {
					t.Errorf("row %d %s run %d looked blocks up in ClickHouse's page cache: %+v", ri+1, q, h, c)
				}
			}
		}
	}
	checkCHPage(t, res)
	for qi, q := range queries {
		cold := func(ri int) cell { return res.Cells[ri][qi][0] }
		hot := func(ri int) cell { return res.Cells[ri][qi][1] }
		// Row 1 reads S3 both times; row 2's hot run reads its local cache.
		if cold(0).S3.GETs == 0 || hot(0).S3.GETs == 0 {
			t.Errorf("%s row 1: S3 GETs cold %d hot %d, want both > 0", q, cold(0).S3.GETs, hot(0).S3.GETs)
		}
		// (A hot run still makes a GET or two of a few bytes that
		// ClickHouse does not cache, so compare bytes.)
		if cold(1).S3.GETs == 0 || hot(1).S3.GETBytes*100 > cold(1).S3.GETBytes || hot(1).CHCacheBytes == 0 {
			t.Errorf("%s row 2: cold %+v hot %+v; want S3 cold, the local cache hot", q, cold(1), hot(1))
		}
		// Row 3 fills the cache from S3; row 4 and 5 are served without S3.
		if cold(2).S3.GETs == 0 || cold(2).NodeMisses == 0 {
			t.Errorf("%s row 3 cold: %+v, want misses to S3", q, cold(2))
		}
		// (ClickHouse may read a small file that row 3 did not, so
		// "served by the cache" allows a stray GET.)
		for ri := 3; ri < 5; ri++ {
			for h, c := range res.Cells[ri][qi] {
				if c.S3.GETs*10 > cold(2).S3.GETs || c.S3.GETBytes*100 > cold(2).S3.GETBytes {
					t.Errorf("%s row %d run %d went to S3: %+v (row 3 cold: %+v)", q, ri+1, h, c, cold(2))
				}
			}
		}
		if cold(3).PageMisses == 0 || cold(3).NodeRAM+cold(3).NodeDisk == 0 {
			t.Errorf("%s row 4 cold: %+v, want gateway misses served by the nodes", q, cold(3))
		}
		// Background page fills are for chunks ClickHouse read part of:
		// never more than the page cache misses.
		if cold(3).BGFills > cold(3).PageMisses {
			t.Errorf("%s row 4 cold: %v background fills for %v page cache misses", q, cold(3).BGFills, cold(3).PageMisses)
		}
		t.Logf("%s row 4 cold: %v page cache misses, %v background fills, %v chunk reads on the nodes",
			q, cold(3).PageMisses, cold(3).BGFills, cold(3).NodeRAM+cold(3).NodeDisk)
		// (The page cache may refuse an entry now and then: mostly hits.)
		if cold(4).PageHits <= cold(4).NodeRAM+cold(4).NodeDisk {
			t.Errorf("%s row 5 cold: %+v, want the gateway's RAM to serve it", q, cold(4))
		}
	}
	// G2 faults its page cache in before it is ready: CPU before any query.
	for _, q := range queries {
		if st := res.G2Start[q]; len(st) != len(res.Runs) || st[0].Seconds <= 0 || st[0].CPUSeconds <= 0 {
			t.Errorf("%s: G2 start %+v, want its time and CPU", q, st)
		}
	}
	if res.Checked["full"] != "[[30000]]" {
		t.Errorf("full scan answer %q", res.Checked["full"])
	}
	if !strings.HasPrefix(res.Checked["scattered"], "[[") || res.Cells[0][scat][0].Answer != res.Checked["scattered"] {
		t.Errorf("scattered answers: %q", res.Checked["scattered"])
	}

	// The chunk size comparison: every cell measured at every size, and
	// the nodes really cut the table into chunks of that size: filling the
	// cache takes more S3 GETs with smaller chunks.
	sw := res.Chunks
	if sw == nil || len(sw.Sizes) != len(sweepSizesQuick) || len(sw.Runs) != 1 {
		t.Fatalf("chunk size sweep: %+v", sw)
	}
	for i, sz := range sw.Sizes {
		for ri := 2; ri < 5; ri++ {
			for qi, q := range queries {
				for h := range 2 {
					if c := sw.cell(i, ri, qi, h); c.Seconds <= 0 || c.CHGets <= 0 {
						t.Errorf("chunk size %d, row %d %s %d: %+v", sz, ri+1, q, h, c)
					}
				}
			}
		}
	}
	full := indexOf("full")
	small, big := sw.cell(0, 2, full, 0).S3, sw.cell(len(sw.Sizes)-1, 2, full, 0).S3
	t.Logf("filling the cache for the full scan: %d GETs at %d, %d at %d", small.GETs, sw.Sizes[0], big.GETs, sw.Sizes[len(sw.Sizes)-1])
	if small.GETs <= big.GETs {
		t.Errorf("full scan, row 3 cold: %d S3 GETs with %d-byte chunks, %d with %d-byte chunks; want more with the smaller",
			small.GETs, sw.Sizes[0], big.GETs, sw.Sizes[len(sw.Sizes)-1])
	}

	sec, err := report(env, res)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"| row |", "Goals", "make bench BENCH_PARTS=b2", "img/b2-clickhouse-full.png", "Not in these rows: G2's start",
		"**ClickHouse's page cache on top.**", "7. distcache with ClickHouse's userspace page cache on top",
		"**Chunk size.**", "| 256.0 KiB |", "Least in each column"} {
		if !strings.Contains(sec.Markdown, want) {
			t.Errorf("section lacks %q", want)
		}
	}
	for _, q := range queries {
		if _, err := os.Stat(filepath.Join(env.ImgDir, "b2-clickhouse-"+q+".png")); err != nil {
			t.Error(err)
		}
	}
	t.Logf("section:\n%s", sec.Markdown)
}

// checkCHPage checks the page cache probe against the bytes ClickHouse
// read, and row 7 against it: where the engine looked blocks up in its
// page cache, the hot run read less from MinIO and row 7 was measured and
// hit; where it did not, the hot run read from MinIO what the cold run
// read (so the probe did not miss a cache whose counters it misread) and
// row 7 was left out.
func checkCHPage(t *testing.T, res *results) {
	t.Helper()
	pr := res.CHPage
	t.Logf("ClickHouse page cache probe: %+v; works: %v", pr, pr.Works())
	if pr.Bytes != res.Cache.PageCacheBytes || pr.Cold.CHBytes <= 0 {
		t.Errorf("page cache probe: %+v, want %d bytes and the cold run reading MinIO", pr, res.Cache.PageCacheBytes)
	}
	shown := res.shownRows()
	if !pr.Works() {
		if pr.Hot.CHBytes*10 < pr.Cold.CHBytes*9 {
			t.Errorf("page cache probe: no lookups, yet the hot run read %d bytes from MinIO against %d cold", pr.Hot.CHBytes, pr.Cold.CHBytes)
		}
		if shown[len(shown)-1] == chPageRow || res.Cells[chPageRow][0][0].Seconds != 0 {
			t.Errorf("row 7 measured without a page cache: %+v", res.Cells[chPageRow])
		}
		return
	}
	if pr.Hot.CHPageHits == 0 || pr.Hot.CHBytes >= pr.Cold.CHBytes {
		t.Errorf("page cache probe: hot run %+v, want hits and fewer bytes from MinIO than cold (%d)", pr.Hot, pr.Cold.CHBytes)
	}
	if shown[len(shown)-1] != chPageRow {
		t.Errorf("rows shown %v, want row 7", shown)
	}
	for qi, q := range queries {
		cold, hot := res.Cells[chPageRow][qi][0], res.Cells[chPageRow][qi][1]
		if cold.CHPageMisses == 0 || hot.CHPageHits == 0 || hot.CHBytes >= cold.CHBytes {
			t.Errorf("%s row 7: cold %+v hot %+v; want misses cold, hits hot and less from the gateway hot", q, cold, hot)
		}
	}
}
