package sigv4

import (
	"bytes"
	"crypto/md5"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/distcache/distcache/internal/s3list"
)

// Test credentials.
const (
	testKeyID  = "AKIDDISTCACHETEST"
	testSecret = "s3cr3t/with+slash=and+plus"
	testRegion = "us-east-1"
)

// outcome is what the test server saw for one request.
type outcome struct {
	Method, URI   string
	ContentSHA256 string // x-amz-content-sha256 as received
	Result        *Result
	Err           *Error // from Verify or from reading the body
	Body          []byte // decoded body (PUT)
	Trailer       http.Header
}

// s3Server is a minimal path-style S3 (PUT, GET with Range, HEAD,
// ListObjectsV2) behind Verify, over real HTTP on loopback. Every request is
// verified; PUT bodies are read to EOF through the verifying reader and the
// SHA-256 of what was decoded is echoed in X-Decoded-Sha256.
type s3Server struct {
	*httptest.Server
	v      *Verifier
	offset atomic.Int64 // added to the verifier's clock, in nanoseconds

	mu       sync.Mutex
	objects  map[string][]byte // "bucket/key"
	outcomes []outcome
}

type serverConfig struct {
	tls, h2  bool
	verifier func(*Verifier)
}

type serverOpt func(*serverConfig)

// withTLS serves HTTPS, over HTTP/2 when h2 is set.
func withTLS(h2 bool) serverOpt {
	return func(c *serverConfig) { c.tls, c.h2 = true, h2 }
}

// withVerifier adjusts the verifier before the server starts.
func withVerifier(f func(*Verifier)) serverOpt {
	return func(c *serverConfig) { c.verifier = f }
}

func newS3Server(t testing.TB, opts ...serverOpt) *s3Server {
	t.Helper()
	var cfg serverConfig
	for _, o := range opts {
		o(&cfg)
	}
	s := &s3Server{objects: map[string][]byte{}}
	s.v = &Verifier{
		Store:  NewStaticStore(Credentials{AccessKeyID: testKeyID, SecretAccessKey: testSecret}),
		Region: testRegion,
		Now:    func() time.Time { return time.Now().Add(time.Duration(s.offset.Load())) },
	}
	if cfg.verifier != nil {
		cfg.verifier(s.v)
	}
	hs := httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	if cfg.tls {
		hs.EnableHTTP2 = cfg.h2
		hs.StartTLS()
	} else {
		hs.Start()
	}
	s.Server = hs
	t.Cleanup(hs.Close)
	return s
}

func (s *s3Server) record(o outcome) {
	s.mu.Lock()
	s.outcomes = append(s.outcomes, o)
	s.mu.Unlock()
}

// takeOutcomes returns and forgets the outcomes so far.
func (s *s3Server) takeOutcomes() []outcome {
	s.mu.Lock()
	defer s.mu.Unlock()
	o := s.outcomes
	s.outcomes = nil
	return o
}

// requireAllVerified fails the test if any request so far failed
// verification, and returns the outcomes.
func (s *s3Server) requireAllVerified(t *testing.T) []outcome {
	t.Helper()
	os := s.takeOutcomes()
	if len(os) == 0 {
		t.Fatal("the server saw no request")
	}
	for _, o := range os {
		if o.Err != nil {
			t.Errorf("%s %s (x-amz-content-sha256 %q): %v", o.Method, o.URI, o.ContentSHA256, o.Err)
		}
	}
	return os
}

func (s *s3Server) object(bucket, key string) ([]byte, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	b, ok := s.objects[bucket+"/"+key]
	return b, ok
}

func (s *s3Server) serve(w http.ResponseWriter, r *http.Request) {
	o := outcome{Method: r.Method, URI: r.RequestURI, ContentSHA256: r.Header.Get("X-Amz-Content-Sha256")}
	res, err := s.v.Verify(r)
	if err != nil {
		o.Err = asError(err)
		s.record(o)
		writeS3Error(w, r, err)
		return
	}
	o.Result = res
	bucket, key, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
	switch {
	case r.Method == http.MethodPut:
		body, err := io.ReadAll(r.Body)
		o.Body, o.Trailer = body, r.Trailer.Clone()
		if err != nil {
			o.Err = asError(err)
			s.record(o)
			writeS3Error(w, r, err)
			return
		}
		s.mu.Lock()
		s.objects[bucket+"/"+key] = body
		s.mu.Unlock()
		s.record(o)
		sum := sha256.Sum256(body)
		m := md5.Sum(body)
		w.Header().Set("X-Decoded-Sha256", hex.EncodeToString(sum[:]))
		w.Header().Set("ETag", `"`+hex.EncodeToString(m[:])+`"`)
	case (r.Method == http.MethodGet || r.Method == http.MethodHead) && key == "" && r.URL.Query().Get("list-type") == "2":
		s.record(o)
		s.list(w, r, bucket)
	case r.Method == http.MethodGet || r.Method == http.MethodHead:
		s.record(o)
		body, ok := s.object(bucket, key)
		if !ok {
			writeS3Error(w, r, &Error{Code: "NoSuchKey", Message: "The specified key does not exist.", Status: http.StatusNotFound})
			return
		}
		m := md5.Sum(body)
		w.Header().Set("ETag", `"`+hex.EncodeToString(m[:])+`"`)
		http.ServeContent(w, r, "", time.Unix(1700000000, 0), bytes.NewReader(body))
	default:
		s.record(o)
		writeS3Error(w, r, &Error{Code: "NotImplemented", Message: r.Method, Status: http.StatusNotImplemented})
	}
}

// list implements ListObjectsV2. The continuation token is the base64 of
// the last entry returned, so it carries '+', '/' and '=' through the query
// string.
func (s *s3Server) list(w http.ResponseWriter, r *http.Request, bucket string) {
	q := r.URL.Query()
	prefix, delim, token := q.Get("prefix"), q.Get("delimiter"), q.Get("continuation-token")
	maxKeys := 1000
	if m := q.Get("max-keys"); m != "" {
		maxKeys, _ = strconv.Atoi(m)
	}
	after := ""
	if token != "" {
		b, err := base64.StdEncoding.DecodeString(token)
		if err != nil {
			writeS3Error(w, r, &Error{Code: "InvalidArgument", Message: "bad token", Status: http.StatusBadRequest})
			return
		}
		after = string(b)
	}
	s.mu.Lock()
	var keys []string
	for k := range s.objects {
		if b, key, _ := strings.Cut(k, "/"); b == bucket && strings.HasPrefix(key, prefix) {
			keys = append(keys, key)
		}
	}
	sizes := map[string]int{}
	for _, k := range keys {
		sizes[k] = len(s.objects[bucket+"/"+k])
	}
	s.mu.Unlock()
	sort.Strings(keys)

	res := s3list.Page{Name: bucket, Prefix: prefix, Delimiter: delim, MaxKeys: maxKeys, ContinuationToken: token, KeyCount: new(int)}
	last := ""
	for _, k := range keys {
		entry, isPrefix := k, false
		if delim != "" {
			if i := strings.Index(k[len(prefix):], delim); i >= 0 {
				entry, isPrefix = k[:len(prefix)+i+len(delim)], true
			}
		}
		if entry <= after || entry == last {
			continue
		}
		if *res.KeyCount == maxKeys {
			res.IsTruncated = true
			res.NextContinuationToken = base64.StdEncoding.EncodeToString([]byte(last))
			break
		}
		last = entry
		*res.KeyCount++
		if isPrefix {
			res.CommonPrefixes = append(res.CommonPrefixes, s3list.CommonPrefix{Prefix: entry})
		} else {
			res.Contents = append(res.Contents, s3list.Object{Key: k, Size: int64(sizes[k]), ETag: `"x"`, LastModified: "2024-01-01T00:00:00.000Z"})
		}
	}
	w.Header().Set("Content-Type", "application/xml")
	out, _ := res.Marshal()
	w.Write(out)
}

func asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	return &Error{Code: "InternalError", Message: err.Error(), Status: http.StatusInternalServerError}
}

func writeS3Error(w http.ResponseWriter, r *http.Request, err error) {
	e := asError(err)
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(e.Status)
	if r.Method != http.MethodHead {
		fmt.Fprintf(w, "%s<Error><Code>%s</Code><Message>%s</Message></Error>", xml.Header, e.Code, xmlEscape(e.Message))
	}
}

func xmlEscape(s string) string {
	var b strings.Builder
	xml.EscapeText(&b, []byte(s))
	return b.String()
}

// do sends req to the server with the default transport (or the server's
// TLS client) and returns the status and body.
func (s *s3Server) do(t *testing.T, req *http.Request) (int, string) {
	t.Helper()
	resp, err := s.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", req.Method, req.URL, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// wantCode asserts that err is an *Error with the given code.
func wantCode(t *testing.T, err error, code string) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e == nil {
		t.Fatalf("got error %v (%T), want an *Error with code %s", err, err, code)
	}
	if e.Code != code {
		t.Fatalf("got code %s (%s), want %s", e.Code, e.Message, code)
	}
	if e.Status != statusOf(code) {
		t.Fatalf("code %s has status %d, want %d", code, e.Status, statusOf(code))
	}
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}
