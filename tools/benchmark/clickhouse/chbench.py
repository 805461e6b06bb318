#!/usr/bin/env python3
"""ClickHouse (chdb) side of the B2 benchmark (tools/benchmark/clickhouse).

Three commands, all with the S3 credentials in S3_ACCESS_KEY / S3_SECRET_KEY
and the table's disk at URL/B/PREFIX/ (--prefix, default clickhouse):

  chbench.py load  --workdir DIR --endpoint URL --bucket B --rows N
      creates the reviews table on an s3_plain_rewritable disk at
      URL/B/clickhouse/, fills it with N generated rows, merges it into one
      part and prints a JSON line describing it.

  chbench.py insert --workdir DIR --endpoint URL --bucket B --prefix P --rows N --batches K
      (part B5) creates the reviews table there, empty, with its background
      merges stopped, and generates the same N rows as load into K tables in
      memory (not timed); prints a JSON line, then answers commands as serve
      does:
        {"cmd": "insert"}                  -> seconds, batches (each INSERT's), events
        {"cmd": "verify", "query": "table"}
        {"cmd": "quit"}
      With --endpoint local the table is on the process's own local disk
      (no S3): the floor of what the INSERTs cost.

  chbench.py serve --workdir DIR --endpoint URL --bucket B [--fs-cache | --page-cache BYTES]
      one ClickHouse "compute node": attaches the table (through a local
      filesystem cache disk with --fs-cache; with --page-cache, a server
      whose userspace page cache holds BYTES, used by every query) and then answers
      commands, one JSON object per line on stdin, one JSON line each on
      stdout:
        {"cmd": "run", "query": "full"|"scattered"}  -> seconds, rows, events
        {"cmd": "verify", "query": ...}              -> the answer's checksum
        {"cmd": "quit"}
      The Go side snapshots its counters between commands, so each run is
      measured alone.

The table is shaped like ClickHouse's Amazon reviews example table
(amazon_reviews: same columns, ZSTD(1) everywhere, ORDER BY (review_date,
product_category)); the data is generated from hashes of the row number, so
every load of N rows makes the same table. Text columns are words drawn with a
Zipf-like distribution from a synthetic vocabulary (short words frequent, long
words rare), which compresses about like real review text.
"""

import argparse
import json
import os
import shutil
import sys
import time

TABLE = "reviews"
# Fixed, so every process attaches the same table (its objects are under
# store/<first 3 of the UUID>/<UUID>/ in the disk's prefix).
TABLE_UUID = "b2b2c0de-0000-4000-8000-000000000002"
PREFIX = "clickhouse"
# --endpoint local (insert only): the table on the server's own local disk,
# ClickHouse's defaults (no fsync of parts): what INSERTs cost without S3.
LOCAL = "local"

# The reviews table's columns, each compressed with ZSTD(1).
COLUMNS = [
    ("review_date", "Date"),
    ("marketplace", "LowCardinality(String)"),
    ("customer_id", "UInt64"),
    ("review_id", "String"),
    ("product_id", "String"),
    ("product_parent", "UInt64"),
    ("product_title", "String"),
    ("product_category", "LowCardinality(String)"),
    ("star_rating", "UInt8"),
    ("helpful_votes", "UInt32"),
    ("total_votes", "UInt32"),
    ("vine", "Bool"),
    ("verified_purchase", "Bool"),
    ("review_headline", "String"),
    ("review_body", "String"),
]
SCHEMA = ("(\n" + ",\n".join(f"    {name} {type_} CODEC(ZSTD(1))" for name, type_ in COLUMNS)
          + "\n) ENGINE = MergeTree ORDER BY (review_date, product_category)")

# A handful of dates spread over the ten years of data.
DATES = ["2010-03-14", "2012-07-01", "2014-11-23", "2016-02-29", "2019-06-05"]
DATE_LIST = "[" + ", ".join(f"'{d}'" for d in DATES) + "]"

QUERIES = {
    "full": f"SELECT count() FROM {TABLE} WHERE NOT ignore(*)",
    "scattered": f"SELECT * FROM {TABLE} WHERE review_date IN {DATE_LIST} FORMAT Null",
}
# What verify runs after the timed runs of the scattered query, whose own
# answer goes to FORMAT Null: the rows it selects, in a form that can be
# compared across endpoints. (The full scan's answer is its count; ClickHouse
# also checks every compressed block's checksum while it reads.)
VERIFY = {
    "scattered": f"SELECT count(), toString(sum(cityHash64(*))) FROM {TABLE} WHERE review_date IN {DATE_LIST}",
    # Every row of the table (B5's inserts).
    "table": f"SELECT count(), toString(sum(cityHash64(*))) FROM {TABLE}",
}

EVENTS = ["S3GetObject", "S3HeadObject", "S3ListObjects", "ReadBufferFromS3Bytes", "ReadBufferFromS3Microseconds",
          "CachedReadBufferReadFromCacheBytes", "CachedReadBufferReadFromSourceBytes", "SelectedMarks", "SelectedRows",
          "ReadCompressedBytes", "PageCacheHits", "PageCacheMisses", "PageCacheReadBytes"]

# ClickHouse's own count of its S3 requests and writes (B5's inserts).
INSERT_EVENTS = ["S3PutObject", "S3CreateMultipartUpload", "S3UploadPart", "S3CompleteMultipartUpload", "S3CopyObject",
                 "S3DeleteObjects", "S3HeadObject", "S3ListObjects", "S3GetObject", "WriteBufferFromS3Bytes",
                 "InsertedRows", "InsertedBytes"]

# The query setting that reads a remote disk (one without a filesystem cache)
# through the userspace page cache; the cache itself is a server setting.
PAGE_CACHE_SETTING = "use_page_cache_for_disks_without_file_cache = 1"

SYLLABLES = """ba be bi bo bu ca ce ci co cu da de di do du fa fe fi fo ga ge go ha he hi ho ka ke ki ko la le li
lo lu ma me mi mo mu na ne ni no nu pa pe pi po pu ra re ri ro ru sa se si so su ta te ti to tu va ve vi vo wa we
wi yo za zo st tr nd ng th sh ch er an in on en""".split()
VOCABULARY = 20000
CATEGORIES = """Books Electronics Wireless Home Kitchen Toys Apparel Shoes Beauty Sports Outdoors Grocery Music
Video_DVD PC Tools Automotive Pet_Products Office_Products Jewelry""".split()


def sql_str(s):
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


def sql_array(items):
    return "[" + ",".join(sql_str(i) for i in items) + "]"


def vocabulary():
    """Word number n: 1-5 syllables, more for rarer (higher) n."""
    syl, ns = sql_array(SYLLABLES), len(SYLLABLES)
    return f"""(SELECT groupArray(w) FROM (SELECT arrayStringConcat(arrayMap(j -> {syl}[1 + cityHash64(number, 99, j) % {ns}],
        range(1 + intDiv(toUInt32(log2(number + 2)), 4) + cityHash64(number, 98) % 2)), '') AS w
        FROM numbers({VOCABULARY}) ORDER BY number))"""


def generate(rows, start=0):
    """Rows start .. start+rows-1 of the table: the same rows whichever batches they come in."""
    h = "cityHash64(number, {})".format

    def text(salt, words):  # Zipf-like ranks: rank = V^(u^2), u uniform in [0, 1)
        return (f"arrayStringConcat(arrayMap(i -> words[toUInt32(floor(exp(log({VOCABULARY}) * "
                f"pow((cityHash64(number, {salt}, i) % 1000000) / 1000000.0, 2))))], range({words})), ' ')")

    return f"""WITH {vocabulary()} AS words SELECT
        toDate('2010-01-01') + toIntervalDay({h(1)} % 3650),
        ['US', 'UK', 'DE', 'FR', 'JP'][1 + {h(2)} % 5],
        {h(3)} % 50000000,
        concat('R', upper(hex({h(4)} % 1000000000000))),
        concat('B0', leftPad(toString({h(5)} % 2000000), 8, '0')),
        {h(5)} % 2000000 * 7 + 13,
        {text(6, f"3 + {h(5)} % 8")},
        {sql_array(CATEGORIES)}[1 + {h(7)} % {len(CATEGORIES)}],
        toUInt8(1 + least({h(8)} % 7, 4)),
        toUInt32({h(9)} % 20),
        toUInt32({h(9)} % 20 + {h(10)} % 5),
        {h(11)} % 100 < 2,
        {h(12)} % 10 < 8,
        {text(13, f"2 + {h(14)} % 6")},
        {text(15, f"10 + {h(16)} % 60")}
    FROM numbers({start}, {rows})"""


class ClickHouse:
    """A chdb session in its own directory: one ClickHouse server's state."""

    def __init__(self, workdir, endpoint, bucket, fs_cache=False, page_cache=0, prefix=PREFIX):
        from chdb import session

        shutil.rmtree(workdir, ignore_errors=True)
        os.makedirs(workdir)
        path = workdir
        if page_cache:
            # Server settings are chdb's startup arguments: query parameters
            # of the session's path. A fixed size (min = max), so the cache
            # does not shrink or grow with the process's memory use.
            path += f"?page_cache_max_size={page_cache}&page_cache_min_size={page_cache}"
        self.sess = session.Session(path)
        if endpoint == LOCAL:
            self.disk = None  # the server's own local disk: no S3 at all
            return
        key, secret = os.environ["S3_ACCESS_KEY"], os.environ["S3_SECRET_KEY"]
        self.disk = (f"disk(type = s3_plain_rewritable, endpoint = {sql_str(f'{endpoint}/{bucket}/{prefix}/')}, "
                     f"access_key_id = {sql_str(key)}, secret_access_key = {sql_str(secret)}, region = 'us-east-1')")
        if fs_cache:
            # ClickHouse's own local cache: a `type = cache` disk over the S3
            # disk (its path must be under the server's cache directory).
            cache_dir = os.path.join(workdir, "cache", "fs")
            self.disk = (f"disk(type = cache, disk = {self.disk}, path = {sql_str(cache_dir)}, "
                         f"max_size = '100Gi')")

    def run(self, sql, fmt="JSONCompact"):
        r = self.sess.query(sql, fmt)
        body = r.bytes() if hasattr(r, "bytes") else str(r).encode()
        if fmt != "JSONCompact" or not body.strip():
            return []
        return json.loads(body)["data"]

    def attach(self):
        self.run(f"ATTACH TABLE {TABLE} UUID '{TABLE_UUID}' {SCHEMA} SETTINGS disk = {self.disk}")

    def events(self, events=EVENTS):
        names = ", ".join(sql_str(e) for e in events)
        rows = self.run(f"SELECT event, value FROM system.events WHERE event IN ({names})")
        return {k: int(v) for k, v in rows}


def cmd_load(a):
    ch = ClickHouse(a.workdir, a.endpoint, a.bucket, prefix=a.prefix)
    t = time.monotonic()
    ch.run(f"CREATE TABLE {TABLE} UUID '{TABLE_UUID}' {SCHEMA} SETTINGS disk = {ch.disk}")
    ch.run(f"INSERT INTO {TABLE} {generate(a.rows)}", fmt="Null")
    ch.run(f"OPTIMIZE TABLE {TABLE} FINAL", fmt="Null")
    import chdb

    rows, parts, marks, unc, comp, version = ch.run(f"""SELECT sum(rows), count(), sum(marks),
        sum(data_uncompressed_bytes), sum(data_compressed_bytes), version()
        FROM system.parts WHERE database = currentDatabase() AND table = '{TABLE}' AND active""")[0]
    cols = ch.run(f"""SELECT name, data_uncompressed_bytes, data_compressed_bytes FROM system.columns
        WHERE database = currentDatabase() AND table = '{TABLE}' ORDER BY position""")
    matching = ch.run(f"SELECT count() FROM {TABLE} WHERE review_date IN {DATE_LIST}")[0][0]
    out = {"rows": int(rows), "parts": int(parts), "marks": int(marks), "uncompressed": int(unc),
           "compressed": int(comp), "version": version, "chdb": chdb.__version__, "seconds": round(time.monotonic() - t, 3),
           "columns": [[n, int(u), int(c)] for n, u, c in cols], "scattered_rows": int(matching),
           "queries": QUERIES}
    print(json.dumps(out), flush=True)


def with_settings(query, extra=""):
    """query with the settings of BENCH_B2_CH_SETTINGS ("name = value, ..."), if any, and extra."""
    settings = ", ".join(s for s in (os.environ.get("BENCH_B2_CH_SETTINGS", "").strip(), extra) if s)
    if not settings:
        return query
    body, fmt = query, ""
    if query.endswith(" FORMAT Null"):
        body, fmt = query[: -len(" FORMAT Null")], " FORMAT Null"
    return f"{body} SETTINGS {settings}{fmt}"


def batches(rows, n):
    """(start, rows) of n batches of rows, as even as can be."""
    out, start = [], 0
    for b in range(n):
        size = rows // n + (1 if b < rows % n else 0)
        out.append((start, size))
        start += size
    return out


def cmd_insert(a):
    import chdb

    ch = ClickHouse(a.workdir, a.endpoint, a.bucket, prefix=a.prefix)
    t = time.monotonic()
    ch.run(f"CREATE TABLE {TABLE} UUID '{TABLE_UUID}' {SCHEMA}" + (f" SETTINGS disk = {ch.disk}" if ch.disk else ""))
    # Only the inserts write: no merge starts during or after them, so what
    # S3 must end up holding is known once the last INSERT is answered.
    ch.run(f"SYSTEM STOP MERGES {TABLE}")
    # The rows, generated beforehand (with the table's column types), so the
    # INSERTs time ClickHouse writing parts, not the generator.
    todo = batches(a.rows, a.batches)
    for b, (start, n) in enumerate(todo):
        ch.run(f"CREATE TABLE src_{b} ENGINE = Memory AS SELECT * FROM {TABLE} WHERE 0")
        ch.run(f"INSERT INTO src_{b} {generate(n, start)}", fmt="Null")
    print(json.dumps({"generated": round(time.monotonic() - t, 3), "version": ch.run("SELECT version()")[0][0],
                      "chdb": chdb.__version__}), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        if req["cmd"] == "quit":
            break
        before = ch.events(INSERT_EVENTS)
        if req["cmd"] == "insert":
            took = []
            for b in range(len(todo)):
                t = time.monotonic()
                ch.run(f"INSERT INTO {TABLE} SELECT * FROM src_{b}", fmt="Null")
                took.append(time.monotonic() - t)
            out = {"seconds": sum(took), "batches": took}
            for b in range(len(todo)):
                ch.run(f"DROP TABLE src_{b}", fmt="Null")
        elif req["cmd"] == "verify":
            t = time.monotonic()
            out = {"rows": ch.run(VERIFY[req["query"]])}
            out["seconds"] = time.monotonic() - t
        else:
            raise SystemExit(f"chbench.py: unknown command {req!r}")
        after = ch.events(INSERT_EVENTS)
        out["events"] = {k: after.get(k, 0) - before.get(k, 0) for k in INSERT_EVENTS}
        print(json.dumps(out), flush=True)


def cmd_serve(a):
    ch = ClickHouse(a.workdir, a.endpoint, a.bucket, a.fs_cache, a.page_cache, a.prefix)
    extra = PAGE_CACHE_SETTING if a.page_cache else ""
    t = time.monotonic()
    ch.attach()
    hello = {"attached": round(time.monotonic() - t, 3), "events": ch.events()}
    if a.page_cache:
        # What the server made of the startup arguments: a size that did not
        # reach it shows here, not as a row that silently reads no cache.
        hello["page_cache_max_size"] = int(ch.run(
            "SELECT value FROM system.server_settings WHERE name = 'page_cache_max_size'")[0][0])
    print(json.dumps(hello), flush=True)
    for line in sys.stdin:
        req = json.loads(line)
        if req["cmd"] == "quit":
            break
        before = ch.events()
        t = time.monotonic()
        if req["cmd"] == "run":
            rows = ch.run(with_settings(QUERIES[req["query"]], extra))
        elif req["cmd"] == "verify":
            rows = ch.run(with_settings(VERIFY[req["query"]], extra))
        else:
            raise SystemExit(f"chbench.py: unknown command {req!r}")
        seconds = time.monotonic() - t
        after = ch.events()
        print(json.dumps({"seconds": seconds, "rows": rows,
                          "events": {k: after.get(k, 0) - before.get(k, 0) for k in EVENTS}}), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    sub = p.add_subparsers(dest="cmd", required=True)
    for name in ("load", "insert", "serve"):
        s = sub.add_parser(name)
        s.add_argument("--workdir", required=True)
        s.add_argument("--endpoint", required=True)
        s.add_argument("--bucket", required=True)
        s.add_argument("--prefix", default=PREFIX, help="the disk's objects are under bucket/PREFIX/")
        if name in ("load", "insert"):
            s.add_argument("--rows", type=int, required=True)
        if name == "insert":
            s.add_argument("--batches", type=int, required=True)
        elif name == "serve":
            c = s.add_mutually_exclusive_group()
            c.add_argument("--fs-cache", action="store_true", help="read through a local filesystem cache disk")
            c.add_argument("--page-cache", type=int, default=0, metavar="BYTES",
                           help="a userspace page cache of BYTES, used by every query")
    a = p.parse_args()
    a.endpoint = a.endpoint.rstrip("/")
    a.prefix = a.prefix.strip("/")
    {"load": cmd_load, "insert": cmd_insert, "serve": cmd_serve}[a.cmd](a)


if __name__ == "__main__":
    main()
