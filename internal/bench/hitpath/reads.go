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
	"github.com/aws/aws-sdk-go-v2/service/s3"
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

// readGateway is GetObject with a Range through a gateway's S3 API, signed
// by aws-sdk-go-v2 with the gateway's credentials.
func (w *world) readGateway(ctx context.Context, g *Gateway, off int64, buf []byte) error {
	out, err := g.S3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(benchBucket), Key: aws.String(benchKey),
		Range: aws.String("bytes=" + strconv.FormatInt(off, 10) + "-" + strconv.FormatInt(off+int64(len(buf))-1, 10))})
	if err != nil {
		return err
	}
	defer out.Body.Close()
	if out.ContentLength == nil || *out.ContentLength != int64(len(buf)) {
		return fmt.Errorf("gateway sent Content-Length %v for %d bytes", out.ContentLength, len(buf))
	}
	_, err = io.ReadFull(out.Body, buf)
	return err
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

// readMinIO is a ranged anonymous GET from MinIO itself: plain HTTP on
// loopback, the bytes from the page cache of this machine.
func (w *world) readMinIO(ctx context.Context, off int64, buf []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, w.minio.Endpoint+"/"+benchBucket+"/"+benchKey, nil)
	if err != nil {
		return err
	}
	req.Header.Set("Range", rangeHeader(off, len(buf)))
	resp, err := w.minioHTTP.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	return readBody(resp, buf)
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
