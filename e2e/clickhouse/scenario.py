#!/usr/bin/env python3
"""ClickHouse-as-S3-client scenario, run with chdb (hack/chdb-venv.sh).

Drives ClickHouse's own S3 code against one S3 endpoint (MinIO directly, or a
distcache gateway in front of it) and prints ONE JSON document on stdout:

  {"results": {name: [[row], ...], ...},   # deterministic: compare across endpoints
   "params":  {...},                       # generation parameters used
   "info":    {...}}                       # timings and S3 counters; NOT deterministic

Steps:
  1. MergeTree table on an S3 disk at ENDPOINT/BUCKET/PREFIX/disk/ (path-style),
     declared inline with `SETTINGS disk = disk(type = s3, ...)`;
  2. INSERT several batches, OPTIMIZE TABLE ... FINAL, SELECTs, ALTER TABLE ...
     DELETE (classic mutation, mutations_sync) and DELETE FROM (lightweight),
     SELECTs again, DROP TABLE ... SYNC, then list what is left under the disk
     prefix (must be nothing);
  3. INSERT INTO FUNCTION s3(... 'Parquet') a Parquet file under PREFIX/parquet/
     and read it back with s3() (single file, glob, filtered, schema).

Marks, uncompressed blocks, the page cache and the query cache are dropped
before every group of SELECTs, so the reads really go to the endpoint.

Data (id runs over [0, batches*rows_per_batch)):
  grp  = id % 97
  d    = 2024-01-01 + id % 90 days       (3 monthly partitions)
  val  = (id * 2654435761) % 1000003
  name = 'name-' || (id % 1000)
  payload = hex(SHA256(toString(id)))    (64 chars, barely compressible)
Deletes: ALTER DELETE WHERE id % 10 = 3, then DELETE FROM WHERE grp = 7.
Parquet: parquet_rows rows with the same formulas (id from 0).

Settings come from flags or the environment (flag wins):
  --endpoint S3_ENDPOINT      http://host:port (a bare host:port means http)
  --access-key S3_ACCESS_KEY
  --secret-key S3_SECRET_KEY
  --bucket S3_BUCKET
  --prefix S3_PREFIX          key prefix for everything this run writes
  --region S3_REGION          default us-east-1 (used by the disk; the s3()
                              table function has no region argument)
Exit status is non-zero on any failure, with the failing statement on stderr.
"""

import argparse
import json
import os
import shutil
import sys
import tempfile
import time

TABLE = "events"


def parse_args():
    env = os.environ.get
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--endpoint", default=env("S3_ENDPOINT"))
    p.add_argument("--access-key", default=env("S3_ACCESS_KEY"))
    p.add_argument("--secret-key", default=env("S3_SECRET_KEY"))
    p.add_argument("--bucket", default=env("S3_BUCKET"))
    p.add_argument("--prefix", default=env("S3_PREFIX", "chdb-scenario"))
    p.add_argument("--region", default=env("S3_REGION", "us-east-1"))
    p.add_argument("--batches", type=int, default=5)
    p.add_argument("--rows-per-batch", type=int, default=100_000)
    p.add_argument("--parquet-rows", type=int, default=300_000)
    p.add_argument("--workdir", help="chdb session directory (default: a fresh temp dir, removed at exit)")
    a = p.parse_args()
    missing = [n for n in ("endpoint", "access_key", "secret_key", "bucket") if not getattr(a, n)]
    if missing:
        p.error("missing: " + ", ".join("--" + m.replace("_", "-") for m in missing))
    if "://" not in a.endpoint:
        a.endpoint = "http://" + a.endpoint
    a.endpoint = a.endpoint.rstrip("/")
    a.prefix = a.prefix.strip("/")
    return a


def sql_str(s):
    return "'" + s.replace("\\", "\\\\").replace("'", "\\'") + "'"


class Runner:
    def __init__(self, sess):
        self.sess = sess
        self.results = {}
        self.timings = {}

    def exec(self, sql, label=None):
        t = time.monotonic()
        try:
            self.sess.query(sql, "CSV")
        except Exception as e:  # chdb raises a plain RuntimeError with ClickHouse's message
            raise SystemExit(f"scenario: statement failed: {label or sql}\n{e}") from None
        self.timings[label or sql.split("\n")[0][:60]] = round(time.monotonic() - t, 3)

    def rows(self, sql):
        try:
            r = self.sess.query(sql, "JSONCompact")
        except Exception as e:
            raise SystemExit(f"scenario: query failed: {sql}\n{e}") from None
        body = r.bytes() if hasattr(r, "bytes") else str(r).encode()
        if not body.strip():
            return []
        return json.loads(body)["data"]

    def select(self, name, sql):
        t = time.monotonic()
        self.results[name] = self.rows(sql)
        self.timings[name] = round(time.monotonic() - t, 3)

    def drop_caches(self):
        for c in ("MARK CACHE", "UNCOMPRESSED CACHE", "PAGE CACHE", "QUERY CACHE"):
            try:
                self.sess.query(f"SYSTEM DROP {c}", "CSV")
            except Exception as e:  # not every build has every cache
                print(f"scenario: SYSTEM DROP {c}: {e}", file=sys.stderr)


def columns(id_expr):
    return f"""{id_expr} AS id,
        toUInt16(id % 97) AS grp,
        toDate('2024-01-01') + toIntervalDay(id % 90) AS d,
        (id * 2654435761) % 1000003 AS val,
        concat('name-', toString(id % 1000)) AS name,
        hex(SHA256(toString(id))) AS payload"""


def table_selects(r, phase):
    t = TABLE
    r.drop_caches()
    r.select(f"{phase}.totals", f"""SELECT count(), sum(id), min(id), max(id), sum(val),
        uniqExact(grp), uniqExact(name), min(d), max(d) FROM {t}""")
    r.select(f"{phase}.by_grp", f"""SELECT grp, count(), sum(id), sum(val), min(name), max(name)
        FROM {t} GROUP BY grp ORDER BY grp""")
    r.select(f"{phase}.by_month", f"""SELECT toYYYYMM(d) AS m, count(), sum(val), uniqExact(grp)
        FROM {t} GROUP BY m ORDER BY m""")
    r.select(f"{phase}.range", f"""SELECT id, grp, d, val, name, payload FROM {t}
        WHERE id BETWEEN 234500 AND 234529 ORDER BY id""")
    r.select(f"{phase}.pk_lookup", f"""SELECT grp, id, payload FROM {t}
        WHERE grp = 42 AND id >= 400000 ORDER BY grp, id LIMIT 5""")
    r.select(f"{phase}.strings", f"""SELECT substring(payload, 1, 1) AS c, count(), min(payload), max(payload),
        sum(length(name)), uniqExact(name) FROM {t} GROUP BY c ORDER BY c""")
    r.select(f"{phase}.top_val", f"SELECT id, val FROM {t} ORDER BY val DESC, id LIMIT 10")
    r.select(f"{phase}.fingerprint", f"""SELECT groupBitXor(cityHash64(id, grp, d, val, name, payload)),
        sum(cityHash64(payload, id)) FROM {t}""")


def main():
    a = parse_args()
    base = f"{a.endpoint}/{a.bucket}/{a.prefix}/"
    disk_url = base + "disk/"
    parquet_url = base + "parquet/data.parquet"
    creds = f"{sql_str(a.access_key)}, {sql_str(a.secret_key)}"

    t0 = time.monotonic()
    from chdb import session  # seconds on a cold start; keep it inside the timing

    workdir = a.workdir or tempfile.mkdtemp(prefix="chdb-scenario-")
    sess = session.Session(workdir)
    r = Runner(sess)
    r.timings["chdb_start"] = round(time.monotonic() - t0, 3)
    try:
        # Numbers as JSON numbers (not strings) so results compare as values.
        r.exec("SET output_format_json_quote_64bit_integers = 0")
        r.exec("SET output_format_json_quote_decimals = 0")
        r.exec("SET mutations_sync = 2")
        r.exec(f"DROP TABLE IF EXISTS {TABLE} SYNC")

        disk = (f"disk(type = s3, endpoint = {sql_str(disk_url)}, access_key_id = {sql_str(a.access_key)}, "
                f"secret_access_key = {sql_str(a.secret_key)}, region = {sql_str(a.region)}, "
                f"metadata_path = {sql_str(os.path.join(workdir, 's3-disk-metadata') + '/')}, "
                # Parts above 8 MiB go up as multipart uploads (5 MiB parts):
                # a merge of the whole table exercises CreateMultipartUpload,
                # UploadPart and CompleteMultipartUpload.
                f"s3_max_single_part_upload_size = 8388608, s3_min_upload_part_size = 5242880)")
        r.exec(f"""CREATE TABLE {TABLE} (
            id UInt64, grp UInt16, d Date, val UInt64, name String, payload String
        ) ENGINE = MergeTree PARTITION BY toYYYYMM(d) ORDER BY (grp, id)
        SETTINGS disk = {disk}""", "create")

        n = a.rows_per_batch
        for b in range(a.batches):
            r.exec(f"INSERT INTO {TABLE} SELECT {columns('number')} FROM numbers({b * n}, {n})", f"insert_{b}")
        r.exec(f"OPTIMIZE TABLE {TABLE} FINAL", "optimize_final")
        r.select("parts_after_optimize", f"""SELECT partition, count(), sum(rows) FROM system.parts
            WHERE database = currentDatabase() AND table = '{TABLE}' AND active
            GROUP BY partition ORDER BY partition""")
        table_selects(r, "before_delete")

        r.exec(f"ALTER TABLE {TABLE} DELETE WHERE id % 10 = 3 SETTINGS mutations_sync = 2", "alter_delete")
        r.exec(f"DELETE FROM {TABLE} WHERE grp = 7 SETTINGS mutations_sync = 2", "lightweight_delete")
        r.select("mutations_unfinished", f"""SELECT count() FROM system.mutations
            WHERE database = currentDatabase() AND table = '{TABLE}' AND NOT is_done""")
        table_selects(r, "after_delete")

        r.exec(f"DROP TABLE {TABLE} SYNC", "drop")
        # Everything the disk wrote is gone after DROP ... SYNC (ListObjectsV2
        # through the endpoint; a glob with no match reads zero rows).
        r.select("disk_objects_after_drop",
                 f"SELECT count() FROM s3({sql_str(disk_url + '**')}, {creds}, 'One')")

        # Parquet through the s3() table function.
        pq = f"s3({sql_str(parquet_url)}, {creds}, 'Parquet')"
        r.exec(f"""INSERT INTO FUNCTION {pq} SELECT {columns('number')} FROM numbers({a.parquet_rows})
            SETTINGS s3_truncate_on_insert = 1, s3_max_single_part_upload_size = 8388608,
                     s3_min_upload_part_size = 5242880, output_format_parquet_row_group_size = 50000""",
               "parquet_write")
        r.drop_caches()
        r.results["parquet.schema"] = [row[:2] for row in r.rows(f"DESCRIBE TABLE {pq}")]
        r.select("parquet.totals", f"""SELECT count(), sum(id), min(id), max(id), sum(val), uniqExact(name),
            min(d), max(d) FROM {pq}""")
        r.select("parquet.by_grp", f"""SELECT grp, count(), sum(val), max(payload) FROM {pq}
            GROUP BY grp ORDER BY grp""")
        r.select("parquet.range", f"""SELECT id, grp, d, val, name, payload FROM {pq}
            WHERE id BETWEEN 123450 AND 123459 ORDER BY id""")
        r.select("parquet.fingerprint", f"""SELECT groupBitXor(cityHash64(id, grp, d, val, name, payload))
            FROM {pq}""")
        glob = f"s3({sql_str(base + 'parquet/*.parquet')}, {creds}, 'Parquet')"
        r.select("parquet.glob", f"SELECT _file, count(), sum(id) FROM {glob} GROUP BY _file ORDER BY _file")

        s3_events = {name: value for name, value in r.rows(
            "SELECT event, value FROM system.events WHERE event LIKE '%S3%' ORDER BY event")}
    finally:
        try:
            sess.close()
        finally:
            if not a.workdir:
                shutil.rmtree(workdir, ignore_errors=True)

    out = {
        "results": r.results,
        "params": {
            "batches": a.batches,
            "rows_per_batch": a.rows_per_batch,
            "parquet_rows": a.parquet_rows,
            "disk_url": disk_url,
            "parquet_url": parquet_url,
        },
        "info": {
            "seconds": r.timings,
            "total_seconds": round(time.monotonic() - t0, 3),
            "s3_events": s3_events,
        },
    }
    json.dump(out, sys.stdout, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
