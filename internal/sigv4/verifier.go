// Package sigv4 verifies AWS Signature Version 4 on requests an S3 gateway
// receives from unmodified S3 clients, and reads their bodies safely.
//
// Verify checks the Authorization header or presigned-URL query parameters
// against a CredentialStore, then installs a body reader that enforces the
// payload mode the client chose in x-amz-content-sha256:
//
//   - a hex SHA-256: the body is hashed while the caller streams it; at EOF a
//     mismatch is returned as XAmzContentSHA256Mismatch instead of io.EOF.
//   - UNSIGNED-PAYLOAD: the body is passed through.
//   - STREAMING-AWS4-HMAC-SHA256-PAYLOAD[-TRAILER]: the aws-chunked body is
//     decoded; every chunk (and the trailer) signature is checked before its
//     bytes are handed out.
//   - STREAMING-UNSIGNED-PAYLOAD-TRAILER: the aws-chunked body is decoded and
//     the trailing checksum checked at EOF.
//
// In every mode the checksums the request declares for its body
// (Content-MD5, x-amz-checksum-crc32, -crc32c, -crc64nvme, -sha1, -sha256,
// as headers or aws-chunked trailers) are checked at EOF too, giving BadDigest
// on mismatch. Callers must therefore read the body to EOF, and treat every
// read error as fatal, before acting on the data (for example before
// committing an upload).
package sigv4

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// DefaultMaxSkew is how far a request's signing time may be from the
// verifier's clock when Verifier.MaxSkew is zero, as in S3.
const DefaultMaxSkew = 15 * time.Minute

// Verifier checks SigV4 signatures. Its exported fields are configuration,
// set before first use; a Verifier is safe for concurrent use and must not
// be copied after first use (it caches derived signing keys).
type Verifier struct {
	Store   CredentialStore
	Region  string        // expected region; "" accepts any region in the scope
	Service string        // expected service; "" means "s3"
	MaxSkew time.Duration // 0 means DefaultMaxSkew
	Now     func() time.Time

	keys keyCache
}

// Result describes a verified request.
type Result struct {
	AccessKeyID string
	Region      string    // from the credential scope
	SignedTime  time.Time // X-Amz-Date (or Date), UTC
	PayloadMode string    // one of the Payload* constants
	Presigned   bool      // authenticated by query parameters
}

func (v *Verifier) now() time.Time {
	if v.Now != nil {
		return v.Now()
	}
	return time.Now()
}

func (v *Verifier) service() string {
	if v.Service == "" {
		return "s3"
	}
	return v.Service
}

func (v *Verifier) maxSkew() time.Duration {
	if v.MaxSkew <= 0 {
		return DefaultMaxSkew
	}
	return v.MaxSkew
}

// request is one verification in progress.
type request struct {
	r         *http.Request
	query     []queryParam
	params    authParams
	t         time.Time
	stamp     string // t as the string to sign has it (amzDateFormat)
	payload   string // the HashedPayload line of the canonical request
	presigned bool
}

// Verify authenticates r. On success it returns who signed it and how the
// payload is protected, and may replace r.Body (and, for aws-chunked bodies,
// r.ContentLength, the Content-Length and Content-Encoding headers and
// r.Trailer) so that reading r.Body yields the object bytes and fails with
// an *Error if they do not match what was signed or declared. Every error it
// returns is an *Error.
func (v *Verifier) Verify(r *http.Request) (*Result, error) {
	res, err := v.verify(r)
	if err != nil {
		return nil, err // never a typed nil
	}
	return res, nil
}

func (v *Verifier) verify(r *http.Request) (*Result, *Error) {
	if v.Store == nil {
		return nil, newError(CodeAccessDenied, "No credentials are configured.")
	}
	// Everything downstream (routing, the node) reads the query with
	// url.ParseQuery, which drops pairs holding ';' or a bad %-escape; the
	// signature covers them. Such a query could verify and yet be acted on
	// without a parameter that was signed (a presigned ?uploadId=a%3Bb sent
	// as ?uploadId=a;b would abort nothing and delete the object), so it is
	// refused.
	if err := checkQuery(r.URL.RawQuery); err != nil {
		return nil, newError(CodeInvalidArgument, "The query string is malformed: %v", err)
	}
	q := parseQuery(r.URL.RawQuery)
	authz := r.Header.Values("Authorization")
	_, hasAlg := lookup(q, qAlgorithm)
	_, hasSig := lookup(q, qSignature)
	_, hasCred := lookup(q, qCredential)
	presigned := hasAlg || hasSig || hasCred
	switch {
	case len(authz) > 1:
		return nil, malformedHeader("more than one Authorization header")
	case len(authz) == 1 && presigned:
		return nil, newError(CodeInvalidArgument,
			"Only one auth mechanism allowed; only the X-Amz-Algorithm query parameter or the Authorization header should be specified")
	case len(authz) == 1:
		return v.verifyHeader(r, q, authz[0])
	case presigned:
		return v.verifyPresigned(r, q)
	case presignedV2(q):
		return nil, errMechanismNotSupported()
	default:
		return nil, newError(CodeAccessDenied, "Access Denied")
	}
}

// presignedV2 reports whether q carries a Signature Version 2 presigned
// URL's parameters: boto3's generate_presigned_url makes them for S3 unless
// told signature_version="s3v4". S3's regions since 2014 refuse them with
// the answer the Authorization header's "AWS" scheme gets here.
func presignedV2(q []queryParam) bool {
	_, key := lookup(q, "AWSAccessKeyId")
	_, sig := lookup(q, "Signature")
	return key && sig
}

// errMechanismNotSupported is S3's answer to a request signed with
// Signature Version 2 (or another AWS4-* algorithm).
func errMechanismNotSupported() *Error {
	return newError(CodeInvalidRequest,
		"The authorization mechanism you have provided is not supported. Please use %s.", algorithm)
}

func (v *Verifier) verifyHeader(r *http.Request, q []queryParam, authz string) (*Result, *Error) {
	params, err := parseAuthorization(authz)
	if err != nil {
		return nil, err
	}
	t, stamp, err := requestTime(r)
	if err != nil {
		return nil, err
	}
	creds, err := v.credentials(params.scope, t, malformedHeader)
	if err != nil {
		return nil, err
	}
	if d := v.now().Sub(t); d > v.maxSkew() || d < -v.maxSkew() {
		return nil, newError(CodeRequestTimeTooSkewed, "The difference between the request time and the current time is too large.")
	}
	payload := r.Header.Get("X-Amz-Content-Sha256")
	if payload == "" {
		if payload, err = hashWholeBody(r); err != nil {
			return nil, err
		}
	}
	mode, err := payloadMode(payload)
	if err != nil {
		return nil, err
	}
	return v.authenticate(&request{r: r, query: q, params: params, t: t, stamp: stamp, payload: payload}, mode, creds)
}

func (v *Verifier) verifyPresigned(r *http.Request, q []queryParam) (*Result, *Error) {
	params, t, expires, err := parsePresigned(q)
	if err != nil {
		return nil, err
	}
	creds, err := v.credentials(params.scope, t, malformedQuery)
	if err != nil {
		return nil, err
	}
	now := v.now()
	if now.Add(v.maxSkew()).Before(t) {
		return nil, newError(CodeAccessDenied, "Request is not valid yet")
	}
	if now.After(t.Add(expires)) {
		return nil, newError(CodeAccessDenied, "Request has expired")
	}
	// A presigned URL cannot know its body: the payload line is
	// UNSIGNED-PAYLOAD unless the URL itself carries a hash.
	payload := PayloadUnsigned
	if h, ok := lookup(q, qContentSHA256); ok {
		payload = h
	}
	mode, err := payloadMode(payload)
	if err != nil {
		return nil, err
	}
	if mode != PayloadUnsigned && mode != PayloadSHA256 {
		return nil, newError(CodeInvalidRequest, "aws-chunked payloads cannot be used with presigned URLs")
	}
	req := &request{r: r, query: q, params: params, t: t, stamp: t.Format(amzDateFormat), payload: payload, presigned: true}
	return v.authenticate(req, mode, creds)
}

// authenticate checks req's signature with creds and installs its body as
// mode says: the last steps of both ways of signing.
func (v *Verifier) authenticate(req *request, mode string, creds Credentials) (*Result, *Error) {
	sig, err := v.checkSignature(req, creds)
	if err != nil {
		return nil, err
	}
	if err := v.installBody(req, mode, creds, sig); err != nil {
		return nil, err
	}
	s := req.params.scope
	return &Result{AccessKeyID: s.accessKeyID, Region: s.region, SignedTime: req.t, PayloadMode: mode, Presigned: req.presigned}, nil
}

func unknownKey() *Error {
	return newError(CodeInvalidAccessKeyID, "The AWS Access Key Id you provided does not exist in our records.")
}

// requestTime reads X-Amz-Date, or Date when there is none; stamp is the
// time in amzDateFormat.
func requestTime(r *http.Request) (t time.Time, stamp string, _ *Error) {
	if s := r.Header.Get("X-Amz-Date"); s != "" {
		t, stamp, err := parseAmzDate(s)
		if err != nil {
			return time.Time{}, "", newError(CodeAccessDenied, "AWS authentication requires a valid Date or x-amz-date header")
		}
		return t, stamp, nil
	}
	if s := r.Header.Get("Date"); s != "" {
		t, err := http.ParseTime(s)
		if err != nil {
			return time.Time{}, "", newError(CodeAccessDenied, "AWS authentication requires a valid Date or x-amz-date header")
		}
		return t.UTC(), t.UTC().Format(amzDateFormat), nil
	}
	return time.Time{}, "", newError(CodeAccessDenied, "AWS authentication requires a valid Date or x-amz-date header")
}

// parseAmzDate is time.Parse(amzDateFormat, s), and the time formatted
// back: s itself when it is already in that form (yyyymmddThhmmssZ, every
// field in range), as clients send it, which takes neither time.Parse nor
// a Format.
func parseAmzDate(s string) (time.Time, string, error) {
	if t, ok := plainAmzDate(s); ok {
		return t, s, nil
	}
	t, err := time.Parse(amzDateFormat, s)
	if err != nil {
		return time.Time{}, "", err
	}
	return t, t.Format(amzDateFormat), nil
}

// plainAmzDate reads s when it is yyyymmddThhmmssZ of digits and a valid
// date and time; ok false for anything else.
func plainAmzDate(s string) (time.Time, bool) {
	if len(s) != len(amzDateFormat) || s[8] != 'T' || s[15] != 'Z' {
		return time.Time{}, false
	}
	num := func(i, j int) int {
		n := 0
		for ; i < j; i++ {
			if s[i] < '0' || s[i] > '9' {
				return -1
			}
			n = n*10 + int(s[i]-'0')
		}
		return n
	}
	year, month, day := num(0, 4), num(4, 6), num(6, 8)
	hour, minute, sec := num(9, 11), num(11, 13), num(13, 15)
	if year < 0 || month < 1 || month > 12 || day < 1 || hour < 0 || hour > 23 || minute < 0 || minute > 59 || sec < 0 || sec > 59 {
		return time.Time{}, false
	}
	t := time.Date(year, time.Month(month), day, hour, minute, sec, 0, time.UTC)
	if t.Day() != day { // past the end of its month
		return time.Time{}, false
	}
	return t, true
}

// credentials checks the credential scope s against the request's time t
// and the verifier's region and service (fail words what is wrong), then
// finds the secret of its access key.
func (v *Verifier) credentials(s scope, t time.Time, fail func(string, ...any) *Error) (Credentials, *Error) {
	var day [len(scopeDateFormat)]byte
	if s.date != string(t.AppendFormat(day[:0], scopeDateFormat)) {
		return Credentials{}, fail("Invalid credential date %q. Date is not the same as X-Amz-Date.", s.date)
	}
	if v.Region != "" && s.region != v.Region {
		return Credentials{}, fail("the region %q is wrong; expecting %q", s.region, v.Region)
	}
	if s.service != v.service() {
		return Credentials{}, fail("the service %q is wrong; expecting %q", s.service, v.service())
	}
	creds, ok := v.Store.Lookup(s.accessKeyID)
	if !ok {
		return Credentials{}, unknownKey()
	}
	return creds, nil
}

// payloadMode classifies an x-amz-content-sha256 value.
func payloadMode(h string) (string, *Error) {
	switch h {
	case PayloadUnsigned, PayloadStreamingSigned, PayloadStreamingSignedTrailer, PayloadStreamingUnsignedTrailer:
		return h, nil
	}
	var b [32]byte
	if decodeSignature(h, &b) {
		return PayloadSHA256, nil
	}
	return "", newError(CodeInvalidArgument,
		"x-amz-content-sha256 must be UNSIGNED-PAYLOAD, STREAMING-UNSIGNED-PAYLOAD-TRAILER, STREAMING-AWS4-HMAC-SHA256-PAYLOAD, STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER, or a valid sha256 value.")
}

// signScratch is the memory one signature check builds in, pooled: the
// CanonicalHeaders block, the canonical request and then the string to
// sign, and the signature.
type signScratch struct {
	headers []byte
	buf     []byte
	sig     [32]byte
}

var signScratches = sync.Pool{New: func() any { return new(signScratch) }}

// checkSignature rebuilds the canonical request and compares signatures in
// constant time. It returns the request's signature (the seed of an
// aws-chunked body).
func (v *Verifier) checkSignature(req *request, creds Credentials) ([32]byte, *Error) {
	r, p := req.r, req.params
	s := signScratches.Get().(*signScratch)
	defer signScratches.Put(s)
	var err *Error
	if s.headers, err = appendCanonicalHeaders(s.headers[:0], r, p, req.presigned); err != nil {
		return [32]byte{}, err
	}
	key := v.keys.get(creds.SecretAccessKey, p.scope.date, p.scope.region, p.scope.service)
	skip := ""
	if req.presigned {
		skip = qSignature
	}
	try := func(uri, query string) bool {
		s.buf = appendCanonicalRequest(s.buf[:0], r.Method, uri, query, s.headers, p.signedHeaders, req.payload)
		crHash := sha256.Sum256(s.buf)
		s.buf = appendStringToSign(s.buf[:0], req.stamp, p.scope, &crHash)
		m := key.mac()
		m.Write(s.buf)
		m.Sum(s.sig[:0])
		key.putMAC(m)
		return hmac.Equal(s.sig[:], p.signature[:])
	}
	// The spec's canonical form first; the alternatives only when it fails.
	if try(canonicalURI(r), canonicalQuery(req.query, r.URL.RawQuery, skip)) {
		return s.sig, nil
	}
	for i, uri := range canonicalURIs(r, true) {
		for j, query := range canonicalQueries(req.query, r.URL.RawQuery, skip, true) {
			if i == 0 && j == 0 {
				continue // tried above
			}
			if try(uri, query) {
				return s.sig, nil
			}
		}
	}
	return [32]byte{}, errSignatureMismatch()
}

// appendCanonicalRequest appends the SigV4 canonical request to b.
func appendCanonicalRequest(b []byte, method, uri, query string, headers []byte, signedHeaders, payload string) []byte {
	b = append(b, method...)
	b = append(b, '\n')
	b = append(b, uri...)
	b = append(b, '\n')
	b = append(b, query...)
	b = append(b, '\n')
	b = append(b, headers...)
	b = append(b, '\n')
	b = append(b, signedHeaders...)
	b = append(b, '\n')
	return append(b, payload...)
}

// appendStringToSign appends the string to sign of a canonical request
// whose SHA-256 is crHash, signed at stamp (amzDateFormat) within scope s.
func appendStringToSign(b []byte, stamp string, s scope, crHash *[32]byte) []byte {
	b = append(b, algorithm+"\n"...)
	b = append(b, stamp...)
	b = append(b, '\n')
	b = s.appendTo(b)
	b = append(b, '\n')
	return hex.AppendEncode(b, crHash[:])
}

// appendCanonicalHeaders appends the CanonicalHeaders block (each line
// name:value\n) for the signed headers to b. It insists that host is
// signed, that every signed header is present, and that every x-amz-*
// header present is signed, so nothing that changes the meaning of an S3
// request can be added in transit.
func appendCanonicalHeaders(b []byte, r *http.Request, p authParams, presigned bool) ([]byte, *Error) {
	hostSigned := false
	for _, name := range p.headerNames {
		lower := name
		if hasUpper(name) { // SignedHeaders are lower case; one that is not is looked up as if it were
			lower = strings.ToLower(name)
		}
		hostSigned = hostSigned || lower == "host"
		val, ok := headerValue(r, lower)
		if !ok {
			return b, newError(CodeAccessDenied, "The signed header %q is not present in the request.", lower)
		}
		b = append(b, name...)
		b = append(b, ':')
		b = append(b, val...)
		b = append(b, '\n')
	}
	if !hostSigned {
		if presigned {
			return b, malformedQuery("X-Amz-SignedHeaders must include host")
		}
		return b, malformedHeader("SignedHeaders must include host")
	}
	var unsigned []string
	for k := range r.Header {
		if !hasPrefixFold(k, "x-amz-") || isSigned(p.headerNames, k) {
			continue
		}
		if presigned && strings.EqualFold(k, "x-amz-content-sha256") {
			continue // not part of a presigned URL's canonical request
		}
		unsigned = append(unsigned, strings.ToLower(k))
	}
	if len(unsigned) > 0 {
		slices.Sort(unsigned)
		return b, newError(CodeAccessDenied, "There were headers present in the request which were not signed: %s",
			strings.Join(unsigned, ", "))
	}
	return b, nil
}

// hasUpper reports whether strings.ToLower could change s.
func hasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' || s[i] >= 0x80 {
			return true
		}
	}
	return false
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

func isSigned(names []string, header string) bool {
	for _, n := range names {
		if strings.EqualFold(n, header) {
			return true
		}
	}
	return false
}
