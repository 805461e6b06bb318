package client

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
)

// Sentinel errors. Every error the client returns for a node's answer is an
// *Error that wraps one of these (when one applies), so callers test with
// errors.Is and the gateway maps them to S3 error codes.
var (
	// ErrNotFound: the object does not exist (404 NoSuchKey).
	ErrNotFound = errors.New("distcache: object not found")
	// ErrAccessDenied: the tenant may not use the bucket, or S3 refused the
	// tenant's credentials (403).
	ErrAccessDenied = errors.New("distcache: access denied")
	// ErrChanged: the object is no longer the version the Meta describes
	// (412); Stat again and read the new version.
	ErrChanged = errors.New("distcache: object changed")
	// ErrUnavailable: S3 is unavailable and the data is not cached (503), or
	// no cache node could be reached.
	ErrUnavailable = errors.New("distcache: unavailable")
	// ErrInvalidRange: the range is outside the object (416, or a negative
	// offset).
	ErrInvalidRange = errors.New("distcache: invalid range")
)

// Error is a failed operation: the node's answer (status, code and message)
// or, when no node answered, what went wrong reaching them.
type Error struct {
	Op     string // "stat", "get_chunk", "put", "delete", "ring"
	Bucket string
	Key    string
	// Node is the address of the member that answered; empty when none did.
	Node string
	// Status is the HTTP status of the answer; 0 when no node answered.
	Status int
	// Code is the node's error code (X-Distcache-Error), S3's name where one
	// exists: NoSuchKey, AccessDenied, PreconditionFailed, ...
	Code    string
	Message string
	// Kind is the sentinel the error wraps (ErrNotFound, ...), or nil.
	Kind error
	// Err is the underlying cause, such as the transport errors of every
	// member tried.
	Err error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString("distcache: ")
	b.WriteString(e.Op)
	if e.Bucket != "" {
		fmt.Fprintf(&b, " %s/%s", e.Bucket, e.Key)
	}
	if e.Node != "" {
		fmt.Fprintf(&b, " (node %s)", e.Node)
	}
	b.WriteString(": ")
	switch {
	case e.Status != 0:
		fmt.Fprintf(&b, "%d %s", e.Status, e.Code)
		if e.Message != "" {
			b.WriteString(": " + e.Message)
		}
	case e.Message != "":
		b.WriteString(e.Message)
	case e.Kind != nil:
		b.WriteString(e.Kind.Error())
	}
	if e.Err != nil {
		b.WriteString(": " + e.Err.Error())
	}
	return b.String()
}

// Unwrap returns the sentinel and the cause, for errors.Is and errors.As.
func (e *Error) Unwrap() []error {
	var errs []error
	if e.Kind != nil {
		errs = append(errs, e.Kind)
	}
	if e.Err != nil {
		errs = append(errs, e.Err)
	}
	return errs
}

// statusKind maps a node's HTTP status to a sentinel.
func statusKind(status int) error {
	switch status {
	case http.StatusNotFound:
		return ErrNotFound
	case http.StatusForbidden:
		return ErrAccessDenied
	case http.StatusPreconditionFailed:
		return ErrChanged
	case http.StatusRequestedRangeNotSatisfiable:
		return ErrInvalidRange
	case http.StatusServiceUnavailable:
		return ErrUnavailable
	}
	return nil
}

// headerError is the node API's error code header.
const headerError = "X-Distcache-Error"

// codeSlowDown is a node's answer when S3 throttled it and the data is not
// cached (503).
const codeSlowDown = "SlowDown"

// answerError reads a node's error answer (JSON {"code","message"}; HEAD
// answers carry the code in a header only) into an *Error.
func answerError(op, bucket, key, addr string, resp *http.Response) *Error {
	e := &Error{Op: op, Bucket: bucket, Key: key, Node: addr, Status: resp.StatusCode,
		Code: resp.Header.Get(headerError), Kind: statusKind(resp.StatusCode)}
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4<<10))
	var wire struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &wire) == nil && (wire.Code != "" || wire.Message != "") {
		if e.Code == "" {
			e.Code = wire.Code
		}
		e.Message = wire.Message
	} else {
		e.Message = strings.TrimSpace(string(body))
	}
	if e.Message == "" {
		e.Message = http.StatusText(resp.StatusCode)
	}
	return e
}

// checkAnswer notes the ring epoch an answer of addr carries and, unless
// its status is one of ok, reads the answer as the node's *Error.
func (c *Client) checkAnswer(op, bucket, key, addr string, resp *http.Response, ok ...int) error {
	c.observeAnswer(addr, resp.Header)
	if slices.Contains(ok, resp.StatusCode) {
		return nil
	}
	return answerError(op, bucket, key, addr, resp)
}

// outcome classifies one attempt against one member.
type outcome int

const (
	// done: success, or an answer about the request itself (4xx) that
	// every member would give, or S3 throttling (503 SlowDown): other
	// members would only ask the same S3 again.
	done outcome = iota
	// upstream: the node is healthy but its S3 failed (a 5xx carrying a
	// node error code); another candidate may have the data cached.
	upstream
	// nodeFailed: the member is unreachable, timed out, broke off the
	// body or answered a 5xx that is not the node API's: mark it down.
	nodeFailed
)

// classify decides what an answered error means for failover.
func classify(e *Error) outcome {
	switch {
	case e.Status == http.StatusServiceUnavailable && e.Code == codeSlowDown:
		return done
	case e.Status >= 500 && e.Code != "":
		return upstream
	case e.Status >= 500:
		return nodeFailed
	}
	return done
}
