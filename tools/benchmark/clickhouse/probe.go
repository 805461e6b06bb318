package clickhouse

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net/http"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/distcache/distcache/internal/minioproc"
	"github.com/distcache/distcache/tools/benchmark/benchkit"
)

// probe is what the link measurably does to one client.
type probe struct {
	Direct1KiB, Link1KiB time.Duration // median GET of a 1 KiB object on a kept-alive connection
	LinkBandwidth        float64       // bytes/s of one GET of a large object through the link
	BigBytes             int64
}

func (p probe) String() string {
	return fmt.Sprintf("1 KiB GET %s direct, %s through the link; %.0f MB/s on one connection",
		benchkit.Millis(p.Direct1KiB), benchkit.Millis(p.Link1KiB), p.LinkBandwidth/1e6)
}

// probeLink measures the link with an S3 client: the median of 20 GETs of
// a 1 KiB object (one connection, kept alive) directly and through the
// link, and one GET of a 16 MiB object through the link.
func probeLink(ctx context.Context, minio *minioproc.Server, link *Link) (probe, error) {
	var p probe
	small, big := make([]byte, 1<<10), make([]byte, 16<<20)
	_, _ = rand.Read(small)
	_, _ = rand.Read(big)
	direct := minio.Client()
	for key, data := range map[string][]byte{"probe/1k": small, "probe/16m": big} {
		if _, err := direct.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(bucket), Key: aws.String(key), Body: bytes.NewReader(data)}); err != nil {
			return p, fmt.Errorf("probe put: %w", err)
		}
	}
	get := func(c *s3.Client, key string, want []byte) (time.Duration, error) {
		start := time.Now()
		out, err := c.GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(bucket), Key: aws.String(key)})
		if err != nil {
			return 0, err
		}
		got, err := io.ReadAll(out.Body)
		out.Body.Close()
		if err != nil {
			return 0, err
		}
		if !bytes.Equal(got, want) {
			return 0, fmt.Errorf("probe: %s read back differs", key)
		}
		return time.Since(start), nil
	}
	median := func(endpoint string) (time.Duration, error) {
		c := oneConnClient(minio, endpoint)
		var l benchkit.Latencies
		for i := 0; i < 21; i++ {
			d, err := get(c, "probe/1k", small)
			if err != nil {
				return 0, err
			}
			if i > 0 { // the first one also opened the connection
				l.Add(d)
			}
		}
		return l.Quantile(0.5), nil
	}
	var err error
	if p.Direct1KiB, err = median(minio.Endpoint); err != nil {
		return p, err
	}
	if p.Link1KiB, err = median(link.URL); err != nil {
		return p, err
	}
	d, err := get(oneConnClient(minio, link.URL), "probe/16m", big)
	if err != nil {
		return p, err
	}
	p.BigBytes = int64(len(big))
	p.LinkBandwidth = float64(len(big)) / d.Seconds()
	return p, nil
}

// oneConnClient is an S3 client on the endpoint using at most one connection.
func oneConnClient(minio *minioproc.Server, endpoint string) *s3.Client {
	return s3.New(s3.Options{
		Region: minio.Region, BaseEndpoint: aws.String(endpoint), UsePathStyle: true,
		Credentials: credentials.NewStaticCredentialsProvider(minio.AccessKey, minio.SecretKey, ""),
		HTTPClient:  &http.Client{Transport: &http.Transport{MaxConnsPerHost: 1, MaxIdleConnsPerHost: 1}},
	})
}
