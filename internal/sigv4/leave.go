package sigv4

import "io"

// LeavePayloadSHA256 stops body, the body Verify installed on a request
// signed with the SHA-256 of its payload (Result.PayloadMode
// PayloadSHA256), from hashing what it reads, and reports whether it was
// such a body: the caller hands the declared SHA-256 on to whoever stores
// the bytes, which checks it before keeping them (S3 refuses an upload
// signed with a SHA-256 its body does not have). The checksums the request
// declares (Content-MD5, x-amz-checksum-*) are still checked at EOF. Call
// it before the first Read.
func LeavePayloadSHA256(body io.Reader) bool {
	b, ok := body.(*verifyingBody)
	if !ok || b.sha == nil {
		return false
	}
	b.sha = nil
	return true
}
