package gateway_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/distcache/distcache/internal/testutil"
)

type response struct {
	status int
	header http.Header
	body   []byte
}

// signedDo signs req with SigV4 (payload hash of body, or of signAs when
// it is given: a body that does not match what was signed) and sends it.
func signedDo(t *testing.T, req *http.Request, body []byte, key, secret string, signAs ...[]byte) response {
	t.Helper()
	hashOf := body
	if len(signAs) > 0 {
		hashOf = signAs[0]
	}
	sum := sha256.Sum256(hashOf)
	payload := hex.EncodeToString(sum[:])
	req.Header.Set("X-Amz-Content-Sha256", payload)
	if body != nil {
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.ContentLength = int64(len(body))
	}
	err := v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: key, SecretAccessKey: secret},
		req, payload, "s3", region, time.Now())
	testutil.Must(t, err)
	resp, err := http.DefaultClient.Do(req)
	testutil.Must(t, err)
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	testutil.Must(t, err)
	return response{status: resp.StatusCode, header: resp.Header, body: b}
}

// rawGet GETs bucket-a/key with an optional Range header, signed.
func rawGet(t *testing.T, endpoint, key, rng, ak, sk string) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, endpoint+"/bucket-a/"+key, nil)
	testutil.Must(t, err)
	if rng != "" {
		req.Header.Set("Range", rng)
	}
	return signedDo(t, req, nil, ak, sk)
}

func xmlUnmarshal(b []byte, v any) error { return xml.Unmarshal(b, v) }

// xmlCode is the Code of an S3 error document ("" if there is none).
func xmlCode(b []byte) string {
	var doc struct{ Code string }
	if xml.Unmarshal(b, &doc) != nil {
		return ""
	}
	return doc.Code
}
