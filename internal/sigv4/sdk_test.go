package sigv4

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/distcache/distcache/internal/testutil"
)

// Keys that stress path canonicalisation: spaces, UTF-8, the characters
// with a meaning in URLs or in form encoding, sub-delimiters Go leaves
// unescaped, and empty path segments (S3 does not normalise paths).
var trickyKeys = []string{
	"dir/plain.txt",
	"dir/with space.txt",
	"dir/ünïcødé-✓ 日本.bin",
	"dir/a+b=c%d&e;f.txt",
	"dir/sub/deeper/x",
	"dir/sub/y",
	"dir/(paren)!*'~$@,.txt",
	"dir//double-slash",
	"top+level=1%2F",
}

func newClient(s *s3Server, keyID, secret string, optFns ...func(*s3.Options)) *s3.Client {
	return s3.New(s3.Options{
		Region:       testRegion,
		Credentials:  credentials.NewStaticCredentialsProvider(keyID, secret, ""),
		BaseEndpoint: aws.String(s.URL),
		UsePathStyle: true,
		HTTPClient:   s.Client(),
		Retryer:      aws.NopRetryer{},
		// What config.LoadDefaultConfig resolves to; s3.New alone leaves
		// it unset, which means "only when required".
		RequestChecksumCalculation: aws.RequestChecksumCalculationWhenSupported,
		ResponseChecksumValidation: aws.ResponseChecksumValidationWhenSupported,
	}, optFns...)
}

// decodedHash is the X-Decoded-Sha256 the test server echoed.
func decodedHash(t *testing.T, md middleware.Metadata) string {
	t.Helper()
	raw, ok := awsmiddleware.GetRawResponse(md).(*smithyhttp.Response)
	if !ok {
		t.Fatal("no raw response")
	}
	return raw.Header.Get("X-Decoded-Sha256")
}

func put(t *testing.T, c *s3.Client, key string, body []byte, optFns ...func(*s3.PutObjectInput)) {
	t.Helper()
	in := &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String(key), Body: bytes.NewReader(body)}
	for _, f := range optFns {
		f(in)
	}
	out, err := c.PutObject(context.Background(), in)
	if err != nil {
		t.Fatalf("PutObject %q: %v", key, err)
	}
	if got, want := decodedHash(t, out.ResultMetadata), sha256Hex(body); got != want {
		t.Fatalf("PutObject %q: server decoded a body with SHA-256 %s, want %s", key, got, want)
	}
}

func get(t *testing.T, c *s3.Client, key string, rng *string) []byte {
	t.Helper()
	out, err := c.GetObject(context.Background(), &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String(key), Range: rng})
	if err != nil {
		t.Fatalf("GetObject %q: %v", key, err)
	}
	defer out.Body.Close()
	b, err := io.ReadAll(out.Body)
	testutil.Must(t, err)
	return b
}

// modes returns the distinct x-amz-content-sha256 kinds of PUT requests.
func putModes(os []outcome) []string {
	var m []string
	for _, o := range os {
		if o.Method == http.MethodPut && o.Result != nil && !slices.Contains(m, o.Result.PayloadMode) {
			m = append(m, o.Result.PayloadMode)
		}
	}
	sort.Strings(m)
	return m
}

func TestSDK(t *testing.T) {
	for _, tc := range []struct {
		name     string
		opts     []serverOpt
		putModes []string // what aws-sdk-go-v2 chooses for PutObject
	}{
		// Over plain HTTP the SDK signs the body's SHA-256 and sends the
		// CRC32 as a header; over HTTPS it streams aws-chunked with the
		// checksum in a trailer.
		{"http", nil, []string{PayloadSHA256}},
		// (An empty body is always sent as UNSIGNED-PAYLOAD over HTTPS.)
		{"https", []serverOpt{withTLS(false)}, []string{PayloadStreamingUnsignedTrailer, PayloadUnsigned}},
		{"https-h2", []serverOpt{withTLS(true)}, []string{PayloadStreamingUnsignedTrailer, PayloadUnsigned}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newS3Server(t, tc.opts...)
			c := newClient(s, testKeyID, testSecret)

			t.Run("PutGetHead", func(t *testing.T) {
				bodies := map[string][]byte{}
				for i, k := range trickyKeys {
					bodies[k] = testutil.SeededBytes(uint64(i), 100+i*37)
					put(t, c, k, bodies[k])
				}
				bodies["dir/empty"] = nil
				put(t, c, "dir/empty", nil)
				for k, want := range bodies {
					if stored, _ := s.object("bkt", k); !bytes.Equal(stored, want) {
						t.Errorf("stored %q: %d bytes differ from the %d sent", k, len(stored), len(want))
					}
					if got := get(t, c, k, nil); !bytes.Equal(got, want) {
						t.Errorf("GetObject %q returned different bytes", k)
					}
					h, err := c.HeadObject(context.Background(), &s3.HeadObjectInput{Bucket: aws.String("bkt"), Key: aws.String(k)})
					if err != nil {
						t.Fatalf("HeadObject %q: %v", k, err)
					}
					if aws.ToInt64(h.ContentLength) != int64(len(want)) {
						t.Errorf("HeadObject %q: length %d", k, aws.ToInt64(h.ContentLength))
					}
				}
				os := s.requireAllVerified(t)
				if got := putModes(os); !slices.Equal(got, tc.putModes) {
					t.Errorf("PutObject payload modes %v, want %v", got, tc.putModes)
				}
			})

			t.Run("LargeBodyAndRange", func(t *testing.T) {
				body := testutil.SeededBytes(42, 3<<20+12345)
				put(t, c, "big/object.bin", body)
				got := get(t, c, "big/object.bin", aws.String("bytes=1048570-2097160"))
				if !bytes.Equal(got, body[1048570:2097161]) {
					t.Errorf("ranged GET returned %d bytes, not the range", len(got))
				}
				if got := get(t, c, "big/object.bin", nil); !bytes.Equal(got, body) {
					t.Error("full GET differs")
				}
				s.requireAllVerified(t)
			})

			t.Run("ChecksumAlgorithms", func(t *testing.T) {
				for _, alg := range []types.ChecksumAlgorithm{
					types.ChecksumAlgorithmCrc32, types.ChecksumAlgorithmCrc32c, types.ChecksumAlgorithmCrc64nvme,
					types.ChecksumAlgorithmSha1, types.ChecksumAlgorithmSha256,
				} {
					body := testutil.SeededBytes(uint64(len(alg)), 200<<10+7)
					key := "sum/" + string(alg)
					put(t, c, key, body, func(in *s3.PutObjectInput) { in.ChecksumAlgorithm = alg })
					os := s.requireAllVerified(t)
					name := "x-amz-checksum-" + strings.ToLower(string(alg))
					if tc.putModes[0] == PayloadStreamingUnsignedTrailer {
						if os[0].Trailer.Get(name) == "" {
							t.Errorf("%s: trailer %s not received (trailer %v)", alg, name, os[0].Trailer)
						}
					}
				}
			})

			t.Run("UnsignedPayload", func(t *testing.T) {
				uc := newClient(s, testKeyID, testSecret, s3.WithAPIOptions(v4.SwapComputePayloadSHA256ForUnsignedPayloadMiddleware),
					func(o *s3.Options) { o.RequestChecksumCalculation = aws.RequestChecksumCalculationWhenRequired })
				body := testutil.SeededBytes(7, 5000)
				put(t, uc, "unsigned/x", body)
				if got := get(t, uc, "unsigned/x", nil); !bytes.Equal(got, body) {
					t.Error("GET differs")
				}
				os := s.requireAllVerified(t)
				if got := putModes(os); !slices.Equal(got, []string{PayloadUnsigned}) {
					t.Errorf("modes %v, want UNSIGNED-PAYLOAD", got)
				}
			})

			t.Run("ListObjectsV2", func(t *testing.T) {
				for _, k := range trickyKeys {
					put(t, c, k, []byte(k))
				}
				s.takeOutcomes()
				// Page through dir/ two entries at a time: the continuation
				// tokens are base64 and carry '+', '/' and '=' in the query.
				var keys, prefixes []string
				var token *string
				pages := 0
				for {
					out, err := c.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{
						Bucket: aws.String("bkt"), Prefix: aws.String("dir/"), Delimiter: aws.String("/"),
						MaxKeys: aws.Int32(2), ContinuationToken: token,
					})
					if err != nil {
						t.Fatalf("ListObjectsV2: %v", err)
					}
					pages++
					for _, o := range out.Contents {
						keys = append(keys, aws.ToString(o.Key))
					}
					for _, p := range out.CommonPrefixes {
						prefixes = append(prefixes, aws.ToString(p.Prefix))
					}
					if !aws.ToBool(out.IsTruncated) {
						break
					}
					token = out.NextContinuationToken
				}
				wantKeys := []string{"dir/(paren)!*'~$@,.txt", "dir/a+b=c%d&e;f.txt", "dir/empty", "dir/plain.txt", "dir/with space.txt", "dir/ünïcødé-✓ 日本.bin"}
				wantPrefixes := []string{"dir//", "dir/sub/"}
				if !slices.Equal(keys, wantKeys) || !slices.Equal(prefixes, wantPrefixes) {
					t.Errorf("listed keys %q prefixes %q, want %q %q", keys, prefixes, wantKeys, wantPrefixes)
				}
				if pages < 3 {
					t.Errorf("only %d pages", pages)
				}
				// Prefixes that need encoding in the query string.
				for _, p := range []string{"dir/with space", "dir/ünïcødé-✓ 日", "dir/a+b=c%d&e;", "top+level=1%2F", "dir/(paren)!*'~$@,"} {
					out, err := c.ListObjectsV2(context.Background(), &s3.ListObjectsV2Input{Bucket: aws.String("bkt"), Prefix: aws.String(p)})
					if err != nil {
						t.Fatalf("ListObjectsV2 prefix %q: %v", p, err)
					}
					if len(out.Contents) != 1 || !strings.HasPrefix(aws.ToString(out.Contents[0].Key), p) {
						t.Errorf("prefix %q listed %d objects", p, len(out.Contents))
					}
				}
				s.requireAllVerified(t)
			})
		})
	}
}

func TestSDKPresigned(t *testing.T) {
	s := newS3Server(t)
	c := newClient(s, testKeyID, testSecret)
	pc := s3.NewPresignClient(c)
	ctx := context.Background()

	body := testutil.SeededBytes(3, 70000)
	for _, key := range []string{"presigned/obj", "presigned/with space+plus=ü"} {
		preq, err := pc.PresignPutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String(key)})
		testutil.Must(t, err)
		req, _ := http.NewRequest(preq.Method, preq.URL, bytes.NewReader(body))
		for k, vs := range preq.SignedHeader {
			if !strings.EqualFold(k, "host") {
				req.Header[k] = vs
			}
		}
		if status, msg := s.do(t, req); status != http.StatusOK {
			t.Fatalf("presigned PUT: %d %s", status, msg)
		}

		greq, err := pc.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String(key), Range: aws.String("bytes=10-19")})
		testutil.Must(t, err)
		req, _ = http.NewRequest(greq.Method, greq.URL, nil)
		for k, vs := range greq.SignedHeader {
			if !strings.EqualFold(k, "host") {
				req.Header[k] = vs
			}
		}
		if status, got := s.do(t, req); status != http.StatusPartialContent || got != string(body[10:20]) {
			t.Fatalf("presigned GET: %d, %d bytes", status, len(got))
		}
		for _, o := range s.requireAllVerified(t) {
			if !o.Result.Presigned || o.Result.PayloadMode != PayloadUnsigned {
				t.Errorf("%s: result %+v", o.Method, o.Result)
			}
		}
		if stored, _ := s.object("bkt", key); !bytes.Equal(stored, body) {
			t.Error("stored body differs")
		}
	}

	t.Run("expired", func(t *testing.T) {
		greq, err := pc.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("presigned/obj")},
			s3.WithPresignExpires(90*1e9))
		testutil.Must(t, err)
		s.offset.Store(int64(2 * 60 * 1e9)) // two minutes later
		defer s.offset.Store(0)
		req, _ := http.NewRequest(greq.Method, greq.URL, nil)
		status, msg := s.do(t, req)
		if status != http.StatusForbidden || !strings.Contains(msg, "Request has expired") {
			t.Errorf("expired presigned GET: %d %s", status, msg)
		}
		wantCode(t, s.takeOutcomes()[0].Err, CodeAccessDenied)
	})

	t.Run("tampered", func(t *testing.T) {
		greq, err := pc.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("presigned/obj")})
		testutil.Must(t, err)
		req, _ := http.NewRequest(greq.Method, strings.Replace(greq.URL, "presigned/obj", "presigned/other", 1), nil)
		s.do(t, req)
		wantCode(t, s.takeOutcomes()[0].Err, CodeSignatureDoesNotMatch)
	})
}

// apiCode returns the S3 error code the SDK parsed from the response.
func apiCode(t *testing.T, err error) string {
	t.Helper()
	var ae smithy.APIError
	if !errors.As(err, &ae) {
		t.Fatalf("want an API error, got %v", err)
	}
	return ae.ErrorCode()
}

// tamperTransport flips one byte of the request body after the SDK signed it.
type tamperTransport struct {
	base http.RoundTripper
	at   int // offset of the byte to flip; -1 flips the first data byte of an aws-chunked body
}

func (tt tamperTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Body != nil && req.Method == http.MethodPut {
		b, err := io.ReadAll(req.Body)
		if err != nil {
			return nil, err
		}
		i := tt.at
		if i < 0 {
			i = bytes.Index(b, []byte("\r\n")) + 2
		}
		b[i] ^= 0x20
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(b))
	}
	return tt.base.RoundTrip(req)
}

func TestSDKNegative(t *testing.T) {
	ctx := context.Background()
	body := []byte("the quick brown fox jumps over the lazy dog")
	putIn := func() *s3.PutObjectInput {
		return &s3.PutObjectInput{Bucket: aws.String("bkt"), Key: aws.String("neg/x"), Body: bytes.NewReader(body)}
	}

	t.Run("wrong secret", func(t *testing.T) {
		s := newS3Server(t)
		_, err := newClient(s, testKeyID, "not-the-secret").PutObject(ctx, putIn())
		if code := apiCode(t, err); code != CodeSignatureDoesNotMatch {
			t.Errorf("code %s", code)
		}
		wantCode(t, s.takeOutcomes()[0].Err, CodeSignatureDoesNotMatch)
	})
	t.Run("unknown key", func(t *testing.T) {
		s := newS3Server(t)
		_, err := newClient(s, "AKIDUNKNOWN", testSecret).GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k")})
		if code := apiCode(t, err); code != CodeInvalidAccessKeyID {
			t.Errorf("code %s", code)
		}
	})
	t.Run("clock skew", func(t *testing.T) {
		s := newS3Server(t)
		s.offset.Store(int64(16 * 60 * 1e9))
		_, err := newClient(s, testKeyID, testSecret).GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k")})
		if code := apiCode(t, err); code != CodeRequestTimeTooSkewed {
			t.Errorf("code %s", code)
		}
		s.offset.Store(int64(14 * 60 * 1e9)) // within the default 15 minutes
		_, err = newClient(s, testKeyID, testSecret).GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k")})
		if code := apiCode(t, err); code != "NoSuchKey" {
			t.Errorf("within skew: code %s", code)
		}
	})
	t.Run("wrong region", func(t *testing.T) {
		s := newS3Server(t)
		_, err := newClient(s, testKeyID, testSecret, func(o *s3.Options) { o.Region = "eu-west-1" }).
			GetObject(ctx, &s3.GetObjectInput{Bucket: aws.String("bkt"), Key: aws.String("k")})
		if code := apiCode(t, err); code != CodeAuthorizationHeaderMalformed {
			t.Errorf("code %s", code)
		}
	})
	// A body changed on the way after it was signed: the headers verify,
	// the body read fails, nothing is stored.
	for _, tc := range []struct {
		name string
		opts []serverOpt
		at   int // tamperTransport's
		code string
		mode string
	}{
		{"tampered body, signed sha256", nil, 5, CodeXAmzContentSHA256Mismatch, PayloadSHA256},
		// Over TLS the SDK sends the body unsigned, aws-chunked with a trailing checksum.
		{"tampered body, trailing checksum", []serverOpt{withTLS(false)}, -1, CodeBadDigest, PayloadStreamingUnsignedTrailer},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newS3Server(t, tc.opts...)
			c := newClient(s, testKeyID, testSecret, func(o *s3.Options) {
				o.HTTPClient = &http.Client{Transport: tamperTransport{base: s.Client().Transport, at: tc.at}}
			})
			_, err := c.PutObject(ctx, putIn())
			if code := apiCode(t, err); code != tc.code {
				t.Errorf("code %s", code)
			}
			o := s.takeOutcomes()[0]
			if o.Result == nil || o.Result.PayloadMode != tc.mode {
				t.Fatalf("Verify should accept the headers (payload mode %s), the body read must fail: %+v", tc.mode, o)
			}
			wantCode(t, o.Err, tc.code)
			if _, ok := s.object("bkt", "neg/x"); ok {
				t.Error("tampered object was stored")
			}
		})
	}
}

func Example() {
	v := &Verifier{
		Store:  NewStaticStore(Credentials{AccessKeyID: "AKID", SecretAccessKey: "secret"}),
		Region: "us-east-1",
	}
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		res, err := v.Verify(r)
		var e *Error
		if errors.As(err, &e) {
			http.Error(w, e.Code, e.Status)
			return
		}
		// Stream r.Body; any read error (an *Error for integrity failures)
		// means the upload must be discarded.
		_, err = io.Copy(io.Discard, r.Body)
		fmt.Println(res.AccessKeyID, err)
	})
}
