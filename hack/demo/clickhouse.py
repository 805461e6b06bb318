#!/usr/bin/env python3
"""The ClickHouse part of `make demo` (hack/demo.sh), run with chdb (hack/chdb-venv.sh).

ClickHouse's engine on the host loads a reviews table onto an S3 disk through
the distcache gateway, then runs one query in three fresh ClickHouse
processes (each with its own caches empty):

  a. against S3 directly (MinIO, no cache),
  b. through the gateway: the first run of this query on this compute,
  c. through the gateway again: hot.

The disk is `s3_plain_rewritable`: the table's metadata lives in the bucket
with its data, so any process that knows the schema and the table's UUID can
ATTACH it from any endpoint that serves the bucket, MinIO or the gateway.
Between runs it reads the cache nodes' /metrics and the gateway's, and shows
where each run's bytes came from; at the end it prints the Grafana
dashboard's hit ratio and bytes-by-tier queries (hack/demo/dashboard.py) as
the Prometheus that hack/demo.sh runs on the host evaluates them.

S3 here is MinIO on this machine. With --s3-latency-ms (DEMO_S3_LATENCY_MS)
hack/demo.sh puts it behind `clickhouse.py link`, a proxy on the host that
delays each request by that much, standing in for S3's distance: ClickHouse
reading S3 directly and the cache nodes in the cluster both reach MinIO
through it.

  clickhouse.py demo  --gateway URL --gateway-key K --gateway-secret S
                      --s3 URL --s3-key K --s3-secret S --bucket B
                      --node-metrics URL[,URL...] --gateway-metrics URL
                      --prometheus URL --cache NAMESPACE/NAME [--s3-latency-ms MS]
  clickhouse.py load  --endpoint URL --access-key K --secret-key S --bucket B   (JSON on stdout)
  clickhouse.py query --endpoint URL --access-key K --secret-key S --bucket B   (JSON on stdout)
  clickhouse.py link  --listen HOST:PORT --target HOST:PORT --latency-ms MS      (runs until killed)

The data is generated (deterministic hashes of the row number): dates,
marketplaces, customers, products, 20 categories, star ratings, votes, and
headlines and bodies of words from a small vocabulary, ZSTD-compressed like
text usually is in ClickHouse.
"""

import argparse
import asyncio
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request

import dashboard  # hack/demo/dashboard.py

TABLE = "reviews"
# Fixed, so that every process attaches the same table (the data path in the
# bucket is store/<first 3 of the UUID>/<UUID>/).
TABLE_UUID = "d15c0c4e-0000-4000-8000-000000000005"
PREFIX = "clickhouse"  # the disk's root in the bucket

SCHEMA = """(
    review_date Date,
    marketplace LowCardinality(String),
    customer_id UInt64,
    review_id String,
    product_id String,
    product_category LowCardinality(String),
    star_rating UInt8,
    helpful_votes UInt32,
    total_votes UInt32,
    verified_purchase Bool,
    review_headline String CODEC(ZSTD(1)),
    review_body String CODEC(ZSTD(1))
) ENGINE = MergeTree ORDER BY (product_category, review_date)"""

# The columns QUERY reads, and those the load reads back: the others but the
# two largest, about 20 chunks (so every cache node serves some) and 10 MiB
# (so that the gateway's page cache, 64 MiB in config/local, holds the query's
# columns beside them).
QUERY_COLUMNS = ("product_category", "star_rating", "review_body")
READ_BACK = [c for c in re.findall(r"^\s+(\w+) ", SCHEMA, re.M)
             if c not in QUERY_COLUMNS + ("review_id", "review_headline")]

QUERY = f"""SELECT product_category, count() AS reviews, round(avg(star_rating), 2) AS stars,
       countIf(review_body ILIKE '%battery%') AS battery
FROM {TABLE} GROUP BY product_category ORDER BY reviews DESC, product_category LIMIT 5"""

WORDS = """great good bad poor excellent quality price fast slow shipping works broke battery screen
sound love hate recommend would again product item seller return refund size fits small large color
cheap expensive value money time use daily months weeks after before easy hard instructions box
arrived damaged perfect disappointed happy gift kids loved bought second better worse than expected
described picture looks feels solid flimsy plastic metal comfortable charge cable app setup minutes
hours customer service support replaced warranty""".split()
CATEGORIES = """Books Electronics Wireless Home Kitchen Toys Apparel Shoes Beauty Sports Outdoors Grocery
Music Video_DVD PC Tools Automotive Pet_Products Office_Products Jewelry""".split()


def sql_str(s):
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def sql_array(items):
    return "[" + ",".join(sql_str(i) for i in items) + "]"


def generate(rows):
    w, c = sql_array(WORDS), sql_array(CATEGORIES)
    nw, nc = len(WORDS), len(CATEGORIES)
    h = "cityHash64(number, {})".format
    return f"""SELECT
        toDate('2014-01-01') + toIntervalDay({h(1)} % 3650),
        ['US', 'UK', 'DE', 'FR', 'JP'][1 + {h(2)} % 5],
        {h(3)} % 5000000,
        concat('R', hex({h(4)})),
        concat('B0', leftPad(toString({h(5)} % 200000), 8, '0')),
        {c}[1 + {h(6)} % {nc}],
        toUInt8(1 + least({h(7)} % 7, 4)),
        toUInt32({h(8)} % 20),
        toUInt32({h(8)} % 20 + {h(9)} % 5),
        {h(10)} % 10 < 8,
        arrayStringConcat(arrayMap(i -> {w}[1 + cityHash64(number, 11, i) % {nw}], range(2 + {h(12)} % 5)), ' '),
        arrayStringConcat(arrayMap(i -> {w}[1 + cityHash64(number, 13, i) % {nw}], range(8 + {h(14)} % 40)), ' ')
    FROM numbers({rows})"""


# ---------------------------------------------------------------- one ClickHouse process


class ClickHouse:
    """A chdb session in a temporary directory, with the reviews table on an
    s3_plain_rewritable disk at ENDPOINT/BUCKET/PREFIX/."""

    def __init__(self, a):
        from chdb import session

        self.workdir = tempfile.mkdtemp(prefix="distcache-demo-chdb-")
        self.sess = session.Session(self.workdir)
        self.disk = (f"disk(type = s3_plain_rewritable, endpoint = {sql_str(f'{a.endpoint}/{a.bucket}/{PREFIX}/')}, "
                     f"access_key_id = {sql_str(a.access_key)}, secret_access_key = {sql_str(a.secret_key)}, "
                     f"region = 'us-east-1')")

    def close(self):
        try:
            self.sess.close()
        finally:
            shutil.rmtree(self.workdir, ignore_errors=True)

    def run(self, sql):
        try:
            r = self.sess.query(sql, "JSONCompact")
        except Exception as e:  # chdb raises RuntimeError with ClickHouse's message
            raise SystemExit(f"clickhouse: failed: {sql.splitlines()[0]}...\n{e}") from None
        body = r.bytes() if hasattr(r, "bytes") else str(r).encode()
        return json.loads(body)["data"] if body.strip() else []

    def attach(self):
        self.run(f"ATTACH TABLE {TABLE} UUID '{TABLE_UUID}' {SCHEMA} SETTINGS disk = {self.disk}")

    def s3_events(self):
        rows = self.run("SELECT event, value FROM system.events WHERE event IN "
                        "('S3GetObject', 'ReadBufferFromS3Bytes', 'S3ListObjects', 'S3HeadObject')")
        return {k: int(v) for k, v in rows}


def cmd_load(a):
    ch = ClickHouse(a)
    try:
        # A table from an earlier run: attach it and drop it with its objects.
        ch.attach()
        ch.run(f"DROP TABLE {TABLE} SYNC")
        ch.run(f"CREATE TABLE {TABLE} UUID '{TABLE_UUID}' {SCHEMA} SETTINGS disk = {ch.disk}")
        t = time.monotonic()
        ch.run(f"INSERT INTO {TABLE} {generate(a.rows)}")
        seconds = time.monotonic() - t
        rows, parts, size, version = ch.run(f"""SELECT sum(rows), count(), sum(bytes_on_disk), version()
            FROM system.parts WHERE database = currentDatabase() AND table = '{TABLE}' AND active""")[0]
        # Read back columns the query does not read (READ_BACK) so that the
        # nodes' and the gateway's counters of the tenant's reads exist
        # before the query runs: a series appears at its first increment,
        # and Prometheus (so the dashboard) counts a counter's growth from
        # its first sample on.
        checked = ch.run(f"SELECT count() FROM {TABLE} WHERE NOT ignore({', '.join(READ_BACK)})")[0][0]
        out = {"rows": int(rows), "parts": int(parts), "bytes": int(size), "seconds": round(seconds, 3),
               "version": version, "read_back": int(checked)}
    finally:
        ch.close()
    json.dump(out, sys.stdout)


def cmd_query(a):
    ch = ClickHouse(a)
    try:
        ch.attach()
        # Part metadata was read by ATTACH; what the query reads is counted from here.
        before = ch.s3_events()
        t = time.monotonic()
        rows = ch.run(QUERY)
        seconds = time.monotonic() - t
        after = ch.s3_events()
        read = ch.run(f"SELECT sum(data_compressed_bytes) FROM system.columns WHERE database = currentDatabase() "
                      f"AND table = '{TABLE}' AND name IN {QUERY_COLUMNS}")[0][0]
    finally:
        ch.close()
    json.dump({"seconds": round(seconds, 3), "rows": rows, "column_bytes": int(read),
               "s3": {k: after.get(k, 0) - before.get(k, 0) for k in after}}, sys.stdout)


# ---------------------------------------------------------------- metrics

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)')
LABEL = re.compile(r'(\w+)="((?:[^"\\]|\\.)*)"')


def scrape(urls):
    """Each URL's samples, {(metric, labels): value}; a URL that does not
    answer (a pod that went away) is left out, with a warning."""
    snap = {}
    for url in urls:
        try:
            with urllib.request.urlopen(url, timeout=10) as r:
                text = r.read().decode()
        except OSError as e:
            print(f"clickhouse.py: {url}: {e} (left out)", file=sys.stderr)
            continue
        samples = snap[url] = {}
        for line in text.splitlines():
            m = SAMPLE.match(line)
            if m:
                key = (m.group(1), tuple(sorted(LABEL.findall(m.group(2) or ""))))
                samples[key] = samples.get(key, 0.0) + float(m.group(3))
    return snap


def total(snap):
    """The samples summed over the URLs."""
    out = {}
    for samples in snap.values():
        for k, v in samples.items():
            out[k] = out.get(k, 0.0) + v
    return out


def diff(after, before):
    """What the counters grew by, summed over the URLs seen both times."""
    out = {}
    for url in after.keys() & before.keys():
        for k, v in after[url].items():
            out[k] = out.get(k, 0.0) + v - before[url].get(k, 0.0)
    return out


def pick(samples, name, **labels):
    """Sums NAME's samples whose labels match (a value may be a regex)."""
    s = 0.0
    for (n, ls), v in samples.items():
        if n != name:
            continue
        d = dict(ls)
        if all(re.fullmatch(p, d.get(k, "")) for k, p in labels.items()):
            s += v
    return s


READS = "get_chunk|get_object"
TIERS = [("hit_ram", "RAM"), ("hit_disk", "disk"), ("miss", "S3 (miss)"), ("forwarded", "another node")]


def served(snap):
    """Body bytes of reads, by result, over the cache nodes."""
    return {r: pick(snap, "distcache_response_bytes_total", op=READS, result=r) for r, _ in TIERS}


# ---------------------------------------------------------------- the demo


def mib(b):
    return f"{b / 2**20:.1f} MiB"


def say(msg=""):
    print(msg, flush=True)


def step(msg):
    bold, off = ("\033[1m", "\033[0m") if sys.stdout.isatty() else ("", "")
    start = os.environ.get("DEMO_START")  # hack/demo.sh's start, for its [elapsed] marks
    when = f"  [{int(time.time() - float(start))}s]" if start else ""
    say(f"\n{bold}== {msg}{off}{when}")


def child(a, cmd, endpoint, key, secret):
    """Runs `clickhouse.py CMD` in a fresh process and returns its JSON."""
    # --flag=value: generated keys may start with "-".
    args = [sys.executable, os.path.abspath(__file__), cmd, "--endpoint", endpoint, f"--access-key={key}",
            f"--secret-key={secret}", "--bucket", a.bucket, "--rows", str(a.rows)]
    p = subprocess.run(args, stdout=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise SystemExit(f"clickhouse.py {cmd} against {endpoint} failed (exit {p.returncode})")
    return json.loads(p.stdout)


class LatencyProxy:
    """A TCP proxy in front of HOST:PORT that holds every byte a client sends
    for DELAY seconds before passing it on: each request, on a new or a
    kept-alive connection, reaches the server DELAY later, as if it were that
    far away. Responses pass at once. It stands in for S3's per-request
    latency, which MinIO on this machine does not have (B2 in
    docs/benchmarks.md puts the same delay on the same side)."""

    def __init__(self, target, delay):
        self.host, port = target.rsplit(":", 1)
        self.port, self.delay = int(port), delay

    async def serve(self, listen):
        host, port = listen.rsplit(":", 1)
        server = await asyncio.start_server(self.handle, host, int(port))
        async with server:
            await server.serve_forever()

    async def handle(self, client_r, client_w):
        loop = asyncio.get_running_loop()
        try:
            server_r, server_w = await asyncio.open_connection(self.host, self.port)
        except OSError:
            client_w.close()
            return
        queue = asyncio.Queue()

        async def receive():  # client -> queue, stamped with when it may go on
            while data := await client_r.read(1 << 16):
                queue.put_nowait((loop.time() + self.delay, data))
            queue.put_nowait((loop.time() + self.delay, b""))

        async def send():  # queue -> server, in order, each part once its time has come
            while True:
                due, data = await queue.get()
                await asyncio.sleep(max(0.0, due - loop.time()))
                if not data:
                    server_w.write_eof()
                    return
                server_w.write(data)
                await server_w.drain()

        async def answer():  # server -> client, at once
            while data := await server_r.read(1 << 16):
                client_w.write(data)
                await client_w.drain()
            client_w.close()

        tasks = [asyncio.ensure_future(t()) for t in (receive, send, answer)]
        try:
            await asyncio.gather(*tasks)
        except (OSError, asyncio.CancelledError):
            pass
        finally:
            for t in tasks:
                t.cancel()
            server_w.close()
            client_w.close()


def cmd_link(a):
    """The link between MinIO and its readers (hack/demo.sh runs it in the
    background): a LatencyProxy until killed."""
    say(f"link {a.listen} -> {a.target}: each request {a.latency_ms:g} ms later")
    try:
        asyncio.run(LatencyProxy(a.target, a.latency_ms / 1000).serve(a.listen))
    except KeyboardInterrupt:
        pass


def cmd_demo(a):
    nodes = a.node_metrics.split(",")
    gw_metrics = [a.gateway_metrics]
    namespace, cache = a.cache.split("/", 1)
    prom = dashboard.Prometheus(a.prometheus)
    prom.wait(f"{len(nodes)} cache nodes and a gateway of {a.cache} up", lambda: (
        prom.scalar(f'count(up{{namespace="{namespace}",service="{cache}"}} == 1)') == len(nodes) and
        (prom.scalar(f'count(up{{cache_namespace="{namespace}",cache="{cache}"}} == 1)') or 0) >= 1))

    step(f"ClickHouse (chdb {importlib.metadata.version('chdb')}) loads {a.rows:,} reviews through the gateway")
    say(f"   MergeTree on an s3_plain_rewritable disk at {a.gateway}/{a.bucket}/{PREFIX}/ (the gateway's keys)")
    n0 = scrape(nodes)
    load = child(a, "load", a.gateway, a.gateway_key, a.gateway_secret)
    put = pick(diff(scrape(nodes), n0), "distcache_s3_requests_total", op="put", status="ok")
    say(f"   ClickHouse {load['version']}: {load['rows']:,} rows, {load['parts']} part(s), "
        f"{mib(load['bytes'])} compressed, in {load['seconds']:.1f}s")
    say(f"   written through the cache: the nodes stored every chunk and made {int(put)} PUTs to MinIO")
    say(f"   read back: {', '.join(READ_BACK)} ({load['read_back']:,} rows), columns the")
    say("   query does not read, so that every node's counters of the tenant's reads exist before the runs")
    load_end = time.time()

    step("one query, each run in a fresh ClickHouse process (ClickHouse's own caches empty)")
    say("   " + "\n   ".join(QUERY.splitlines()))
    if a.s3_latency_ms > 0:
        s3_name = f"S3 directly: MinIO + {a.s3_latency_ms:g} ms/request"
    else:
        s3_name = "S3 directly: MinIO on this machine"
    runs = [
        (s3_name, "S3 directly", a.s3, a.s3_key, a.s3_secret),
        ("distcache: first run on this compute", "distcache first", a.gateway, a.gateway_key, a.gateway_secret),
        ("distcache: hot", "distcache hot", a.gateway, a.gateway_key, a.gateway_secret),
    ]
    results, phases, window_start = [], [], None
    for name, short, endpoint, key, secret in runs:
        if endpoint == a.gateway and window_start is None:
            # Prometheus's window of the runs through distcache opens at a
            # scrape once the dashboard's rates no longer include the load.
            window_start, _ = prom.scraped_after(load_end + dashboard.RATE_SECONDS)
        nb, gb = scrape(nodes), scrape(gw_metrics)
        t0 = time.time()
        r = child(a, "query", endpoint, key, secret)
        phases.append((short, t0, time.time()))
        nd, gd = diff(scrape(nodes), nb), diff(scrape(gw_metrics), gb)
        r["name"], r["tiers"] = name, served(nd)
        r["s3_gets_by_cache"] = pick(nd, "distcache_s3_requests_total", op="get")
        r["page_hits"] = pick(gd, "distcache_client_page_cache_requests_total", result="hit")
        r["page_misses"] = pick(gd, "distcache_client_page_cache_requests_total", result="miss")
        results.append(r)
        say(f"   .. {name:<38} {r['seconds']:5.2f}s  ({endpoint})")
    answers = {json.dumps(r["rows"]) for r in results}
    if len(answers) != 1:
        raise SystemExit("the runs returned different answers:\n" + "\n".join(answers))
    say()
    for row in results[0]["rows"]:
        say("   " + "  ".join(f"{v!s:>12}" for v in row))
    say(f"   the same answer every time; the query reads {mib(results[0]['column_bytes'])} of compressed columns")

    step("S3 directly vs distcache")
    say(f"   {'run':<38} {'time':>6}  {'S3 GETs':>7}  served from")
    for r in results:
        if r["name"].startswith("S3"):
            gets = r["s3"].get("S3GetObject", 0)  # ClickHouse's own
            src = f"MinIO {mib(r['s3'].get('ReadBufferFromS3Bytes', 0))}"
        else:
            gets = int(r["s3_gets_by_cache"])  # what the cache nodes asked S3 for
            t = r["tiers"]
            src = ", ".join(f"nodes' {label} {mib(t[res])}" for res, label in TIERS if t[res] > 0)
            lookups = r["page_hits"] + r["page_misses"]  # pages of the gateway's cache (1 MiB by default)
            if lookups:
                src += (", " if src else "") + f"gateway RAM {int(r['page_hits'])} of {int(lookups)} page reads"
        say(f"   {r['name']:<38} {r['seconds']:>5.2f}s  {gets:>7}  {src}")
    say("   S3 GETs: ClickHouse's own when it reads S3 directly, the cache nodes' when it reads through")
    say("   distcache. The load wrote every chunk through the cache, so this compute's first run is")
    say("   already served by the nodes, and no run through distcache asked S3 for anything.")
    if a.s3_latency_ms > 0:
        say(f"   S3 is MinIO on this machine behind a link that holds each request {a.s3_latency_ms:g} ms, as S3 in a")
        say("   region answers (B2 in docs/benchmarks.md uses the same): ClickHouse reading S3 directly and the")
        say("   cache nodes writing and filling both go through it. DEMO_S3_LATENCY_MS=0 make demo runs without")
        say("   it: MinIO here is well under a millisecond away, about as fast as a cache.")
    else:
        say("   MinIO here is on the same machine, well under a millisecond away, so reading it directly is")
        say("   about as fast as a cache; S3 answers each request in tens of milliseconds (by default make")
        say("   demo puts MinIO behind a link that holds each request 30 ms).")
    snap = total(scrape(nodes))
    say(f"   cached now on the nodes: {mib(pick(snap, 'distcache_store_bytes', tier='ram'))} in RAM, "
        f"{mib(pick(snap, 'distcache_store_bytes', tier='disk'))} on disk, "
        f"{int(pick(snap, 'distcache_store_chunks'))} chunks (their /metrics)")

    _, end = prom.scraped_after(time.time())
    step("the hit rate as the Grafana dashboard shows it: its queries, on the Prometheus of this demo")
    say(f"   Prometheus {a.prometheus} scrapes the cache nodes and the gateway every second, with the labels")
    say("   the operator's ServiceMonitor and PodMonitor give them; the queries are the panels' own")
    say(f"   (internal/monitoring/dashboard.json), for namespace {namespace}, cache {cache}, every zone and tenant")
    dashboard.report(prom, namespace, cache, window_start, end, phases, say)


def main():
    env = os.environ.get
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("load", "query"):
        s = sub.add_parser(name)
        s.add_argument("--endpoint", required=True)
        s.add_argument("--access-key", required=True)
        s.add_argument("--secret-key", required=True)
        s.add_argument("--bucket", required=True)
        s.add_argument("--rows", type=int, default=600_000)
    d = sub.add_parser("demo")
    for flag in ("gateway", "gateway-key", "gateway-secret", "s3", "s3-key", "s3-secret", "bucket",
                 "node-metrics", "gateway-metrics"):
        d.add_argument("--" + flag, required=True)
    d.add_argument("--prometheus", required=True, help="the Prometheus scraping the cache nodes and the gateway")
    d.add_argument("--cache", required=True, help="NAMESPACE/NAME of the DistributedCache")
    d.add_argument("--rows", type=int, default=int(env("DEMO_ROWS", "600000")))
    d.add_argument("--s3-latency-ms", type=float, default=0,
                   help="the latency of the link between --s3 (MinIO) and its readers, for the output")
    lk = sub.add_parser("link")
    lk.add_argument("--listen", required=True, help="HOST:PORT")
    lk.add_argument("--target", required=True, help="HOST:PORT of MinIO")
    lk.add_argument("--latency-ms", type=float, required=True)
    a = p.parse_args()
    for k in ("endpoint", "gateway", "s3"):
        if getattr(a, k, None):
            setattr(a, k, getattr(a, k).rstrip("/"))
    {"load": cmd_load, "query": cmd_query, "demo": cmd_demo, "link": cmd_link}[a.cmd](a)


if __name__ == "__main__":
    main()
