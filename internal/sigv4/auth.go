package sigv4

import (
	"encoding/hex"
	"strconv"
	"strings"
	"time"
)

// algorithm is the only signing algorithm accepted (SigV4a's
// AWS4-ECDSA-P256-SHA256 and SigV2 are refused).
const algorithm = "AWS4-HMAC-SHA256"

// Formats of X-Amz-Date and of the date in the credential scope.
const (
	amzDateFormat   = "20060102T150405Z"
	scopeDateFormat = "20060102"
)

// Presigned-URL query parameters.
const (
	qAlgorithm     = "X-Amz-Algorithm"
	qCredential    = "X-Amz-Credential"
	qDate          = "X-Amz-Date"
	qExpires       = "X-Amz-Expires"
	qSignedHeaders = "X-Amz-SignedHeaders"
	qSignature     = "X-Amz-Signature"
	qContentSHA256 = "X-Amz-Content-Sha256"
)

// maxPresignExpiry is the longest X-Amz-Expires S3 accepts: seven days.
const maxPresignExpiry = 7 * 24 * time.Hour

// scope is the parsed Credential: AKID/yyyymmdd/region/service/aws4_request.
type scope struct {
	accessKeyID, date, region, service string
}

// String is the credential scope as it appears in the string to sign.
func (s scope) String() string { return string(s.appendTo(nil)) }

// appendTo appends String() to b.
func (s scope) appendTo(b []byte) []byte {
	b = append(b, s.date...)
	b = append(b, '/')
	b = append(b, s.region...)
	b = append(b, '/')
	b = append(b, s.service...)
	return append(b, "/aws4_request"...)
}

// authParams is what an Authorization header or a presigned URL carries.
type authParams struct {
	scope         scope
	signedHeaders string   // as sent, ';'-separated
	headerNames   []string // signedHeaders split
	signature     [32]byte
}

// parseAuthorization parses
//
//	AWS4-HMAC-SHA256 Credential=AKID/20130524/us-east-1/s3/aws4_request, SignedHeaders=host;x-amz-date, Signature=<64 hex>
//
// The three components may come in any order, separated by ',' with
// optional spaces; each must appear exactly once.
func parseAuthorization(h string) (authParams, *Error) {
	var p authParams
	h = strings.TrimSpace(h)
	alg, rest, _ := strings.Cut(h, " ")
	if alg != algorithm {
		if alg == "AWS" || strings.HasPrefix(alg, "AWS4-") {
			return p, errMechanismNotSupported()
		}
		return p, malformedHeader("unsupported authorization type")
	}
	var cred, signed, sig string
	var haveCred, haveSigned, haveSig bool
	for part := range strings.SplitSeq(rest, ",") {
		part = strings.TrimSpace(part)
		k, val, ok := strings.Cut(part, "=")
		if !ok {
			return p, malformedHeader("the authorization header requires Credential, SignedHeaders and Signature, each as name=value")
		}
		var dst *string
		var seen *bool
		switch k {
		case "Credential":
			dst, seen = &cred, &haveCred
		case "SignedHeaders":
			dst, seen = &signed, &haveSigned
		case "Signature":
			dst, seen = &sig, &haveSig
		default:
			return p, malformedHeader("unknown authorization component %q", k)
		}
		if *seen {
			return p, malformedHeader("authorization component %q given twice", k)
		}
		*dst, *seen = val, true
	}
	if !haveCred || !haveSigned || !haveSig {
		return p, malformedHeader("the authorization header requires Credential, SignedHeaders and Signature")
	}
	var err *Error
	if p.scope, err = parseCredential(cred, malformedHeader); err != nil {
		return p, err
	}
	if p.headerNames, err = parseSignedHeaders(signed, malformedHeader); err != nil {
		return p, err
	}
	p.signedHeaders = signed
	if !decodeSignature(sig, &p.signature) {
		return p, malformedHeader("the signature must be 64 hexadecimal characters")
	}
	return p, nil
}

// parsePresigned reads the X-Amz-* query parameters of a presigned URL. It
// returns the parameters, the signing time and the validity period.
func parsePresigned(ps []queryParam) (authParams, time.Time, time.Duration, *Error) {
	var p authParams
	get := func(name string) (string, bool) { return lookup(ps, name) }
	alg, ok1 := get(qAlgorithm)
	cred, ok2 := get(qCredential)
	date, ok3 := get(qDate)
	exp, ok4 := get(qExpires)
	signed, ok5 := get(qSignedHeaders)
	sig, ok6 := get(qSignature)
	if !(ok1 && ok2 && ok3 && ok4 && ok5 && ok6) {
		return p, time.Time{}, 0, malformedQuery("Query-string authentication version 4 requires the X-Amz-Algorithm, X-Amz-Credential, X-Amz-Signature, X-Amz-Date, X-Amz-SignedHeaders, and X-Amz-Expires parameters.")
	}
	if alg != algorithm {
		return p, time.Time{}, 0, malformedQuery("X-Amz-Algorithm only supports \"%s\"", algorithm)
	}
	t, err := time.Parse(amzDateFormat, date)
	if err != nil {
		return p, time.Time{}, 0, malformedQuery("X-Amz-Date must be in the ISO8601 Long Format \"yyyyMMdd'T'HHmmss'Z'\"")
	}
	secs, ok := parseDecimal(exp)
	if !ok {
		return p, time.Time{}, 0, malformedQuery("X-Amz-Expires should be a number")
	}
	if secs <= 0 {
		return p, time.Time{}, 0, malformedQuery("X-Amz-Expires must be non-negative")
	}
	if secs > int64(maxPresignExpiry/time.Second) {
		return p, time.Time{}, 0, malformedQuery("X-Amz-Expires must be less than a week (in seconds) that is 604800")
	}
	var e *Error
	if p.scope, e = parseCredential(cred, malformedQuery); e != nil {
		return p, time.Time{}, 0, e
	}
	if p.headerNames, e = parseSignedHeaders(signed, malformedQuery); e != nil {
		return p, time.Time{}, 0, e
	}
	p.signedHeaders = signed
	if !decodeSignature(sig, &p.signature) {
		return p, time.Time{}, 0, malformedQuery("X-Amz-Signature must be 64 hexadecimal characters")
	}
	return p, t, time.Duration(secs) * time.Second, nil
}

func malformedHeader(format string, args ...any) *Error {
	return newError(CodeAuthorizationHeaderMalformed, "The authorization header is malformed; "+format, args...)
}

func malformedQuery(format string, args ...any) *Error {
	return newError(CodeAuthorizationQueryParametersError, format, args...)
}

// parseCredential parses AKID/yyyymmdd/region/service/aws4_request. The
// access key ID is everything before the last four fields.
func parseCredential(s string, fail func(string, ...any) *Error) (scope, *Error) {
	// The fields from the end, without splitting the whole (an allocation
	// per request).
	var sc scope
	ok := true
	cut := func(rest string) (string, string) {
		i := strings.LastIndexByte(rest, '/')
		if i < 0 {
			ok = false
			return rest, ""
		}
		return rest[:i], rest[i+1:]
	}
	rest, terminator := cut(s)
	rest, sc.service = cut(rest)
	rest, sc.region = cut(rest)
	sc.accessKeyID, sc.date = cut(rest)
	if !ok {
		return scope{}, fail("the Credential %q must have the form <key>/<yyyymmdd>/<region>/<service>/aws4_request", s)
	}
	if terminator != "aws4_request" {
		return scope{}, fail("the Credential terminator must be 'aws4_request', not %q", terminator)
	}
	if sc.accessKeyID == "" || sc.region == "" || sc.service == "" {
		return scope{}, fail("the Credential %q has an empty field", s)
	}
	if _, err := time.Parse(scopeDateFormat, sc.date); err != nil {
		return scope{}, fail("invalid credential date %q", sc.date)
	}
	return sc, nil
}

func parseSignedHeaders(s string, fail func(string, ...any) *Error) ([]string, *Error) {
	if s == "" {
		return nil, fail("SignedHeaders is empty")
	}
	names := strings.Split(s, ";")
	for _, n := range names {
		if n == "" {
			return nil, fail("SignedHeaders %q has an empty name", s)
		}
	}
	return names, nil
}

func decodeSignature(s string, dst *[32]byte) bool {
	if len(s) != 64 {
		return false
	}
	_, err := hex.Decode(dst[:], []byte(s))
	return err == nil
}

// parseDecimal parses a non-empty run of ASCII digits (no sign), up to 12
// digits, which is plenty for the integers SigV4 carries.
func parseDecimal(s string) (int64, bool) {
	if len(s) > 12 {
		return 0, false
	}
	n, err := strconv.ParseUint(s, 10, 64) // digits only: no sign, no underscores
	return int64(n), err == nil
}
