package gateway

import (
	"encoding/xml"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/distcache/distcache/internal/sigv4"
)

// S3 error codes the gateway itself answers with. Errors of S3 behind the
// pass-through reach the client unchanged; sigv4 errors keep their codes.
const (
	CodeAccessDenied          = "AccessDenied"
	CodeBadDigest             = "BadDigest"
	CodeIncompleteBody        = "IncompleteBody"
	CodeInternalError         = "InternalError"
	CodeInvalidArgument       = "InvalidArgument"
	CodeInvalidBucketName     = "InvalidBucketName"
	CodeInvalidRange          = "InvalidRange"
	CodeInvalidRequest        = "InvalidRequest"
	CodeKeyTooLong            = "KeyTooLongError"
	CodeMethodNotAllowed      = "MethodNotAllowed"
	CodeMissingContentLength  = "MissingContentLength"
	CodeNoSuchBucket          = "NoSuchBucket"
	CodeNoSuchKey             = "NoSuchKey"
	CodeNotImplemented        = "NotImplemented"
	CodePreconditionFailed    = "PreconditionFailed"
	CodeServiceUnavailable    = "ServiceUnavailable"
	CodeSlowDown              = "SlowDown"
	CodeRequestTimeout        = "RequestTimeout"
	CodeEntityTooLarge        = "EntityTooLarge"
	CodeSignatureDoesNotMatch = sigv4.CodeSignatureDoesNotMatch
)

// s3Error is an error answered as S3 XML. Extra holds additional elements
// S3 puts in some errors (Condition, RangeRequested, ActualObjectSize).
type s3Error struct {
	Status  int
	Code    string
	Message string
	Extra   []xmlField
}

type xmlField struct {
	XMLName xml.Name
	Value   string `xml:",chardata"`
}

func (e *s3Error) Error() string { return e.Code + ": " + e.Message }

func newS3Error(status int, code, format string, args ...any) *s3Error {
	msg := format
	if len(args) > 0 {
		msg = fmt.Sprintf(format, args...)
	}
	return &s3Error{Status: status, Code: code, Message: msg}
}

func (e *s3Error) with(name, value string) *s3Error {
	c := *e
	c.Extra = append(append([]xmlField(nil), e.Extra...), xmlField{XMLName: xml.Name{Local: name}, Value: value})
	return &c
}

func errNoSuchKey() *s3Error {
	return newS3Error(http.StatusNotFound, CodeNoSuchKey, "The specified key does not exist.")
}

func errNoSuchBucket() *s3Error {
	return newS3Error(http.StatusNotFound, CodeNoSuchBucket, "The specified bucket does not exist")
}

func errAccessDenied(msg string) *s3Error {
	if msg == "" {
		msg = "Access Denied"
	}
	return newS3Error(http.StatusForbidden, CodeAccessDenied, "%s", msg)
}

func errInvalidRange(header string, size int64) *s3Error {
	return newS3Error(http.StatusRequestedRangeNotSatisfiable, CodeInvalidRange, "The requested range is not satisfiable").
		with("RangeRequested", header).with("ActualObjectSize", strconv.FormatInt(size, 10))
}

func errPreconditionFailed(condition string) *s3Error {
	return newS3Error(http.StatusPreconditionFailed, CodePreconditionFailed,
		"At least one of the pre-conditions you specified did not hold").with("Condition", condition)
}

func errUnavailable(msg string) *s3Error {
	return newS3Error(http.StatusServiceUnavailable, CodeServiceUnavailable,
		"The distcache gateway cannot reach the cache: %s. Please retry.", msg)
}

func errNotImplemented(what string) *s3Error {
	return newS3Error(http.StatusNotImplemented, CodeNotImplemented,
		"%s is not supported by the distcache gateway.", what)
}

func errInternal(err error) *s3Error {
	return newS3Error(http.StatusInternalServerError, CodeInternalError,
		"We encountered an internal error. Please try again. (%v)", err)
}

// fromBodyError converts an authentication or body-integrity error; other read
// errors of a request body are the client's (IncompleteBody).
func fromBodyError(err error) *s3Error {
	var se *sigv4.Error
	if errors.As(err, &se) {
		return &s3Error{Status: se.Status, Code: se.Code, Message: se.Message}
	}
	var ge *s3Error
	if errors.As(err, &ge) {
		return ge
	}
	return newS3Error(http.StatusBadRequest, CodeIncompleteBody,
		"The request body could not be read completely: %v", err)
}

// errorBody is the XML document S3 answers errors with.
type errorBody struct {
	XMLName    xml.Name `xml:"Error"`
	Code       string
	Message    string
	BucketName string `xml:",omitempty"`
	Key        string `xml:",omitempty"`
	Extra      []xmlField
	Resource   string
	RequestID  string `xml:"RequestId"`
	HostID     string `xml:"HostId"`
}

// writeError answers e as S3 does: XML with the code, message, resource and
// request ID; headers only for HEAD requests.
func writeError(w http.ResponseWriter, r *http.Request, rt route, requestID string, e *s3Error) {
	h := w.Header()
	// Headers of a response that was being prepared do not describe an error.
	for _, k := range []string{"ETag", "Last-Modified", "Content-Range", "Accept-Ranges", "Content-Disposition",
		"Content-Encoding", "Cache-Control", "Expires", "Content-Language"} {
		h.Del(k)
	}
	if e.Status == http.StatusRequestedRangeNotSatisfiable {
		for _, f := range e.Extra {
			if f.XMLName.Local == "ActualObjectSize" {
				h.Set("Content-Range", "bytes */"+f.Value)
			}
		}
	}
	if r.Method == http.MethodHead {
		h.Del("Content-Type")
		h.Set("Content-Length", "0")
		w.WriteHeader(e.Status)
		return
	}
	body := errorBody{
		Code: e.Code, Message: e.Message, BucketName: rt.bucket, Key: rt.key, Extra: e.Extra,
		Resource: r.URL.Path, RequestID: requestID, HostID: requestID,
	}
	out, err := xml.Marshal(body)
	if err != nil { // cannot happen with these types
		out = []byte("<Error><Code>InternalError</Code></Error>")
	}
	out = append([]byte(xml.Header), out...)
	h.Set("Content-Type", "application/xml")
	h.Set("Content-Length", strconv.Itoa(len(out)))
	w.WriteHeader(e.Status)
	_, _ = w.Write(out)
}
