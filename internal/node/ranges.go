package node

import (
	"net/http"

	"github.com/distcache/distcache/internal/httprange"
)

// parseRange resolves a single "bytes=" Range header against a length as
// the node API reads it (httprange.Parse, not lenient): ok=false when there
// is no Range header; a header it cannot read is 400, a range outside the
// content 416, like S3.
func parseRange(header string, size int64) (r httprange.Range, ok bool, err *apiError) {
	r, ok, rerr := httprange.Parse(header, size, false)
	switch {
	case rerr == nil:
		return r, ok, nil
	case rerr.Reason == httprange.Unsatisfiable:
		return r, false, newError(http.StatusRequestedRangeNotSatisfiable, CodeInvalidRange, rerr.Error())
	}
	return r, false, newError(http.StatusBadRequest, CodeBadRequest, rerr.Error())
}
