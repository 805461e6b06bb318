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
where each run's bytes came from. With --s3-latency-ms (DEMO_S3_LATENCY_MS) an
extra run reads S3 directly through a local proxy that delays each request
by that much, standing in for S3's distance, which MinIO on this machine lacks.

  clickhouse.py demo  --gateway URL --gateway-key K --gateway-secret S
                      --s3 URL --s3-key K --s3-secret S --bucket B
                      --node-metrics URL[,URL...] --gateway-metrics URL
  clickhouse.py load  --endpoint URL --access-key K --secret-key S --bucket B   (JSON on stdout)
  clickhouse.py query --endpoint URL --access-key K --secret-key S --bucket B   (JSON on stdout)

The data is generated (deterministic hashes of the row number): dates,
marketplaces, customers, products, 20 categories, star ratings, votes, and
headlines and bodies of words from a small vocabulary, ZSTD-compressed like
text usually is in ClickHouse.
"""

import argparse
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
        out = {"rows": int(rows), "parts": int(parts), "bytes": int(size), "seconds": round(seconds, 3),
               "version": version}
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
                      f"AND table = '{TABLE}' AND name IN ('product_category', 'star_rating', 'review_body')")[0][0]
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
    args = [sys.executable, os.path.abspath(__file__), cmd, "--endpoint", endpoint, "--access-key", key,
            "--secret-key", secret, "--bucket", a.bucket, "--rows", str(a.rows)]
    p = subprocess.run(args, stdout=subprocess.PIPE, text=True)
    if p.returncode != 0:
        raise SystemExit(f"clickhouse.py {cmd} against {endpoint} failed (exit {p.returncode})")
    return json.loads(p.stdout)


class LatencyProxy:
    """A TCP proxy on 127.0.0.1 in front of HOST:PORT that holds every byte a
    client sends for DELAY seconds before passing it on: each request reaches
    the server DELAY later, as if it were that far away. Responses pass at
    once. It stands in for S3's per-request latency, which MinIO on this
    machine does not have."""

    def __init__(self, target, delay):
        import asyncio
        import threading

        self.asyncio, self.delay = asyncio, delay
        self.host, port = target.rsplit(":", 1)
        self.port = int(port)
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        server = asyncio.run_coroutine_threadsafe(
            asyncio.start_server(self.handle, "127.0.0.1", 0), self.loop).result()
        self.address = "127.0.0.1:%d" % server.sockets[0].getsockname()[1]

    async def handle(self, client_r, client_w):
        asyncio, loop = self.asyncio, self.loop
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


def cmd_demo(a):
    nodes = a.node_metrics.split(",")
    gw_metrics = [a.gateway_metrics]

    step(f"ClickHouse (chdb {importlib.metadata.version('chdb')}) loads {a.rows:,} reviews through the gateway")
    say(f"   MergeTree on an s3_plain_rewritable disk at {a.gateway}/{a.bucket}/{PREFIX}/ (the gateway's keys)")
    n0 = scrape(nodes)
    load = child(a, "load", a.gateway, a.gateway_key, a.gateway_secret)
    put = pick(diff(scrape(nodes), n0), "distcache_s3_requests_total", op="put", status="ok")
    say(f"   ClickHouse {load['version']}: {load['rows']:,} rows, {load['parts']} part(s), "
        f"{mib(load['bytes'])} compressed, in {load['seconds']:.1f}s")
    say(f"   written through the cache: the nodes stored every chunk and made {int(put)} PUTs to MinIO")

    step("one query, each run in a fresh ClickHouse process (ClickHouse's own caches empty)")
    say("   " + "\n   ".join(QUERY.splitlines()))
    runs = [("S3 directly: MinIO on this machine", a.s3, a.s3_key, a.s3_secret)]
    if a.s3_latency_ms > 0:
        proxy = LatencyProxy(a.s3.split("://", 1)[1], a.s3_latency_ms / 1000)
        runs.append((f"S3 directly: MinIO + {a.s3_latency_ms:g} ms/request", "http://" + proxy.address,
                     a.s3_key, a.s3_secret))
    runs += [
        ("distcache: first run on this compute", a.gateway, a.gateway_key, a.gateway_secret),
        ("distcache: hot", a.gateway, a.gateway_key, a.gateway_secret),
    ]
    results = []
    for name, endpoint, key, secret in runs:
        nb, gb = scrape(nodes), scrape(gw_metrics)
        r = child(a, "query", endpoint, key, secret)
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
    say("   MinIO here is on the same machine, well under a millisecond away, so reading it directly is")
    say("   about as fast as a cache; S3 answers each request in tens of milliseconds.")
    if a.s3_latency_ms > 0:
        say(f"   The {a.s3_latency_ms:g} ms row sends ClickHouse's requests to MinIO through a proxy on this")
        say("   machine that holds each one that long (DEMO_S3_LATENCY_MS).")

    step("cache nodes, since they started (sum over the pods' /metrics)")
    snap = total(scrape(nodes))
    t = served(snap)
    own = sum(v for r, v in t.items() if r != "forwarded")
    hits = t["hit_ram"] + t["hit_disk"]
    for res, label in TIERS:
        note = "  (also counted by the chunk's owner; not in the ratios)" if res == "forwarded" else ""
        say(f"   bytes served from {label:<15} {mib(t[res]):>12}{note}")
    cr = {r: pick(snap, "distcache_chunk_reads_total", result=r) for r, _ in TIERS}
    cown = sum(v for r, v in cr.items() if r != "forwarded")
    say(f"   byte hit ratio   {100 * hits / own if own else 0:5.1f}%  ({mib(hits)} of {mib(own)})")
    say(f"   chunk hit ratio  {100 * (cr['hit_ram'] + cr['hit_disk']) / cown if cown else 0:5.1f}%  "
        f"({int(cr['hit_ram'] + cr['hit_disk'])} of {int(cown)} chunk reads)")
    say(f"   cached now: {mib(pick(snap, 'distcache_store_bytes', tier='ram'))} in RAM, "
        f"{mib(pick(snap, 'distcache_store_bytes', tier='disk'))} on disk, "
        f"{int(pick(snap, 'distcache_store_chunks'))} chunks")


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
    d.add_argument("--rows", type=int, default=int(env("DEMO_ROWS", "600000")))
    d.add_argument("--s3-latency-ms", type=float, default=float(env("DEMO_S3_LATENCY_MS", "0")),
                   help="an extra run against S3 directly, with this latency added to each request")
    a = p.parse_args()
    for k in ("endpoint", "gateway", "s3"):
        if getattr(a, k, None):
            setattr(a, k, getattr(a, k).rstrip("/"))
    {"load": cmd_load, "query": cmd_query, "demo": cmd_demo}[a.cmd](a)


if __name__ == "__main__":
    main()
