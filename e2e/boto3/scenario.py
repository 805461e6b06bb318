#!/usr/bin/env python3
"""boto3-as-S3-client scenario, run with hack/boto3-venv.sh's python.

Drives boto3 (the AWS SDK for Python, default configuration but path-style
addressing, one attempt per call) against one S3 endpoint (MinIO directly,
or a distcache gateway in front of it) under S3_BUCKET/S3_PREFIX, and prints
ONE JSON document on stdout:

  {"results": {step: outcome, ...},   # deterministic: compare across endpoints
   "params":  {...},
   "info":    {step: outcome, ...}}   # what may differ between endpoints

An outcome is what the step returned (sizes, SHA-256s of bodies, ETags, key
lists) or {"error": S3 error code, "status": HTTP status}. The steps cover
what Python S3 tools do: put_object (plain, with SHA256 and CRC32 checksums,
from a file object), keys with spaces, '+', '%', '?', '#', '&', ';',
quotes, '<>', '\\', non-ASCII letters and emoji written, read, listed
(boto3's encoding-type=url) and deleted, the transfer manager's multipart upload and ranged
download, head, ranges, conditional GETs, ListObjectsV2 pages and
delimiters, ListObjects, copy_object and the managed (UploadPartCopy) copy,
presigned GET and PUT URLs (Signature Version 4), GetObjectAttributes,
DeleteObjects, a multipart upload aborted, bucket HEAD and location, and the
errors of missing keys. Under "info": a GET through a presigned URL made with
boto3's default signer for S3, which is Signature Version 2 (MinIO takes
it; S3 and the gateway refuse it).
"""

import hashlib
import io
import json
import os
import random
import ssl
import sys
import time
import urllib.error
import urllib.request

import boto3
from boto3.s3.transfer import TransferConfig
from botocore.config import Config
from botocore.exceptions import ClientError

BIG = 20 * 1024 * 1024 + 123  # three 8 MiB parts, the last short
PART = 8 * 1024 * 1024


def client(signature_version=None):
    cfg = {"s3": {"addressing_style": "path"}, "retries": {"max_attempts": 1}}
    if signature_version:
        cfg["signature_version"] = signature_version
    return boto3.client(
        "s3",
        endpoint_url=os.environ["S3_ENDPOINT"],
        aws_access_key_id=os.environ["S3_ACCESS_KEY"],
        aws_secret_access_key=os.environ["S3_SECRET_KEY"],
        region_name=os.environ.get("S3_REGION", "us-east-1"),
        config=Config(**cfg),
    )


def urlopen(req):
    """urllib's urlopen, trusting AWS_CA_BUNDLE as boto3 does (an https endpoint)."""
    ca = os.environ.get("AWS_CA_BUNDLE")
    return urllib.request.urlopen(req, context=ssl.create_default_context(cafile=ca) if ca else None)


def sha(b):
    return hashlib.sha256(b).hexdigest()


def error_of(e):
    if isinstance(e, ClientError):
        return {"error": e.response.get("Error", {}).get("Code", ""),
                "status": e.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)}
    if isinstance(e, urllib.error.HTTPError):
        body = e.read().decode("utf-8", "replace")
        code = body.split("<Code>", 1)[1].split("</Code>", 1)[0] if "<Code>" in body else ""
        return {"error": code, "status": e.code}
    raise e


def main():
    s3 = client()
    v4 = client("s3v4")
    bucket, prefix = os.environ["S3_BUCKET"], os.environ["S3_PREFIX"].strip("/") + "/"
    rnd = random.Random(20261128)
    big = rnd.randbytes(BIG)
    small = b"hello from boto3\n" * 7
    transfer = TransferConfig(multipart_threshold=PART, multipart_chunksize=PART, max_concurrency=4)
    results, info = {}, {}

    def step(name, fn, into=results):
        try:
            into[name] = fn()
        except (ClientError, urllib.error.HTTPError) as e:
            into[name] = error_of(e)

    def k(name):
        return prefix + name

    def get(key, **kw):
        r = s3.get_object(Bucket=bucket, Key=key, **kw)
        return {"sha256": sha(r["Body"].read()), "length": r["ContentLength"], "etag": r["ETag"]}

    step("put_object", lambda: s3.put_object(Bucket=bucket, Key=k("small"), Body=small)["ETag"])
    step("get_object", lambda: get(k("small")))
    def put_checksummed(key, body, alg):
        r = s3.put_object(Bucket=bucket, Key=k(key), Body=body, ChecksumAlgorithm=alg)
        return {"etag": r["ETag"], "checksum": r.get("Checksum" + alg), "type": r.get("ChecksumType")}
    step("put_object_sha256", lambda: put_checksummed("sha256", small, "SHA256"))
    step("put_object_crc32", lambda: put_checksummed("crc32", io.BytesIO(small), "CRC32"))
    step("get_object_checksum_mode", lambda: s3.get_object(Bucket=bucket, Key=k("crc32"),
                                                           ChecksumMode="ENABLED")["Body"].read() == small)
    step("put_object_fileobj", lambda: s3.put_object(Bucket=bucket, Key=k("three-mib"),
                                                     Body=io.BytesIO(big[:3 << 20]))["ETag"])

    def upload_big():
        s3.upload_fileobj(io.BytesIO(big), bucket, k("big"), Config=transfer)
        h = s3.head_object(Bucket=bucket, Key=k("big"))
        return {"length": h["ContentLength"], "etag": h["ETag"]}
    step("upload_fileobj_multipart", upload_big)

    def download_big():
        out = io.BytesIO()
        s3.download_fileobj(bucket, k("big"), out, Config=transfer)
        return sha(out.getvalue()) == sha(big)
    step("download_fileobj_ranged", download_big)
    step("get_range", lambda: get(k("big"), Range="bytes=100-199")["sha256"] == sha(big[100:200]))
    step("get_range_suffix", lambda: get(k("big"), Range="bytes=-10")["sha256"] == sha(big[-10:]))
    step("get_range_open", lambda: get(k("big"), Range=f"bytes={BIG - 1000}-")["sha256"] == sha(big[-1000:]))
    step("get_range_outside", lambda: get(k("small"), Range="bytes=100000-100010"))

    etag = s3.head_object(Bucket=bucket, Key=k("small"))["ETag"]
    step("get_if_none_match", lambda: get(k("small"), IfNoneMatch=etag))
    step("get_if_match_other", lambda: get(k("small"), IfMatch='"0123456789abcdef0123456789abcdef"'))
    step("get_if_match", lambda: get(k("small"), IfMatch=etag)["sha256"])
    step("head_missing", lambda: s3.head_object(Bucket=bucket, Key=k("missing")))
    step("get_missing", lambda: get(k("missing")))

    # Keys clients get wrong: escaped in the path, the signature and the
    # listings (boto3 asks for encoding-type=url and decodes them).
    odd = ["sp ace.txt", "plus+sign", "pct%20lit", "uni-ü-日本", "semi;colon", "q?mark", "hash#x", "amp&x=y",
           "tilde~", "emoji-😀", "quote'\"", "lt<gt>", "back\\slash", "trailing/"]

    def odd_keys():
        out = {}
        for name in odd:
            s3.put_object(Bucket=bucket, Key=k("odd/" + name), Body=name.encode())
            out[name] = [get(k("odd/" + name))["sha256"] == sha(name.encode()),
                         s3.head_object(Bucket=bucket, Key=k("odd/" + name))["ContentLength"]]
        listed = sorted(o["Key"][len(prefix):] for o in s3.list_objects_v2(Bucket=bucket, Prefix=k("odd/"))["Contents"])
        listed_v1 = sorted(o["Key"][len(prefix):] for o in s3.list_objects(Bucket=bucket, Prefix=k("odd/"))["Contents"])
        deleted = s3.delete_objects(Bucket=bucket, Delete={"Objects": [{"Key": k("odd/" + n)} for n in odd]})
        return {"objects": out, "listed": listed, "listed_v1": listed_v1,
                "deleted": sorted(d["Key"][len(prefix):] for d in deleted.get("Deleted", [])),
                "errors": deleted.get("Errors", [])}
    step("odd_keys", odd_keys)

    for i in range(5):
        s3.put_object(Bucket=bucket, Key=k(f"dir/{i}/f"), Body=b"x" * i)

    def list_v2_pages():
        pages = s3.get_paginator("list_objects_v2").paginate(
            Bucket=bucket, Prefix=prefix, PaginationConfig={"PageSize": 2})
        # Where the pages end is not compared: a page may hold fewer keys
        # than asked for (S3: "might contain fewer keys but will never
        # contain more"), as a merged listing of held keys does when a
        # held delete hides a key S3 still lists; MinIO ends a listing
        # that fills its last page with one more, empty.
        listed = [[(o["Key"][len(prefix):], o["Size"], o["ETag"]) for o in p.get("Contents", [])] for p in pages]
        return {"objects": [o for p in listed for o in p], "pages_within_size": all(len(p) <= 2 for p in listed)}
    step("list_objects_v2_pages", list_v2_pages)

    def list_delimiter():
        r = s3.list_objects_v2(Bucket=bucket, Prefix=k("dir/"), Delimiter="/")
        return {"prefixes": [p["Prefix"][len(prefix):] for p in r.get("CommonPrefixes", [])],
                "keys": [o["Key"] for o in r.get("Contents", [])], "count": r["KeyCount"]}
    step("list_objects_v2_delimiter", list_delimiter)
    step("list_objects_v1", lambda: [o["Key"][len(prefix):] for o in
                                     s3.list_objects(Bucket=bucket, Prefix=k("dir/"), MaxKeys=3)["Contents"]])

    step("copy_object", lambda: (s3.copy_object(Bucket=bucket, Key=k("copy"), CopySource={"Bucket": bucket, "Key": k("small")}),
                                 get(k("copy")))[1])

    def managed_copy():
        s3.copy({"Bucket": bucket, "Key": k("big")}, bucket, k("big-copy"), Config=transfer)
        return get(k("big-copy"))["sha256"] == sha(big)
    step("copy_upload_part_copy", managed_copy)

    def presigned_get():
        url = v4.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": k("small")}, ExpiresIn=300)
        return sha(urlopen(url).read())
    step("presigned_get_v4", presigned_get)

    def presigned_put():
        url = v4.generate_presigned_url("put_object", Params={"Bucket": bucket, "Key": k("presigned-put")}, ExpiresIn=300)
        urlopen(urllib.request.Request(url, data=b"put through a presigned URL", method="PUT")).read()
        return get(k("presigned-put"))["sha256"]
    step("presigned_put_v4", presigned_put)

    def presigned_get_default():
        url = s3.generate_presigned_url("get_object", Params={"Bucket": bucket, "Key": k("small")}, ExpiresIn=300)
        signer = "v2" if "AWSAccessKeyId=" in url else "v4"
        try:
            return {"signer": signer, "sha256": sha(urlopen(url).read())}
        except urllib.error.HTTPError as e:
            return {"signer": signer, **error_of(e)}
    step("presigned_get_default_signer", presigned_get_default, into=info)

    step("get_object_attributes", lambda: {key: v for key, v in s3.get_object_attributes(
        Bucket=bucket, Key=k("small"), ObjectAttributes=["ETag", "ObjectSize"]).items() if key in ("ETag", "ObjectSize")})

    def multipart_aborted():
        up = s3.create_multipart_upload(Bucket=bucket, Key=k("aborted"))["UploadId"]
        s3.upload_part(Bucket=bucket, Key=k("aborted"), UploadId=up, PartNumber=1, Body=b"p" * 100)
        parts = [(p["PartNumber"], p["Size"]) for p in s3.list_parts(Bucket=bucket, Key=k("aborted"), UploadId=up)["Parts"]]
        # The key itself as the prefix: MinIO lists uploads only for it.
        listed = [u["Key"][len(prefix):] for u in s3.list_multipart_uploads(Bucket=bucket, Prefix=k("aborted")).get("Uploads", [])]
        s3.abort_multipart_upload(Bucket=bucket, Key=k("aborted"), UploadId=up)
        return {"parts": parts, "uploads": listed}
    step("multipart_abort", multipart_aborted)
    step("get_aborted", lambda: get(k("aborted")))

    # Refused before its body is read (over https boto3 waits for 100
    # Continue), then the next request on the same connection.
    step("put_metadata_too_large", lambda: s3.put_object(Bucket=bucket, Key=k("too-much"), Body=b"b" * 1000,
                                                         Metadata={"big": "v" * 2100}))
    step("put_after_refusal", lambda: s3.put_object(Bucket=bucket, Key=k("after-refusal"), Body=b"a" * 1000)["ETag"])

    step("delete_objects", lambda: sorted(d["Key"][len(prefix):] for d in s3.delete_objects(
        Bucket=bucket, Delete={"Objects": [{"Key": k("copy")}, {"Key": k("presigned-put")}]})["Deleted"]))
    step("delete_object", lambda: s3.delete_object(Bucket=bucket, Key=k("three-mib"))["ResponseMetadata"]["HTTPStatusCode"])
    step("get_deleted", lambda: get(k("copy")))
    step("head_bucket", lambda: s3.head_bucket(Bucket=bucket)["ResponseMetadata"]["HTTPStatusCode"])
    # A bucket the gateway's tenant may not use is refused (403) before S3
    # is asked whether it exists (404 from S3 itself).
    step("head_bucket_missing", lambda: s3.head_bucket(Bucket=bucket + "-none"), into=info)
    step("get_bucket_location", lambda: "LocationConstraint" in s3.get_bucket_location(Bucket=bucket))
    step("list_after", lambda: sorted(o["Key"][len(prefix):] for o in
                                      s3.list_objects_v2(Bucket=bucket, Prefix=prefix).get("Contents", [])))

    json.dump({"results": results, "params": {"big": BIG, "part": PART}, "info": info}, sys.stdout)
    sys.stdout.write("\n")


if __name__ == "__main__":
    start = time.time()
    main()
    print(f"boto3 scenario: {time.time() - start:.2f}s", file=sys.stderr)
