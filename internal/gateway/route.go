package gateway

import (
	"net/http"
	"net/url"
	"strings"

	"github.com/distcache/distcache/internal/chunk"
)

// S3 operation names, used in metrics labels and logs.
const (
	OpGetObject               = "GetObject"
	OpHeadObject              = "HeadObject"
	OpPutObject               = "PutObject"
	OpCopyObject              = "CopyObject"
	OpDeleteObject            = "DeleteObject"
	OpDeleteObjects           = "DeleteObjects"
	OpCreateMultipartUpload   = "CreateMultipartUpload"
	OpUploadPart              = "UploadPart"
	OpUploadPartCopy          = "UploadPartCopy"
	OpCompleteMultipartUpload = "CompleteMultipartUpload"
	OpAbortMultipartUpload    = "AbortMultipartUpload"
	OpListParts               = "ListParts"
	OpListMultipartUploads    = "ListMultipartUploads"
	OpGetObjectAttributes     = "GetObjectAttributes"
	OpGetObjectTagging        = "GetObjectTagging"
	OpPutObjectTagging        = "PutObjectTagging"
	OpDeleteObjectTagging     = "DeleteObjectTagging"
	OpListObjectsV2           = "ListObjectsV2"
	OpListObjects             = "ListObjects"
	OpListObjectVersions      = "ListObjectVersions"
	OpHeadBucket              = "HeadBucket"
	OpGetBucketLocation       = "GetBucketLocation"
	OpGetBucketVersioning     = "GetBucketVersioning"
	OpListBuckets             = "ListBuckets"
	OpUnsupported             = "Unsupported"
)

// handling is how the gateway serves an operation.
type handling int

const (
	// viaPassthrough passes the request through to a cache node's /v1/s3 API,
	// which signs it again and sends it to S3.
	viaPassthrough handling = iota
	// viaCacheRead serves GetObject and HeadObject from the cache.
	viaCacheRead
	// viaCacheWrite writes PutObject through the cache.
	viaCacheWrite
	// refused answers the route's error.
	refused
)

// route is what a request asks for: the operation, its target and how it
// is served. err is set (with handling refused) for requests the gateway
// will not serve; it is answered after authentication.
type route struct {
	op       string
	bucket   string
	key      string
	handling handling
	err      *s3Error
}

// maxKeyBytes is S3's limit on the length of an object key.
const maxKeyBytes = 1024

// ignoredParams are query parameters that never select an operation:
// presigned-URL authentication and the SDKs' operation hint.
var ignoredParams = map[string]bool{
	"x-id": true, "X-Amz-Algorithm": true, "X-Amz-Credential": true, "X-Amz-Date": true, "X-Amz-Expires": true,
	"X-Amz-SignedHeaders": true, "X-Amz-Signature": true, "X-Amz-Security-Token": true, "X-Amz-Content-Sha256": true,
}

// objectSubresources are object-level S3 subresources the gateway does not
// serve. They must never be mistaken for GetObject or PutObject.
var objectSubresources = []string{"acl", "retention", "legal-hold", "torrent", "restore", "select", "renameObject"}

// listParams are the parameters of ListObjects (v1 and v2); any other query
// parameter on a bucket GET names a subresource.
var listParams = map[string]bool{
	"list-type": true, "prefix": true, "delimiter": true, "marker": true, "max-keys": true, "encoding-type": true,
	"continuation-token": true, "fetch-owner": true, "start-after": true, "allow-unordered": true,
}

// bucketGetSubresources are bucket GET subresources passed through.
var bucketGetSubresources = map[string]string{
	"location": OpGetBucketLocation, "uploads": OpListMultipartUploads, "versions": OpListObjectVersions,
	"versioning": OpGetBucketVersioning,
}

// parseRoute classifies a path-style request. It is a pure function of the
// method, the decoded path, the query and the headers.
func parseRoute(method, path string, query url.Values, header http.Header) route {
	rest := strings.TrimPrefix(path, "/")
	bucket, key, _ := strings.Cut(rest, "/")
	var rt route
	switch {
	case bucket == "":
		rt = serviceRoute(method)
	case key == "":
		rt = bucketRoute(method, query)
	default:
		rt = objectRoute(method, query, header)
	}
	rt.bucket, rt.key = bucket, key
	if rt.err != nil {
		return rt
	}
	if bucket != "" && !validBucketName(bucket) {
		return refuse(rt.op, newS3Error(http.StatusBadRequest, CodeInvalidBucketName, "The specified bucket is not valid."), bucket, key)
	}
	if len(key) > maxKeyBytes {
		return refuse(rt.op, newS3Error(http.StatusBadRequest, CodeKeyTooLong, "Your key is too long"), bucket, key)
	}
	return rt
}

func refuse(op string, e *s3Error, bucket, key string) route {
	return route{op: op, bucket: bucket, key: key, handling: refused, err: e}
}

func serviceRoute(method string) route {
	if method == http.MethodGet {
		return refuse(OpListBuckets, errNotImplemented("ListBuckets (GET /)"), "", "")
	}
	return refuse(OpUnsupported, newS3Error(http.StatusMethodNotAllowed, CodeMethodNotAllowed,
		"The specified method is not allowed against this resource."), "", "")
}

func bucketRoute(method string, q url.Values) route {
	pass := func(op string) route { return route{op: op, handling: viaPassthrough} }
	switch method {
	case http.MethodGet:
		if q.Get("list-type") == "2" {
			if k := unknownParam(q, listParams); k != "" {
				return refuse(OpUnsupported, errNotImplemented("ListObjectsV2 with ?"+k), "", "")
			}
			return pass(OpListObjectsV2)
		}
		for k, op := range bucketGetSubresources {
			if q.Has(k) {
				return pass(op)
			}
		}
		if k := unknownParam(q, listParams); k != "" {
			return refuse(OpUnsupported, errNotImplemented("The bucket subresource ?"+k), "", "")
		}
		return pass(OpListObjects)
	case http.MethodHead:
		return pass(OpHeadBucket)
	case http.MethodPost:
		if q.Has("delete") {
			return pass(OpDeleteObjects)
		}
		return refuse(OpUnsupported, errNotImplemented("POST on a bucket (other than DeleteObjects)"), "", "")
	case http.MethodPut, http.MethodDelete:
		return refuse(OpUnsupported, errNotImplemented("Creating, configuring or deleting buckets"), "", "")
	}
	return refuse(OpUnsupported, newS3Error(http.StatusMethodNotAllowed, CodeMethodNotAllowed,
		"The specified method is not allowed against this resource."), "", "")
}

func objectRoute(method string, q url.Values, header http.Header) route {
	pass := func(op string) route { return route{op: op, handling: viaPassthrough} }
	for _, k := range objectSubresources {
		if q.Has(k) {
			return refuse(OpUnsupported, errNotImplemented("The object subresource ?"+k), "", "")
		}
	}
	if q.Has("tagging") {
		// The object's tags are S3's alone: the cache keeps none.
		switch method {
		case http.MethodGet:
			return pass(OpGetObjectTagging)
		case http.MethodPut:
			return pass(OpPutObjectTagging)
		case http.MethodDelete:
			return pass(OpDeleteObjectTagging)
		}
		return refuse(OpUnsupported, newS3Error(http.StatusMethodNotAllowed, CodeMethodNotAllowed,
			"The specified method is not allowed against this resource."), "", "")
	}
	copySource := header.Get("X-Amz-Copy-Source") != ""
	switch method {
	case http.MethodGet, http.MethodHead:
		op := OpGetObject
		if method == http.MethodHead {
			op = OpHeadObject
		}
		switch {
		case method == http.MethodGet && q.Has("uploadId"):
			return pass(OpListParts)
		case method == http.MethodGet && q.Has("attributes"):
			return pass(OpGetObjectAttributes)
		case q.Has("versionId") || q.Has("partNumber") || header.Get("X-Amz-Server-Side-Encryption-Customer-Algorithm") != "":
			// What the cache does not keep (other versions, the parts of
			// a multipart upload, keys only the client has) S3 answers.
			return pass(op)
		}
		return route{op: op, handling: viaCacheRead}
	case http.MethodPut:
		switch {
		case q.Has("uploadId") || q.Has("partNumber"):
			if copySource {
				return pass(OpUploadPartCopy)
			}
			return pass(OpUploadPart)
		case copySource:
			return pass(OpCopyObject)
		case needsPassthroughPut(header):
			return pass(OpPutObject)
		}
		return route{op: OpPutObject, handling: viaCacheWrite}
	case http.MethodPost:
		switch {
		case q.Has("uploads"):
			return pass(OpCreateMultipartUpload)
		case q.Has("uploadId"):
			return pass(OpCompleteMultipartUpload)
		}
		return refuse(OpUnsupported, errNotImplemented("POST on an object without ?uploads or ?uploadId"), "", "")
	case http.MethodDelete:
		if q.Has("uploadId") {
			return pass(OpAbortMultipartUpload)
		}
		return pass(OpDeleteObject)
	}
	return refuse(OpUnsupported, newS3Error(http.StatusMethodNotAllowed, CodeMethodNotAllowed,
		"The specified method is not allowed against this resource."), "", "")
}

// writeThroughHeaders are the PutObject request headers the cache's
// write path honours (or that only describe the body, which the gateway
// verified), beside the headers S3 stores with the object
// (chunk.IsStoredHeader: user metadata, Cache-Control, storage class, ...),
// which the nodes keep and send on. A PutObject with any other x-amz-*
// header (tagging, encryption, ACLs, object lock, ...), an archive storage
// class, a conditional write or an Expires S3 would keep as something else
// than an HTTP date is passed through to S3 unchanged instead, so nothing
// the client asked for is dropped; the node invalidates the key afterwards.
var writeThroughHeaders = map[string]bool{
	"Content-Type": true, "Content-Md5": true, "X-Amz-Content-Sha256": true, "X-Amz-Date": true,
	"X-Amz-Decoded-Content-Length": true, "X-Amz-Trailer": true, "X-Amz-Sdk-Checksum-Algorithm": true,
	"X-Amz-Checksum-Crc32": true, "X-Amz-Checksum-Crc32c": true, "X-Amz-Checksum-Crc64nvme": true,
	"X-Amz-Checksum-Sha1": true, "X-Amz-Checksum-Sha256": true, "X-Amz-Checksum-Algorithm": true,
	"X-Amz-Security-Token": true, "X-Amz-User-Agent": true,
}

// archiveClasses are the storage classes whose objects S3 does not serve
// until they are restored (GetObject: 403 InvalidObjectState).
var archiveClasses = map[string]bool{"GLACIER": true, "DEEP_ARCHIVE": true}

func needsPassthroughPut(h http.Header) bool {
	for k := range h {
		if hasPrefixFold(k, "x-amz-") {
			if ck := http.CanonicalHeaderKey(k); !writeThroughHeaders[ck] && !chunk.IsStoredHeader(ck) {
				return true
			}
		}
	}
	if h.Get("If-Match") != "" || h.Get("If-None-Match") != "" {
		return true
	}
	if archiveClasses[h.Get(chunk.StorageClassHeader)] {
		return true // S3 serves it only once restored: the cache must not before
	}
	if v := h.Get("Expires"); v != "" {
		if _, err := http.ParseTime(v); err != nil {
			return true
		}
	}
	return false
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

// unknownParam returns a query parameter that is neither in known nor
// ignored, or "".
func unknownParam(q url.Values, known map[string]bool) string {
	for k := range q {
		if !known[k] && !ignoredParams[k] {
			return k
		}
	}
	return ""
}

// validBucketName follows S3's naming rules for general purpose buckets:
// 3-63 characters of lower-case letters, digits, '.' and '-', starting and
// ending with a letter or digit.
func validBucketName(b string) bool {
	if len(b) < 3 || len(b) > 63 {
		return false
	}
	for i := 0; i < len(b); i++ {
		c := b[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && c != '.' && c != '-' {
			return false
		}
		if (i == 0 || i == len(b)-1) && !alnum {
			return false
		}
	}
	return !strings.Contains(b, "..")
}
