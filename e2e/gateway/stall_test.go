package gateway_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/distcache/distcache/internal/embed"
	"github.com/distcache/distcache/internal/testutil"
)

// A client that stops reading mid-body is dropped after ClientWriteTimeout,
// and the read buffers its GetObject held go to the others: here a second
// GetObject whose first chunks are the whole budget, which can only start
// once the stalled one has let go of everything.
func TestStalledClientReleasesReadBuffers(t *testing.T) {
	e := newEnv(t, envOptions{nodes: 1, configure: func(c *embed.GatewayConfig) {
		c.ReadBufferBytes = 1 // the least: one reader's window, ReadAhead chunks
		c.ClientWriteTimeout = 2 * time.Second
	}})
	r := rand.New(rand.NewPCG(41, 42))
	big := testutil.RandomBytes(r, 64<<20) // far more than the socket buffers take
	small := testutil.RandomBytes(r, 4*chunkSize)
	e.cluster.PutDirect("bucket-a", "stall/big", big)
	e.cluster.PutDirect("bucket-a", "stall/small", small)

	// The stalling client's socket takes 64 KiB (no autotuning), so the
	// kernel cannot take the object off the gateway's hands.
	stalled, err := smallWindowClient(e).GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("stall/big")})
	testutil.Must(t, err)
	defer stalled.Body.Close()
	// It reads past the 8 MiB a GetObject sends before it reads ahead (so
	// that its read-ahead grows to the whole budget) ...
	first := make([]byte, 9<<20)
	if _, err := io.ReadFull(stalled.Body, first); err != nil || !bytes.Equal(first, big[:len(first)]) {
		t.Fatalf("first 9 MiB: %v", err)
	}
	// ... and nothing more for now. Once the kernel's buffers are full the
	// gateway's writes block, holding every read buffer: wait for that
	// (held at the budget, unchanged for a while).
	const budget = 4 * chunkSize
	held := func() float64 { return e.counter("distcache_gateway_read_buffer_bytes", nil) }
	deadline := time.Now().Add(time.Minute)
	for steady := 0; steady < 15; {
		if time.Now().After(deadline) {
			t.Fatalf("the stalled GetObject never held the whole budget (holds %v)", held())
		}
		time.Sleep(20 * time.Millisecond)
		if held() == budget {
			steady++
		} else {
			steady = 0
		}
	}

	waits := e.counter("distcache_gateway_read_buffer_waits_total", nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	began := time.Now()
	out, err := e.s3.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("stall/small")})
	waited := time.Since(began)
	if err != nil {
		t.Fatalf("a GetObject beside a stalled client: %v", err)
	}
	got, err := io.ReadAll(out.Body)
	out.Body.Close()
	if err != nil || !bytes.Equal(got, small) {
		t.Fatalf("read %d bytes beside a stalled client: %v", len(got), err)
	}
	if e.counter("distcache_gateway_read_buffer_waits_total", nil) <= waits {
		t.Error("the second GetObject did not wait for read buffers: the stalled one held none, so this proves nothing")
	}
	t.Logf("the second GetObject was answered after %v, once the stalled client was dropped", waited)
	// The stalled response was cut off, not finished.
	if rest, err := io.ReadAll(stalled.Body); err == nil && len(rest) == len(big)-1 {
		t.Error("the stalled client's response was not cut off")
	}
}

// smallWindowClient is e's S3 client on connections whose receive buffer is
// fixed at 64 KiB.
func smallWindowClient(e *env) *s3.Client {
	dialer := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 64<<10)
		})
		return errors.Join(err, serr)
	}}
	hc := &http.Client{Transport: &http.Transport{DialContext: dialer.DialContext}}
	return testutil.S3Client(e.srv.URL(), accessKey, secretKey, func(o *s3.Options) { o.HTTPClient = hc })
}
