package gateway_test

import (
	"context"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/s3"

	"github.com/distcache/distcache/internal/testutil"
	"github.com/distcache/distcache/internal/testutil/pyscenario"
)

// boto3 is the AWS SDK for Python, in the virtualenv hack/boto3-venv.sh builds.
var boto3 = pyscenario.Venv{Script: "hack/boto3-venv.sh", EnvVar: "BOTO3_PYTHON", Module: "boto3"}

// TestBoto3ThroughGateway runs e2e/boto3/scenario.py (boto3 with its
// defaults: puts with and without checksums, the transfer manager's
// multipart upload, ranged download and managed copy, ranges, conditional
// GETs, listings, copies, presigned Version 4 URLs, attributes, deletes, an
// aborted multipart upload, errors) against MinIO directly, through the
// gateway on write-through keys, on WriteBack keys (held by the nodes, S3
// getting them later) and on Transient keys (never in S3), and through a
// gateway serving TLS, and requires the same answers. A URL boto3
// presigns with its default signer for S3 (Signature Version 2) gets S3's
// 400 InvalidRequest from the gateway, where MinIO serves it.
func TestBoto3ThroughGateway(t *testing.T) {
	if testing.Short() {
		t.Skip("needs boto3 (hack/boto3-venv.sh); skipped in -short mode")
	}
	py := boto3.Python(t) // build or find the venv first, so its failure reads clearly
	e := newEnv(t, envOptions{pageCache: 64 << 20, tenants: heldTenants})
	minio := e.cluster.MinIO
	run := func(tg pyscenario.Target) *pyscenario.Result {
		t.Helper()
		tg.Bucket = "bucket-a"
		return pyscenario.Run(t, py, "e2e/boto3/scenario.py", tg, 3*time.Minute)
	}
	ref := run(pyscenario.Target{Endpoint: minio.Endpoint, AccessKey: minio.AccessKey, SecretKey: minio.SecretKey,
		Prefix: "boto3-minio-direct", Region: minio.Region})
	gateway := pyscenario.Target{Endpoint: e.srv.URL(), AccessKey: accessKey, SecretKey: secretKey, Region: region}
	gateway.Prefix = "boto3-through-gateway"
	through := run(gateway)
	gateway.Prefix = "wb/boto3" // heldTenants: WriteBack
	held := run(gateway)
	gateway.Prefix = "tmp/boto3" // heldTenants: Transient
	transient := run(gateway)
	// Over TLS boto3 signs no payload and sends checksums in aws-chunked
	// trailers.
	overTLS, tg := tlsGatewayOn(t, e)
	secure := gateway
	secure.Endpoint, secure.CABundle = overTLS.srv.URL(), tg.caFile
	secure.Prefix = "boto3-over-tls"
	tlsThrough := run(secure)
	secure.Prefix = "wb/boto3-tls"
	tlsHeld := run(secure)
	t.Logf("MinIO direct: %d steps in %v; through the gateway: %v; WriteBack keys: %v; Transient keys: %v; over TLS: %v, %v",
		len(ref.Results), ref.Elapsed, through.Elapsed, held.Elapsed, transient.Elapsed, tlsThrough.Elapsed, tlsHeld.Elapsed)
	pyscenario.RequireSame(t, "MinIO direct", ref.Results, "gateway", through.Results)
	pyscenario.RequireSame(t, "MinIO direct", ref.Results, "gateway, WriteBack keys", held.Results)
	pyscenario.RequireSame(t, "MinIO direct", ref.Results, "gateway, Transient keys", transient.Results)
	pyscenario.RequireSame(t, "MinIO direct", ref.Results, "gateway over TLS", tlsThrough.Results)
	pyscenario.RequireSame(t, "MinIO direct", ref.Results, "gateway over TLS, WriteBack keys", tlsHeld.Results)
	listed, err := e.cluster.Direct.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String("bucket-a"), Prefix: aws.String("tmp/")})
	testutil.Must(t, err)
	if len(listed.Contents) != 0 {
		t.Errorf("MinIO holds %d Transient objects (%s...), want none", len(listed.Contents), aws.ToString(listed.Contents[0].Key))
	}

	want := map[string]any{"signer": "v2", "error": "InvalidRequest", "status": json.Number("400")}
	if v2 := through.Info["presigned_get_default_signer"]; !reflect.DeepEqual(v2, want) {
		t.Errorf("a Signature Version 2 presigned GET through the gateway: %s, want %s", pyscenario.Short(v2), pyscenario.Short(want))
	}
	t.Logf("only in MinIO's or the gateway's answers: MinIO %s; gateway %s", pyscenario.Short(ref.Info), pyscenario.Short(through.Info))

	// The reads went through the cache.
	if n := e.counter("distcache_gateway_requests_total", map[string]string{"operation": "GetObject"}); n == 0 {
		t.Error("boto3's GetObjects did not reach the gateway's read path")
	}
	if n := e.counter("distcache_gateway_requests_total", map[string]string{"status": "500"}) +
		e.counter("distcache_gateway_requests_total", map[string]string{"status": "503"}); n != 0 {
		t.Errorf("%v requests failed with 5xx", n)
	}
}
