//go:build !linux

package slab

// prefault faults b in page by page.
func prefault(b []byte) { touch(b) }
