// Package gateway is the S3 API in front of a distcache cache: the handler
// of `cachenode gateway`, which runs next to compute (sidecar or DaemonSet)
// so that an unmodified S3 client (ClickHouse's S3 disk, any AWS SDK, curl
// --aws-sigv4) uses the cache by changing its endpoint.
//
// # Addressing and authentication
//
// Only path-style addressing is served: http://GATEWAY/BUCKET/KEY.
// Virtual-hosted-style requests (http://BUCKET.GATEWAY/KEY) are refused with
// 400 InvalidRequest and a message saying how to switch the client to
// path-style (UsePathStyle in aws-sdk-go-v2, force_path_style in boto3,
// s3ForcePathStyle in the JS SDK; ClickHouse always uses path-style for
// endpoints it does not recognise as AWS). A request is taken as
// virtual-hosted when its Host is a sub-domain of one of Config.Domains or
// of amazonaws.com.
//
// Every request must carry a valid SigV4 signature (Authorization header or
// presigned URL, every payload mode including aws-chunked uploads) made with
// the gateway's own access key and secret, which are not S3 credentials: the
// cache nodes sign again with the tenant's backend credentials. The gateway
// acts for one tenant, the one of its client certificate (or the one named
// with a peer certificate).
//
// # Operations
//
//	GetObject, HeadObject   from the cache: Stat (metadata cached by the
//	                        nodes), then the chunks of the range, fetched in
//	                        parallel (bounded read-ahead, never past the range)
//	                        through the client and its RAM page cache. Single Range (suffix and open-ended too; 206
//	                        with Content-Range, 416 InvalidRange), If-Match,
//	                        If-None-Match, If-Modified-Since,
//	                        If-Unmodified-Since (412 / 304), response-*
//	                        overrides. With versionId, partNumber (the
//	                        parts of a multipart object, as SDKs' transfer
//	                        managers read them) or SSE-C: passed through to
//	                        S3, uncached (for a WriteBack or Transient key,
//	                        whose current version S3 may not have yet, 501
//	                        NotImplemented).
//	PutObject               written through the cache (the node answers once
//	                        S3 has the object, then caches it), with its
//	                        Content-Type and the headers S3 stores (x-amz-meta-*,
//	                        Cache-Control, Content-Disposition/Encoding/Language,
//	                        Expires, x-amz-storage-class); user metadata over
//	                        S3's 2 KiB is 400 MetadataTooLarge, a storage class
//	                        S3 does not offer is S3's 400 InvalidStorageClass. A
//	                        PutObject carrying what the cache's write path
//	                        cannot store (tagging, SSE, ACLs, object lock,
//	                        If-Match/If-None-Match, an Expires that is not an
//	                        HTTP date) or that S3 serves only once restored
//	                        (GLACIER, DEEP_ARCHIVE) is passed through to S3
//	                        instead.
//	CreateMultipartUpload, UploadPart, UploadPartCopy,
//	CompleteMultipartUpload, AbortMultipartUpload, ListParts,
//	ListMultipartUploads, CopyObject, DeleteObject, DeleteObjects,
//	ListObjectsV2, ListObjects, ListObjectVersions, HeadBucket,
//	GetBucketLocation, GetBucketVersioning, GetObjectAttributes,
//	Get/Put/DeleteObjectTagging
//	                        passed through to any live cache node
//	                        (/v1/s3/...), which checks the tenant's buckets,
//	                        signs with the tenant's backend credentials,
//	                        returns S3's answer unchanged and invalidates its
//	                        cache after writes. Unreachable nodes fail over to
//	                        the next when the body can be sent again.
//	ListBuckets, bucket creation/configuration/deletion, object ACLs,
//	retention, legal hold, torrent, restore, select
//	                        501 NotImplemented (and the tags of a WriteBack
//	                        or Transient key: S3 may not have it yet).
//
// Request bodies are the ones sigv4 decoded and verified. Their integrity
// (payload SHA-256, chunk signatures, Content-MD5 and x-amz-checksum-*) is
// checked when the last byte is read; the gateway holds the last byte back
// until then (small bodies are read whole first), so a body that fails
// verification never reaches S3 complete. Checksums that come as aws-chunked
// trailers are verified by the gateway but not stored in S3 (the
// pass-through cannot pass them on ahead of the body); checksums sent as
// headers are passed through on pass-through operations. A PutObject
// through the cache stores the body, its Content-Type and the headers
// above; the checksums it came with are verified and answered back, not
// stored. Its payload
// SHA-256 also goes to the node, which signs its upload to S3 with it and
// checks it again where S3 would not (multipart uploads, held writes).
//
// HeadObject and GetObject answer the metadata the cache keeps: ETag,
// Content-Length, Content-Type, Last-Modified, Accept-Ranges, and the
// headers S3 stored with the object (user metadata x-amz-meta-*,
// Cache-Control, Content-Disposition, Content-Encoding, Content-Language,
// Expires; x-amz-storage-class when not STANDARD), as S3's HEAD gave them
// to the node. Other headers of S3's (encryption, tagging count, ...) are
// not returned.
//
// # Errors
//
// Errors are S3 XML (<Error><Code/><Message/><Resource/><RequestId/></Error>)
// with S3's codes and statuses: NoSuchKey, NoSuchBucket (told apart with a
// HeadBucket the first time a bucket is seen), AccessDenied (also for a
// bucket the tenant may not use), InvalidRange, PreconditionFailed, the
// sigv4 codes (SignatureDoesNotMatch, InvalidAccessKeyId,
// RequestTimeTooSkewed, XAmzContentSHA256Mismatch, BadDigest...),
// ServiceUnavailable (503) when the cache or S3 behind it is unavailable,
// SlowDown (503) when an object changed while being read twice in a row,
// NotImplemented and MethodNotAllowed. GetObject fetches only the pieces
// (pages of the cache) of the range. A whole object of at most ReadAhead
// pieces is fetched whole before the status is sent (so an object
// overwritten meanwhile is read again cleanly); any other range is fetched
// a piece at a time as the client takes it until 8 MiB are sent, then with
// one piece read ahead, doubling up to ReadAhead with every piece the
// client consumes (so a client that asks for most of a file and reads its
// start, as ClickHouse does, costs the pieces it was sent; LimitUnsent
// keeps the kernel from taking MiBs on its behalf). A read that fails after the
// status was sent aborts the connection: the client sees a short body,
// never wrong bytes. Every response carries x-amz-request-id; pass-through answers keep
// S3's in X-Distcache-S3-Request-Id.
package gateway
