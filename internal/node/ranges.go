package node

import (
	"net/http"
	"strconv"
	"strings"
)

// byteRange is a resolved, satisfiable [Off, Off+Len) range.
type byteRange struct {
	Off, Len int64
}

// parseRange resolves a single "bytes=" Range header against a length.
// It returns ok=false when there is no Range header. Syntax errors are 400;
// ranges outside the content are 416, like S3.
func parseRange(header string, size int64) (r byteRange, ok bool, err *apiError) {
	if header == "" {
		return byteRange{}, false, nil
	}
	spec, found := strings.CutPrefix(header, "bytes=")
	if !found || strings.Contains(spec, ",") {
		return byteRange{}, false, newError(http.StatusBadRequest, CodeBadRequest,
			"Range must be a single bytes=first-last, bytes=first- or bytes=-suffix range")
	}
	first, last, found := strings.Cut(spec, "-")
	if !found {
		return byteRange{}, false, newError(http.StatusBadRequest, CodeBadRequest, "Range "+header+" has no '-'")
	}
	// Built only when needed: this runs for every ranged read.
	unsatisfiable := func() *apiError {
		return newError(http.StatusRequestedRangeNotSatisfiable, CodeInvalidRange,
			"Range "+header+" is outside the "+strconv.FormatInt(size, 10)+"-byte content")
	}
	if first == "" { // suffix: the last N bytes
		n, perr := strconv.ParseInt(last, 10, 64)
		if perr != nil || n < 0 {
			return byteRange{}, false, newError(http.StatusBadRequest, CodeBadRequest, "bad suffix length in Range "+header)
		}
		if n == 0 || size == 0 {
			return byteRange{}, false, unsatisfiable()
		}
		n = min(n, size)
		return byteRange{Off: size - n, Len: n}, true, nil
	}
	start, perr := strconv.ParseInt(first, 10, 64)
	if perr != nil || start < 0 {
		return byteRange{}, false, newError(http.StatusBadRequest, CodeBadRequest, "bad first byte in Range "+header)
	}
	end := size - 1
	if last != "" {
		end, perr = strconv.ParseInt(last, 10, 64)
		if perr != nil || end < start {
			return byteRange{}, false, newError(http.StatusBadRequest, CodeBadRequest, "bad last byte in Range "+header)
		}
		end = min(end, size-1)
	}
	if start >= size {
		return byteRange{}, false, unsatisfiable()
	}
	return byteRange{Off: start, Len: end - start + 1}, true, nil
}

func contentRange(r byteRange, size int64) string {
	var buf [6 + 3*20 + 2]byte // one allocation: the string
	b := append(buf[:0], "bytes "...)
	b = strconv.AppendInt(b, r.Off, 10)
	b = append(b, '-')
	b = strconv.AppendInt(b, r.Off+r.Len-1, 10)
	b = append(b, '/')
	b = strconv.AppendInt(b, size, 10)
	return string(b)
}
