package hitpath

import (
	"context"
	"crypto/tls"
	"encoding/binary"
	"fmt"
	"io"
	"net/http"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

// Every read below fetches [off, off+len(buf)) of the object into buf; a
// read never crosses a chunk boundary.

// readNodeGo reads through internal/client, the ring-aware Go client, with
// the Meta of one Stat (as a program reading many ranges of one version
// does). Without a page cache the client asks the chunk's owner for exactly
// these bytes.
func (w *world) readNodeGo(ctx context.Context, off int64, buf []byte) error {
	n, err := w.goClient.ReadAt(ctx, benchBucket, benchKey, w.meta, buf, off)
	if err == nil && n != len(buf) {
		err = errShort
	}
	return err
}

// readNodeHTTP is the node API with bare net/http: GET ?chunk=N with a
// Range relative to the chunk, as the old `cachenode bench` did. It
// returns the tier that answered (X-Distcache-Cache).
func (w *world) readNodeHTTP(ctx context.Context, off int64, buf []byte) (string, error) {
	idx, within := off/w.cfg.chunkSize, off%w.cfg.chunkSize
	req, err := http.NewRequestWithContext(ctx, http.MethodGet,
		"https://"+w.nodeAddr+"/v1/objects/"+benchBucket+"/"+benchKey+"?chunk="+strconv.FormatInt(idx, 10), nil)
	if err != nil {
		return "", err
	}
	if int64(len(buf)) < w.cfg.chunkSize {
		req.Header.Set("Range", rangeHeader(within, len(buf)))
	}
	resp, err := w.nodeHTTP.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	return resp.Header.Get("X-Distcache-Cache"), readBody(resp, buf)
}

// readS3 is GetObject with a Range through an S3 API (a gateway's, nginx's
// plain HTTP listener, MinIO's), signed by aws-sdk-go-v2: the same client
// for every column S3 clients would read.
func (w *world) readS3(ctx context.Context, c *s3.Client, off int64, buf []byte) error {
	_, err := w.getS3(ctx, c, off, buf)
	return err
}

func (w *world) getS3(ctx context.Context, c *s3.Client, off int64, buf []byte) (*s3.GetObjectOutput, error) {
	out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(benchBucket), Key: aws.String(benchKey),
		Range: aws.String(rangeHeader(off, len(buf)))})
	if err != nil {
		return nil, err
	}
	defer out.Body.Close()
	if out.ContentLength == nil || *out.ContentLength != int64(len(buf)) {
		return nil, fmt.Errorf("Content-Length %v for %d bytes", out.ContentLength, len(buf))
	}
	_, err = io.ReadFull(out.Body, buf)
	return out, err
}

// readNginxS3 is readS3 through nginx's plain HTTP listener; it reports
// whether nginx answered from its cache.
func (w *world) readNginxS3(ctx context.Context, off int64, buf []byte) (hit bool, err error) {
	out, err := w.getS3(ctx, w.nginxS3, off, buf)
	if err != nil {
		return false, err
	}
	raw, ok := awsmiddleware.GetRawResponse(out.ResultMetadata).(*smithyhttp.Response)
	return ok && raw.Header.Get("X-Cache-Status") == "HIT", nil
}

// readNginx is a ranged GET of the object through nginx over mTLS. It
// reports whether nginx answered from its cache (X-Cache-Status: HIT).
func (w *world) readNginx(ctx context.Context, off int64, buf []byte) (hit bool, err error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+w.nginx.addr+"/"+benchBucket+"/"+benchKey, nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Range", rangeHeader(off, len(buf)))
	resp, err := w.nginxHTTP.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if err := readBody(resp, buf); err != nil {
		return false, err
	}
	return resp.Header.Get("X-Cache-Status") == "HIT", nil
}

// rawConn is one worker's connection to the raw TLS server.
type rawConn struct {
	c *tls.Conn
}

// readRaw asks the raw TLS server for the bytes: 16 bytes out, the payload
// back, nothing else on the wire.
func (w *world) readRaw(rc *rawConn, off int64, buf []byte) error {
	if rc.c == nil {
		cfg := w.tenantTL.Clone()
		cfg.ServerName = "localhost"
		c, err := tls.Dial("tcp", w.rawAddr, cfg)
		if err != nil {
			return err
		}
		rc.c = c
	}
	var hdr [16]byte
	binary.BigEndian.PutUint64(hdr[:8], uint64(off))
	binary.BigEndian.PutUint64(hdr[8:], uint64(len(buf)))
	if _, err := rc.c.Write(hdr[:]); err != nil {
		return err
	}
	_, err := io.ReadFull(rc.c, buf)
	return err
}

func (rc *rawConn) close() {
	if rc.c != nil {
		_ = rc.c.Close()
	}
}

func rangeHeader(off int64, n int) string {
	return "bytes=" + strconv.FormatInt(off, 10) + "-" + strconv.FormatInt(off+int64(n)-1, 10)
}

// readBody checks a 200/206 answer has exactly len(buf) bytes and reads
// them.
func readBody(resp *http.Response, buf []byte) error {
	if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusPartialContent {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("%s: %s", resp.Status, b)
	}
	if resp.ContentLength != int64(len(buf)) {
		return fmt.Errorf("Content-Length %d for %d bytes", resp.ContentLength, len(buf))
	}
	_, err := io.ReadFull(resp.Body, buf)
	return err
}
