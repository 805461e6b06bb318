package gateway_test

//lint:file-ignore SA1019 feature/s3/manager's Uploader and Downloader are what aws-sdk-go-v2 users run; its successor, transfermanager, is v0.x

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/binary"
	"hash/crc32"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/feature/s3/manager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"

	"github.com/distcache/distcache/internal/embed"
	"github.com/distcache/distcache/internal/pki"
	"github.com/distcache/distcache/internal/testutil"
)

// The S3 API served over TLS (--listen-tls-cert): an SDK then signs no
// payload and sends its CRC-32 in an aws-chunked trailer, which the gateway
// decodes and checks, and which S3 and the cache keep; reads, ranges and multipart uploads (whose parts S3
// refuses without the checksum the upload was created for) work as over
// plain HTTP, write-through and WriteBack; a renewed certificate is served
// to new connections without a restart.
func TestGatewayOverTLS(t *testing.T) {
	e := newEnv(t, envOptions{pageCache: 8 << 20, tenants: heldTenants})
	e, tg := tlsGatewayOn(t, e)
	first := tg.first
	trust := &tls.Config{RootCAs: tg.ca.CertPool()}
	c := testutil.S3Client(e.srv.URL(), accessKey, secretKey, func(o *s3.Options) {
		o.HTTPClient = &http.Client{Transport: &http.Transport{TLSClientConfig: trust}}
	})
	ctx := context.Background()
	r := testutil.NewRand(41)

	small := testutil.RandomBytes(r, 100<<10)
	put, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("tls/small"),
		Body: bytes.NewReader(small), ChecksumAlgorithm: types.ChecksumAlgorithmCrc32})
	testutil.Must(t, err)
	if got, want := aws.ToString(put.ChecksumCRC32), base64.StdEncoding.EncodeToString(binary.BigEndian.AppendUint32(nil, crc32.ChecksumIEEE(small))); got != want {
		t.Errorf("PutObject answered CRC-32 %q, want %q", got, want)
	}
	// The trailer's checksum is kept, write-through and WriteBack: S3 gets
	// it, and the cache answers it to checksum mode as S3 does.
	_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String("wb/tls-small"),
		Body: bytes.NewReader(small), ChecksumAlgorithm: types.ChecksumAlgorithmCrc32})
	testutil.Must(t, err)
	for _, key := range []string{"tls/small", "wb/tls-small"} {
		in := &s3.HeadObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String(key), ChecksumMode: types.ChecksumModeEnabled}
		h, err := c.HeadObject(ctx, in)
		testutil.Must(t, err)
		if got, want := headChecksum(h), "crc32="+aws.ToString(put.ChecksumCRC32)+" type=FULL_OBJECT"; got != want {
			t.Errorf("%s: the gateway answers checksum %q, want %q", key, got, want)
		}
		testutil.WaitFor(t, key+" in S3", func() bool { return bytes.Equal(inMinIO(t, e, key), small) })
		direct, err := e.cluster.Direct.HeadObject(ctx, in)
		testutil.Must(t, err)
		if got, want := headChecksum(direct), headChecksum(h); got != want {
			t.Errorf("%s: S3 keeps checksum %q, the gateway answered %q", key, got, want)
		}
	}

	large := testutil.RandomBytes(r, 11<<20)
	up := manager.NewUploader(c, func(u *manager.Uploader) { u.PartSize = 5 << 20 })
	// Write-through, and WriteBack (held by the nodes, then persisted).
	for _, key := range []string{"tls/large", "wb/tls-large"} {
		_, err = up.Upload(ctx, &s3.PutObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String(key), Body: bytes.NewReader(large)})
		testutil.Must(t, err)
	}
	for key, body := range map[string][]byte{"tls/small": small, "tls/large": large, "wb/tls-large": large} {
		testutil.WaitFor(t, key+" in S3", func() bool { return bytes.Equal(inMinIO(t, e, key), body) })
		for _, rng := range []string{"", "bytes=1000-70000"} {
			in := &s3.GetObjectInput{Bucket: aws.String("bucket-a"), Key: aws.String(key)}
			want := body
			if rng != "" {
				in.Range, want = aws.String(rng), body[1000:70001]
			}
			out, err := c.GetObject(ctx, in)
			testutil.Must(t, err)
			got, err := io.ReadAll(out.Body)
			out.Body.Close()
			testutil.Must(t, err)
			if !bytes.Equal(got, want) {
				t.Errorf("%s %q: read %d bytes, not the %d put", key, rng, len(got), len(want))
			}
		}
	}

	// DeleteObjects must carry a checksum to S3: over TLS the SDK sends it
	// in a trailer. One key (passed on as it is), then keys of several
	// owners (split per owner).
	for _, keys := range [][]string{{"tls/small"}, {"tls/large", "wb/tls-large", "tls/absent-1", "tls/absent-2"}} {
		var ids []types.ObjectIdentifier
		for _, k := range keys {
			ids = append(ids, types.ObjectIdentifier{Key: aws.String(k)})
		}
		out, err := c.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String("bucket-a"), Delete: &types.Delete{Objects: ids}})
		testutil.Must(t, err)
		if len(out.Deleted) != len(keys) || len(out.Errors) != 0 {
			t.Errorf("DeleteObjects of %v: %d deleted, errors %+v", keys, len(out.Deleted), out.Errors)
		}
		for _, k := range keys {
			testutil.WaitFor(t, k+" gone from S3", func() bool { return inMinIO(t, e, k) == nil })
		}
	}

	served := func() *x509.Certificate {
		t.Helper()
		conn, err := tls.Dial("tcp", e.srv.Addr(), trust)
		testutil.Must(t, err)
		defer conn.Close()
		return conn.ConnectionState().PeerCertificates[0]
	}
	if got := served(); got.SerialNumber.Cmp(first.SerialNumber) != 0 {
		t.Fatalf("serving certificate %v, want the one issued (%v)", got.SerialNumber, first.SerialNumber)
	}
	renewed := tg.issue()
	testutil.WaitFor(t, "the renewed certificate served", func() bool { return served().SerialNumber.Cmp(renewed.SerialNumber) == 0 })
}

// tlsGateway is the certificate authority and files of a gateway's TLS
// port (--listen-tls-cert, --listen-tls-key).
type tlsGateway struct {
	t       testing.TB
	ca      *pki.CA
	dir     string
	caFile  string            // the CA's certificate, PEM
	first   *x509.Certificate // the certificate the gateway started with
	issueMu sync.Mutex
}

// tlsGatewayOn starts a gateway serving the S3 API over TLS in front of e's
// cluster, with a certificate for 127.0.0.1 and localhost from a CA of its
// own (tlsGateway.ca).
func tlsGatewayOn(t testing.TB, e *env) (*env, *tlsGateway) {
	t.Helper()
	ca, err := pki.NewCA("gateway clients' CA", time.Hour)
	testutil.Must(t, err)
	tg := &tlsGateway{t: t, ca: ca, dir: t.TempDir()}
	tg.caFile = filepath.Join(tg.dir, "ca.crt")
	testutil.Must(t, os.WriteFile(tg.caFile, ca.CertPEM, 0o600))
	tg.first = tg.issue()
	return gatewayOn(t, e.cluster, envOptions{pageCache: 8 << 20, configure: func(cfg *embed.GatewayConfig) {
		cfg.ListenTLSCert, cfg.ListenTLSKey = filepath.Join(tg.dir, "gateway.crt"), filepath.Join(tg.dir, "gateway.key")
	}}), tg
}

// issue writes a new certificate for the gateway and returns it.
func (tg *tlsGateway) issue() *x509.Certificate {
	tg.t.Helper()
	tg.issueMu.Lock()
	defer tg.issueMu.Unlock()
	leaf, err := tg.ca.IssueServer("gateway", []string{"localhost"}, []net.IP{net.IPv4(127, 0, 0, 1)}, time.Hour)
	testutil.Must(tg.t, err)
	testutil.Must(tg.t, pki.WriteFiles(tg.dir, "gateway", leaf))
	c, err := tls.X509KeyPair(leaf.CertPEM, leaf.KeyPEM)
	testutil.Must(tg.t, err)
	x, err := x509.ParseCertificate(c.Certificate[0])
	testutil.Must(tg.t, err)
	return x
}
