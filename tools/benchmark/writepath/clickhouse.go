package writepath

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/distcache/distcache/tools/benchmark/benchkit"
	"github.com/distcache/distcache/tools/benchmark/clickhouse"
)

// The ClickHouse row: ClickHouse's engine (chdb, as B2 runs it) creates
// B2's table (its definition, an s3_plain_rewritable disk) empty under a
// fresh prefix of the column and inserts B2's first rows (its generator)
// in batches, one INSERT after the other. The table's background merges
// are stopped, so the INSERTs' parts are everything it writes: once the
// last INSERT is answered, what S3 must end up with is known, and the
// write-back columns are timed until MinIO holds exactly that (the
// gateway's listing of the prefix, which shows held objects as S3 will).

// chConfig sizes the ClickHouse row.
type chConfig struct {
	rows, batches int
}

// chRowID is the ClickHouse row's name in BENCH_B5_ROWS.
const chRowID = "clickhouse"

// chSample is what the rounds of one column of the ClickHouse row
// measured, pooled.
type chSample struct {
	inserts *benchkit.Latencies // every INSERT
	rounds  []time.Duration     // each round's INSERTs, one after the other
	events  map[string]int64    // ClickHouse's counts (its S3 requests)
	s3      benchkit.S3Counts   // what reached S3 (MinIO) through the link during the INSERTs
	// s3Caught is, for a write-back column, what reached S3 from the
	// first INSERT's start until S3 had everything.
	s3Caught benchkit.S3Counts
	// ops are the gateway's requests during the INSERTs, by S3
	// operation (its duration histogram; gateway columns).
	ops   map[string]hop
	cpuCH time.Duration // ClickHouse's CPU during the INSERTs
	cpu   time.Duration // this process's (gateway, nodes, link) and MinIO's
	// catchUp is, for a gateway column, how long after the last INSERT's
	// answer MinIO held everything, each round.
	catchUp   []time.Duration
	generated time.Duration // creating the table and generating its rows (not timed as inserts)
}

func (s *chSample) total() time.Duration {
	var t time.Duration
	for _, r := range s.rounds {
		t += r
	}
	return t
}

// chEndpoint is where col's ClickHouse keeps its table: the link with
// MinIO's credentials for S3 directly, else the gateway with its own.
func (w *world) chEndpoint(col column, prefix string) clickhouse.Endpoint {
	if col.local {
		return clickhouse.Local
	}
	if !col.gateway {
		return clickhouse.Endpoint{URL: w.link.URL, AccessKey: w.minio.AccessKey, SecretKey: w.minio.SecretKey, Bucket: benchBucket, Prefix: prefix}
	}
	return clickhouse.Endpoint{URL: w.gateway.URL, AccessKey: w.gateway.AccessKey, SecretKey: w.gateway.SecretKey, Bucket: benchBucket, Prefix: prefix}
}

// chCell runs one round of the ClickHouse row against col: a fresh
// ClickHouse process inserts the rows, then answers the table's
// fingerprint (a SELECT of every row), while, for a gateway column, the
// bench waits until MinIO holds everything; a write-back table is then
// read by another fresh ClickHouse process from MinIO directly. Every
// fingerprint must be the same. It returns the prefix, to be removed.
func (w *world) chCell(ctx context.Context, col column, round int, into *chSample) (prefix string, err error) {
	prefix = col.prefix + fmt.Sprintf("b5/r%d/%s/%s", round, chRowID, col.id)
	in, err := w.ch.StartInsert(ctx, w.chEndpoint(col, prefix), w.cfg.ch.rows, w.cfg.ch.batches)
	if err != nil {
		return prefix, err
	}
	defer func() {
		if err != nil {
			in.Kill()
		}
	}()
	w.chVersion = fmt.Sprintf("chdb %s, ClickHouse %s", in.Chdb, in.Version)
	stopProfile, err := w.startProfile(col, row{id: chRowID}, round)
	if err != nil {
		return prefix, err
	}
	before, chBefore, opsBefore := w.snapshot(), benchkit.PidCPU(in.Pid()), gatewayOps(w.gateway.Reg)
	ins, err := in.Insert()
	stopProfile()
	if err != nil {
		return prefix, err
	}
	end := time.Now()
	chAfter := benchkit.PidCPU(in.Pid())
	after, opsAfter := w.snapshot(), gatewayOps(w.gateway.Reg)

	// Everything S3 must hold: the gateway lists held objects as S3 will.
	caught := make(chan catchUp, 1)
	if col.gateway {
		want, err := listPrefix(ctx, w.gateway.S3, prefix)
		if err != nil {
			return prefix, fmt.Errorf("listing the table through the gateway: %w", err)
		}
		if len(want) == 0 {
			return prefix, fmt.Errorf("the gateway lists nothing under %s after the INSERTs", prefix)
		}
		go func() { caught <- w.waitMinIO(ctx, prefix, want, end) }()
	}
	answer, err := in.Fingerprint()
	if err == nil {
		err = in.Close()
	}
	if err != nil {
		return prefix, err
	}
	if err := w.chCheck(col.name+", right after the INSERTs", answer); err != nil {
		return prefix, err
	}

	into.inserts = addLatencies(into.inserts, ins.Batches)
	into.rounds = append(into.rounds, ins.Total())
	if into.events == nil {
		into.events = map[string]int64{}
	}
	for k, v := range ins.Events {
		into.events[k] += v
	}
	into.s3 = addCounts(into.s3, after.s3.Sub(before.s3))
	into.cpuCH += chAfter - chBefore
	into.cpu += after.cpu - before.cpu
	into.generated += in.Generated
	if !col.gateway {
		return prefix, nil
	}
	if into.ops == nil {
		into.ops = map[string]hop{}
	}
	for op, h := range opsAfter {
		d := hop{h.sum - opsBefore[op].sum, h.n - opsBefore[op].n}
		if d.n > 0 {
			into.ops[op] = hop{into.ops[op].sum + d.sum, into.ops[op].n + d.n}
		}
	}
	c := <-caught
	if c.err != nil {
		return prefix, c.err
	}
	into.catchUp = append(into.catchUp, c.after)
	if col.replicas == 0 {
		return prefix, nil
	}
	into.s3Caught = addCounts(into.s3Caught, c.s3.Sub(before.s3))
	// Persisted: a fresh ClickHouse on MinIO directly (without the link
	// or the cache) reads the same table.
	direct := clickhouse.Endpoint{URL: w.minio.Endpoint, AccessKey: w.minio.AccessKey, SecretKey: w.minio.SecretKey, Bucket: benchBucket, Prefix: prefix}
	fresh, err := w.ch.Fingerprint(ctx, direct)
	if err != nil {
		return prefix, fmt.Errorf("a fresh ClickHouse on MinIO directly: %w", err)
	}
	return prefix, w.chCheck(col.name+", a fresh ClickHouse on MinIO directly once S3 had everything", fresh)
}

// chCheck requires every fingerprint of the run to be the same, and of
// every row inserted.
func (w *world) chCheck(where, answer string) error {
	if want := fmt.Sprintf("%d rows,", w.cfg.ch.rows); !strings.HasPrefix(answer, want) {
		return fmt.Errorf("ClickHouse, %s: the table holds %s, want %d rows", where, answer, w.cfg.ch.rows)
	}
	if w.chAnswer == "" {
		w.chAnswer = answer
	}
	if answer != w.chAnswer {
		return fmt.Errorf("ClickHouse, %s: the table holds %s, elsewhere %s", where, answer, w.chAnswer)
	}
	return nil
}

// catchUp is when MinIO held everything: how long after the INSERTs,
// and what had reached S3 by then.
type catchUp struct {
	after time.Duration
	s3    benchkit.S3Counts
	err   error
}

// waitMinIO waits until MinIO itself (without the link) lists exactly
// want under prefix, the same sizes and ETags.
func (w *world) waitMinIO(ctx context.Context, prefix string, want map[string]object, since time.Time) catchUp {
	deadline := time.Now().Add(5 * time.Minute)
	for {
		got, err := listPrefix(ctx, w.plain, prefix)
		if err != nil {
			return catchUp{err: err}
		}
		if maps.Equal(got, want) {
			return catchUp{after: time.Since(since), s3: w.link.Counts()}
		}
		if time.Now().After(deadline) {
			return catchUp{err: fmt.Errorf("ClickHouse's table: MinIO does not hold what the gateway lists 5 minutes after the INSERTs: %s",
				listDiff(want, got))}
		}
		select {
		case <-ctx.Done():
			return catchUp{err: ctx.Err()}
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// object is what a listing says of an object.
type object struct {
	size int64
	etag string
}

// listPrefix lists every object under prefix.
func listPrefix(ctx context.Context, c *s3.Client, prefix string) (map[string]object, error) {
	out := map[string]object{}
	p := s3.NewListObjectsV2Paginator(c, &s3.ListObjectsV2Input{Bucket: aws.String(benchBucket), Prefix: aws.String(prefix + "/")})
	for p.HasMorePages() {
		page, err := p.NextPage(ctx)
		if err != nil {
			return nil, err
		}
		for _, o := range page.Contents {
			out[aws.ToString(o.Key)] = object{size: aws.ToInt64(o.Size), etag: aws.ToString(o.ETag)}
		}
	}
	return out, nil
}

// listDiff names a few keys in which two listings differ.
func listDiff(want, got map[string]object) string {
	var d []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if g, ok := got[k]; !ok {
			d = append(d, "missing "+k)
		} else if g != want[k] {
			d = append(d, fmt.Sprintf("%s is %+v, not %+v", k, g, want[k]))
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			d = append(d, "extra "+k)
		}
	}
	if len(d) > 3 {
		d = append(d[:3], fmt.Sprintf("and %d more", len(d)-3))
	}
	return strings.Join(d, "; ")
}

// measureCH runs the ClickHouse row's columns of one round (in cols'
// order, then its floor, chLocal) and removes what they wrote.
func (w *world) measureCH(ctx context.Context, env benchkit.Env, cols []column, round int, rep *report) error {
	var prefixes []string
	for _, col := range append(slices.Clone(cols), chLocal) {
		if err := ctx.Err(); err != nil {
			return err
		}
		s := rep.ch[col.id]
		if s == nil {
			s = &chSample{}
			rep.ch[col.id] = s
		}
		n := len(s.rounds)
		prefix, err := w.chCell(ctx, col, round, s)
		prefixes = append(prefixes, prefix)
		if err != nil {
			return fmt.Errorf("ClickHouse INSERT, %s, round %d: %w", col.name, round, err)
		}
		line := fmt.Sprintf("round %d: ClickHouse INSERT %-24s %d INSERTs in %s", round, col.name, w.cfg.ch.batches,
			benchkit.Millis(s.rounds[n]))
		if col.gateway {
			line += ", MinIO had everything " + benchkit.Millis(s.catchUp[n]) + " after"
		}
		env.Logf("%s", line)
	}
	var keys []string
	for _, p := range prefixes {
		objs, err := listPrefix(ctx, w.plain, p)
		if err != nil {
			return err
		}
		keys = append(keys, slices.Collect(maps.Keys(objs))...)
	}
	return w.remove(ctx, keys)
}

// gatewayOps are the gateway's request durations so far, by operation.
func gatewayOps(g prometheus.Gatherer) map[string]hop {
	out := map[string]hop{}
	mfs, err := g.Gather()
	if err != nil {
		return out
	}
	for _, mf := range mfs {
		if mf.GetName() != "distcache_gateway_request_duration_seconds" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "operation" {
					h := out[l.GetValue()]
					out[l.GetValue()] = hop{h.sum + m.GetHistogram().GetSampleSum(), h.n + m.GetHistogram().GetSampleCount()}
				}
			}
		}
	}
	return out
}

func addLatencies(l *benchkit.Latencies, ds []time.Duration) *benchkit.Latencies {
	if l == nil {
		l = &benchkit.Latencies{}
	}
	for _, d := range ds {
		l.Add(d)
	}
	return l
}

func addCounts(a, b benchkit.S3Counts) benchkit.S3Counts {
	return benchkit.S3Counts{GETs: a.GETs + b.GETs, HEADs: a.HEADs + b.HEADs, Others: a.Others + b.Others, GETBytes: a.GETBytes + b.GETBytes}
}
