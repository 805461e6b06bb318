package testutil

import (
	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
)

// The credentials and region of the gateway the e2e suites start (not
// MinIO's): its tenant's key, and what their S3 clients sign with.
const (
	GatewayAccessKey = "GATEWAYKEYEXAMPLE"
	GatewaySecretKey = "gateway/secret+KEY/EXAMPLE0123456789"
	GatewayRegion    = "us-east-1"
)

// S3Client is an unmodified SDK client of the S3 endpoint (a URL, such as
// a gateway's or MinIO's) in us-east-1, path-style, signing with key and
// secret, that makes exactly one attempt per request: the tests see every
// error the server returns. optFns change its options (an HTTP client,
// more attempts).
func S3Client(endpoint, key, secret string, optFns ...func(*s3.Options)) *s3.Client {
	return s3.New(s3.Options{
		Region:           "us-east-1",
		BaseEndpoint:     aws.String(endpoint),
		UsePathStyle:     true,
		Credentials:      credentials.NewStaticCredentialsProvider(key, secret, ""),
		RetryMaxAttempts: 1,
	}, optFns...)
}
