package sigv4

import (
	"fmt"
	"net/http"
)

// S3 error codes returned in Error.Code. The gateway answers with
// <Error><Code>Code</Code><Message>Message</Message></Error> and Status.
const (
	CodeAccessDenied                      = "AccessDenied"
	CodeInvalidAccessKeyID                = "InvalidAccessKeyId"
	CodeSignatureDoesNotMatch             = "SignatureDoesNotMatch"
	CodeRequestTimeTooSkewed              = "RequestTimeTooSkewed"
	CodeAuthorizationHeaderMalformed      = "AuthorizationHeaderMalformed"
	CodeAuthorizationQueryParametersError = "AuthorizationQueryParametersError"
	CodeMissingSecurityHeader             = "MissingSecurityHeader"
	CodeXAmzContentSHA256Mismatch         = "XAmzContentSHA256Mismatch"
	CodeInvalidRequest                    = "InvalidRequest"
	CodeInvalidArgument                   = "InvalidArgument"
	CodeIncompleteBody                    = "IncompleteBody"
	CodeBadDigest                         = "BadDigest"
	CodeInvalidDigest                     = "InvalidDigest"
)

// Error is an authentication or payload-integrity failure, carrying the S3
// error code and HTTP status the gateway should answer with. Verify returns
// it, and so do reads of the body Verify installs (use errors.As).
type Error struct {
	Code    string // S3 error code, one of the Code* constants
	Message string // human-readable, safe to send to the client
	Status  int    // HTTP status code
}

func (e *Error) Error() string { return "sigv4: " + e.Code + ": " + e.Message }

// statusOf maps each code to the status S3 answers it with.
func statusOf(code string) int {
	switch code {
	case CodeAccessDenied, CodeInvalidAccessKeyID, CodeSignatureDoesNotMatch, CodeRequestTimeTooSkewed:
		return http.StatusForbidden
	default:
		return http.StatusBadRequest
	}
}

func newError(code, format string, args ...any) *Error {
	msg := format
	if len(args) > 0 {
		msg = fmt.Sprintf(format, args...)
	}
	return &Error{Code: code, Message: msg, Status: statusOf(code)}
}

func errSignatureMismatch() *Error {
	return newError(CodeSignatureDoesNotMatch,
		"The request signature we calculated does not match the signature you provided. Check your key and signing method.")
}
