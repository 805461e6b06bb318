package cluster_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
)

// requestTimeout bounds one S3 request: a read that hangs is a failed read.
const requestTimeout = time.Minute

// secretValue reads one key of a Secret.
func secretValue(ctx context.Context, g Gomega, ns, name, k string) string {
	var s corev1.Secret
	g.Expect(k8sClient.Get(ctx, key(ns, name), &s)).To(Succeed())
	v, ok := s.Data[k]
	g.Expect(ok).To(BeTrue(), "Secret %s/%s has no key %s", ns, name, k)
	return string(v)
}

// object is one object of the data set, with its bytes.
type object struct {
	key  string
	data []byte
}

// dataSet is the objects the specs write once and read throughout: the
// chunk-boundary sizes (empty, one byte, a chunk minus one, a chunk, a
// chunk plus one) and objects of several chunks, about 30 MiB and 40 chunks
// in all, under a prefix of its own.
func dataSet(prefix string) []object {
	r := rand.New(rand.NewPCG(5, uint64(time.Now().UnixNano())))
	sizes := []int{0, 1, chunkSize - 1, chunkSize, chunkSize + 1, 3*chunkSize + 12345, 5*chunkSize + 7}
	for range 8 {
		sizes = append(sizes, chunkSize+r.IntN(5*chunkSize/2))
	}
	objs := make([]object, len(sizes))
	for i, n := range sizes {
		data := make([]byte, n)
		for j := range data {
			data[j] = byte(r.Uint32())
		}
		objs[i] = object{key: fmt.Sprintf("%s/part-%02d-%d.bin", prefix, i, n), data: data}
	}
	return objs
}

func dataSetChunks(objs []object) int {
	n := 0
	for _, o := range objs {
		n += (len(o.data) + chunkSize - 1) / chunkSize
	}
	return n
}

func dataSetBytes(objs []object) int {
	n := 0
	for _, o := range objs {
		n += len(o.data)
	}
	return n
}

// getObject reads an object (or the range rng, e.g. "bytes=0-9") whole.
func getObject(ctx context.Context, c *s3.Client, k, rng string) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	in := &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(k)}
	if rng != "" {
		in.Range = aws.String(rng)
	}
	out, err := c.GetObject(ctx, in)
	if err != nil {
		return nil, err
	}
	defer out.Body.Close()
	return io.ReadAll(out.Body)
}

// errWrongBytes: a read answered with bytes that are not the object's.
var errWrongBytes = errors.New("bytes that are not the object's")

// verifyObject reads an object whole and compares every byte.
func verifyObject(ctx context.Context, c *s3.Client, o object) error {
	got, err := getObject(ctx, c, o.key, "")
	if err != nil {
		return fmt.Errorf("GET %s: %w", o.key, err)
	}
	if !bytes.Equal(got, o.data) {
		return fmt.Errorf("GET %s: %d %w %d", o.key, len(got), errWrongBytes, len(o.data))
	}
	return nil
}

// readAll reads every object once, byte-exact, failing the spec on the
// first error.
func readAll(ctx context.Context, c *s3.Client, objs []object) {
	GinkgoHelper()
	for _, o := range objs {
		Expect(verifyObject(ctx, c, o)).To(Succeed())
	}
}

// putAll writes objs through c, failing the spec on an error. The first
// write is tried again until it succeeds: the nodes learn a new tenant
// through their watch of the tenants Secret, a moment after the operator
// writes it.
func putAll(ctx context.Context, c *s3.Client, objs []object) {
	GinkgoHelper()
	put := func(o object) error {
		pctx, cancel := context.WithTimeout(ctx, requestTimeout)
		defer cancel()
		_, err := c.PutObject(pctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(o.key), Body: bytes.NewReader(o.data)})
		return err
	}
	Eventually(ctx, func() error { return put(objs[0]) }).WithPolling(2 * time.Second).Should(Succeed())
	for _, o := range objs[1:] {
		Expect(put(o)).To(Succeed(), "PutObject %s", o.key)
	}
}

func createBucket(ctx context.Context, c *s3.Client) error {
	_, err := c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(bucket)})
	if _, owned := errors.AsType[*types.BucketAlreadyOwnedByYou](err); owned {
		return nil
	}
	return err
}

// reader reads the data set through the gateway in a loop, comparing
// every byte, until stopped: it stands for the analytics engine reading
// while the platform engineer changes the cache.
type reader struct {
	c      *s3.Client
	objs   []object
	cancel context.CancelFunc
	done   chan struct{}

	reads    atomic.Int64
	failures atomic.Int64
	wrong    atomic.Int64 // failures that were answers with wrong bytes
	passes   atomic.Int64 // full passes over the data set
	mu       sync.Mutex
	errs     []string // the first failures, with their time
}

func startReader(c *s3.Client, objs []object) *reader {
	ctx, cancel := context.WithCancel(context.Background())
	r := &reader{c: c, objs: objs, cancel: cancel, done: make(chan struct{})}
	go func() {
		defer GinkgoRecover()
		defer close(r.done)
		for ctx.Err() == nil {
			for _, o := range r.objs {
				if ctx.Err() != nil {
					return
				}
				err := verifyObject(ctx, r.c, o)
				if ctx.Err() != nil {
					return // stopped mid-read: not a failure
				}
				r.reads.Add(1)
				if err != nil {
					r.failures.Add(1)
					if errors.Is(err, errWrongBytes) {
						r.wrong.Add(1)
					}
					r.mu.Lock()
					if len(r.errs) < 20 {
						r.errs = append(r.errs, time.Now().Format("15:04:05.000")+" "+err.Error())
					}
					r.mu.Unlock()
				}
			}
			r.passes.Add(1)
		}
	}()
	return r
}

// awaitPasses waits until the reader has completed n more full passes.
func (r *reader) awaitPasses(ctx context.Context, n int64) {
	GinkgoHelper()
	target := r.passes.Load() + n
	Eventually(ctx, r.passes.Load).WithTimeout(timeout).Should(BeNumerically(">=", target),
		"the reader completes %d more passes over the data set", n)
}

// halt ends the reader (DeferCleanup, when a spec fails with it running).
func (r *reader) halt() {
	r.cancel()
	<-r.done
}

// stop ends the reader and checks that it read and that no read failed.
func (r *reader) stop() {
	GinkgoHelper()
	r.halt()
	r.expectNoFailures()
}

// expectNoFailures checks that the reader (halted) read and that no read
// failed.
func (r *reader) expectNoFailures() {
	GinkgoHelper()
	r.mu.Lock()
	errs := r.errs
	r.mu.Unlock()
	fmt.Fprintf(GinkgoWriter, "reader: %d reads in %d full passes, %d failed (%d with wrong bytes)\n",
		r.reads.Load(), r.passes.Load(), r.failures.Load(), r.wrong.Load())
	Expect(r.passes.Load()).To(BeNumerically(">", 0), "the reader completed a pass")
	Expect(r.failures.Load()).To(BeZero(), "failed reads:\n%s", joinLines(errs))
}

func joinLines(lines []string) string {
	var b bytes.Buffer
	for _, l := range lines {
		b.WriteString("  " + l + "\n")
	}
	return b.String()
}
