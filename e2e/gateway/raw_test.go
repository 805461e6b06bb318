package gateway_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/xml"
	"io"
	"net"
	"net/http"
	"strings"
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

// A client that sends Expect: 100-continue (boto3 does over https) waits
// for 100 Continue before its body. A request the gateway refuses before
// reading the body is answered at once, and the connection closed, since
// the client may or may not send the body after it; the gateway does not
// wait for a body it never asked for, and the next request on a new
// connection is served.
func TestRefusalBeforeBodyIsAnsweredAtOnce(t *testing.T) {
	e := newEnv(t, envOptions{})
	body := bytes.Repeat([]byte("b"), 1000)
	req, _ := http.NewRequest(http.MethodPut, e.srv.URL()+"/bucket-a/expect/too-much", bytes.NewReader(body))
	req.Header.Set("X-Amz-Meta-Big", strings.Repeat("v", 2100)) // MetadataTooLarge: refused before the body
	req.Header.Set("Expect", "100-continue")
	sum := sha256.Sum256(body)
	req.Header.Set("X-Amz-Content-Sha256", hex.EncodeToString(sum[:]))
	testutil.Must(t, v4.NewSigner().SignHTTP(context.Background(), aws.Credentials{AccessKeyID: accessKey, SecretAccessKey: secretKey},
		req, hex.EncodeToString(sum[:]), "s3", region, time.Now()))

	conn, err := net.Dial("tcp", e.srv.Addr())
	testutil.Must(t, err)
	defer conn.Close()
	// The head only: the body waits for 100 Continue. A gateway that waits
	// for it instead of answering never answers; the deadline ends the
	// wait (generous: nothing here is slow).
	testutil.Must(t, req.Write(&headOnly{w: conn}))
	testutil.Must(t, conn.SetReadDeadline(time.Now().Add(30*time.Second)))
	resp, err := http.ReadResponse(bufio.NewReader(conn), req)
	if err != nil {
		t.Fatalf("no answer before the body was sent: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest || xmlCode(b) != "MetadataTooLarge" || !resp.Close {
		t.Errorf("answer %d %s, Connection: close %v; want 400 MetadataTooLarge and the connection closed", resp.StatusCode, b, resp.Close)
	}
	if got := rawGet(t, e.srv.URL(), "expect/too-much", "", accessKey, secretKey); got.status != http.StatusNotFound {
		t.Errorf("the refused object: GET %d, want 404", got.status)
	}
}

// headOnly writes a request's head and drops its body.
type headOnly struct {
	w    io.Writer
	done bool
}

func (h *headOnly) Write(p []byte) (int, error) {
	if h.done {
		return len(p), nil
	}
	if i := bytes.Index(p, []byte("\r\n\r\n")); i >= 0 {
		h.done = true
		_, err := h.w.Write(p[:i+4])
		return len(p), err
	}
	return h.w.Write(p)
}
