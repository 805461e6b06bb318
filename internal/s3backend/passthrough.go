package s3backend

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"

	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/distcache/distcache/internal/sigv4"
)

// OpPassthrough names pass-through requests in metrics (op="forward", the
// label value dashboards know).
const OpPassthrough = "forward"

// unsignedPayload lets a streamed body be sent without hashing it first.
const unsignedPayload = "UNSIGNED-PAYLOAD"

// Passthrough sends one S3 request the cache does not interpret (listings,
// multipart uploads, copies, batch deletes...) to the backend, path-style,
// signed with cr (the default credentials when cr is zero). header holds the
// S3 headers to send; the caller must have removed the client's own
// Authorization, X-Amz-Date, X-Amz-Content-Sha256 and security token. The
// request is sent once, never retried (the body is a stream), and shares the
// backend's in-flight cap: the response body holds a slot until closed.
func (b *Backend) Passthrough(ctx context.Context, cr Credentials, method, bucket, key, rawQuery string,
	header http.Header, body io.Reader, contentLength int64) (*http.Response, error) {
	start := time.Now()
	endpoint := b.cfg.Endpoint
	if endpoint == "" {
		endpoint = "https://s3." + b.cfg.Region + ".amazonaws.com"
	}
	u, err := url.Parse(endpoint)
	if err != nil {
		return nil, err
	}
	path := strings.TrimSuffix(u.Path, "/") + "/" + bucket
	if key != "" {
		path += "/" + key
	}
	u.Path, u.RawPath, u.RawQuery = path, strings.TrimSuffix(u.EscapedPath(), "/")+"/"+sigv4.EscapePath(bucket), rawQuery
	if key != "" {
		u.RawPath += "/" + sigv4.EscapePath(key)
	}
	req, err := http.NewRequestWithContext(ctx, method, u.String(), body)
	if err != nil {
		return nil, err
	}
	req.Header = header.Clone()
	req.ContentLength = contentLength
	if contentLength == 0 {
		req.Body = http.NoBody
	}
	req.Header.Set("X-Amz-Content-Sha256", unsignedPayload)

	client := b.Client(cr)
	creds, err := client.Options().Credentials.Retrieve(ctx)
	if err != nil {
		return nil, err
	}
	// S3 takes the path as sent, encoded once: the signer must not escape it again.
	signer := v4.NewSigner(func(o *v4.SignerOptions) { o.DisableURIPathEscaping = true })
	if err := signer.SignHTTP(ctx, creds, req, unsignedPayload, "s3", b.cfg.Region, time.Now()); err != nil {
		return nil, err
	}
	resp, err := b.base.HTTPClient.Do(req)
	status := StatusOK
	switch {
	case err != nil:
		err = wrapError(ctx, OpPassthrough, bucket, key, err)
		status = Class(err)
	case resp.StatusCode >= 500:
		status = StatusUnavailable
	case resp.StatusCode >= 400:
		status = StatusError
	}
	if b.cfg.Observer != nil {
		b.cfg.Observer.ObserveS3(OpPassthrough, status, time.Since(start))
	}
	return resp, err
}
