package node

import (
	"encoding/json"
	"errors"
	"net/http"

	"github.com/aws/smithy-go"

	"github.com/distcache/distcache/internal/s3backend"
)

// Error codes in node API error bodies. They follow S3's names where one
// exists so the gateway can pass them through.
const (
	CodeBadRequest         = "BadRequest"
	CodeAccessDenied       = "AccessDenied"
	CodeNoSuchKey          = "NoSuchKey"
	CodeInvalidRange       = "InvalidRange"
	CodePreconditionFailed = "PreconditionFailed"
	CodeServiceUnavailable = "ServiceUnavailable"
	CodeSlowDown           = "SlowDown"
	CodeBadGateway         = "BadGateway"
	CodeInternal           = "InternalError"
	// CodeXAmzContentSHA256Mismatch: a body that is not the one whose
	// SHA-256 the writer declared (nodeapi.HeaderContentSHA256).
	CodeXAmzContentSHA256Mismatch = "XAmzContentSHA256Mismatch"
	// CodeBadDigest: a body that does not have the x-amz-checksum-* value
	// declared for it.
	CodeBadDigest = "BadDigest"
)

// apiError is an error with the HTTP status and code a client should see.
type apiError struct {
	Status  int    `json:"-"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

func newError(status int, code, msg string) *apiError {
	return &apiError{Status: status, Code: code, Message: msg}
}

// asAPIError maps backend and internal errors to what the client sees. S3
// being unreachable is a 503 with a message saying so, never a hang or a 500.
func asAPIError(err error) *apiError {
	var ae *apiError
	var pe *peerError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.As(err, &pe) && pe.status >= 400 && pe.status < 500:
		// The metadata owner refused the request itself: the same answer
		// it gives when asked directly, not a failure of this node.
		code := pe.code
		if code == "" {
			code = CodeBadRequest
		}
		return newError(pe.status, code, "the object's metadata owner refused the request: "+pe.Error())
	case errors.Is(err, s3backend.ErrPayloadSHA256Mismatch):
		return newError(http.StatusBadRequest, CodeXAmzContentSHA256Mismatch,
			"The provided 'x-amz-content-sha256' header does not match what was computed.")
	case errors.Is(err, s3backend.ErrChecksumMismatch):
		return newError(http.StatusBadRequest, CodeBadDigest, "The checksum you specified did not match the calculated checksum.")
	case errors.Is(err, s3backend.ErrNotFound):
		return newError(http.StatusNotFound, CodeNoSuchKey, "object not found in S3")
	case errors.Is(err, s3backend.ErrAccessDenied):
		return newError(http.StatusForbidden, CodeAccessDenied, "S3 denied access with this tenant's backend credentials")
	case errors.Is(err, s3backend.ErrPreconditionFailed):
		return newError(http.StatusPreconditionFailed, CodePreconditionFailed, "object changed in S3 (ETag no longer matches)")
	case errors.Is(err, s3backend.ErrInvalidRange):
		return newError(http.StatusRequestedRangeNotSatisfiable, CodeInvalidRange, "range not satisfiable")
	case errors.Is(err, s3backend.ErrUnavailable) && s3backend.Throttled(err):
		// Not ServiceUnavailable: peers and clients must not ask S3 again
		// elsewhere, and S3 clients should slow down.
		return newError(http.StatusServiceUnavailable, CodeSlowDown, "S3 is throttling requests (SlowDown) and the data is not cached: "+err.Error())
	case errors.Is(err, s3backend.ErrUnavailable):
		return newError(http.StatusServiceUnavailable, CodeServiceUnavailable, "S3 backend unavailable and the data is not cached: "+err.Error())
	}
	// Other refusals of the request by S3 keep their status and code, so
	// clients see what S3 said rather than a gateway failure.
	var re interface{ HTTPStatusCode() int }
	if errors.As(err, &re) && re.HTTPStatusCode() >= 400 && re.HTTPStatusCode() < 500 {
		code := "InvalidRequest"
		var ae smithy.APIError
		if errors.As(err, &ae) && ae.ErrorCode() != "" {
			code = ae.ErrorCode()
		}
		return newError(re.HTTPStatusCode(), code, "S3 refused the request: "+err.Error())
	}
	return newError(http.StatusBadGateway, CodeBadGateway, "S3 request failed: "+err.Error())
}

func writeError(w http.ResponseWriter, e *apiError) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("X-Distcache-Error", e.Code)
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(e)
}

// writerBodyMismatch reports whether err is a held body's failure of a
// check of what its writer declared (handlePut): the writer's error.
func writerBodyMismatch(err error) bool {
	return errors.Is(err, s3backend.ErrPayloadSHA256Mismatch) || errors.Is(err, s3backend.ErrChecksumMismatch)
}
