package nodeapi

// HeaderContentSHA256 on a PUT to a node declares the SHA-256 of the body
// (64 hex digits) as its writer signed it: an S3 client's
// x-amz-content-sha256, which the gateway verifies as the body passes.
// The node signs its PUT to S3 with it instead of hashing the body first,
// so the body goes on to S3 as it arrives, and S3 refuses it if it does
// not match; where S3 would not check it before keeping the bytes (a
// multipart upload, a held write) the node checks it itself.
const HeaderContentSHA256 = "X-Distcache-Content-Sha256"
