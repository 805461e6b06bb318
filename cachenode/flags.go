package main

import (
	"flag"
	"fmt"
	"os"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
)

// byteSize is a flag holding a byte count written as a Kubernetes quantity
// (4Mi, 800Gi, 1073741824), the notation the operator's CRD uses too.
type byteSize int64

func (b byteSize) String() string {
	return resource.NewQuantity(int64(b), resource.BinarySI).String()
}

func (b *byteSize) Set(s string) error {
	q, err := resource.ParseQuantity(s)
	if err != nil {
		return fmt.Errorf("%q is not a byte size such as 4Mi or 100Gi", s)
	}
	v, ok := q.AsInt64()
	if !ok || v < 0 {
		return fmt.Errorf("%q is not a non-negative whole number of bytes", s)
	}
	*b = byteSize(v)
	return nil
}

// givenByteSize is a byteSize that remembers whether it was given (on the
// command line or in the environment), for defaults that yield where they
// do not fit and values given that must.
type givenByteSize struct {
	byteSize
	given bool
}

func (b *givenByteSize) Set(s string) error {
	b.given = true
	return b.byteSize.Set(s)
}

// applyEnv sets each flag from PREFIX+NAME (upper case, '-' as '_') when that
// variable is set; command-line flags parsed afterwards win.
func applyEnv(fs *flag.FlagSet, prefix string) error {
	var err error
	fs.VisitAll(func(f *flag.Flag) {
		name := prefix + strings.ToUpper(strings.ReplaceAll(f.Name, "-", "_"))
		if v, ok := os.LookupEnv(name); ok && err == nil {
			if serr := f.Value.Set(v); serr != nil {
				err = fmt.Errorf("%s: %w", name, serr)
			}
		}
	})
	return err
}

// parseFlags applies DISTCACHE_* environment variables, then the command
// line, then checks that the required flags (name -> value) are set.
func parseFlags(fs *flag.FlagSet, args []string, required func() map[string]string) error {
	if err := applyEnv(fs, "DISTCACHE_"); err != nil {
		return err
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	for name, v := range required() {
		if v == "" {
			return fmt.Errorf("--%s is required", name)
		}
	}
	return nil
}
