// Command imagebuild writes a container image as a tarball (the `docker save`
// layout that `ctr images import` and `docker load` read) from files on disk,
// without a container engine or a registry. The local test cluster
// (hack/cluster.sh, hack/cluster-images.sh) builds its images with it from
// static Go binaries.
//
//	imagebuild -o bin/images/operator.tar -tag distcache.local/operator:dev \
//	    -base nonroot -user 65532:65532 -entrypoint /manager \
//	    -add bin/images/manager=/manager
//
// The image has one layer: the files given with -add and, with -base nonroot,
// the few files distroless/static:nonroot (the Dockerfile's base) provides
// that a static Go program can need: /etc/passwd and /etc/group with root,
// nobody and nonroot (65532), /etc/nsswitch.conf, /home/nonroot, /tmp and,
// with -ca-bundle, /etc/ssl/certs/ca-certificates.crt.
//
// Builds are reproducible (fixed file times, no creation time), and a build
// whose inputs (flags and file contents) match the previous one is skipped:
// OUT.inputs records their hash.
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// listFlag collects a repeated flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

type options struct {
	out        string
	tag        string
	base       string
	caBundle   string
	user       string
	workdir    string
	entrypoint listFlag
	cmd        listFlag
	env        listFlag
	add        listFlag
}

// file is one regular file or directory of the layer.
type file struct {
	name     string // inside the image, without leading slash
	dir      bool
	mode     int64
	uid, gid int
	data     []byte
}

// epoch is every file's modification time, so that equal inputs give equal
// layer digests.
var epoch = time.Unix(0, 0).UTC()

func main() {
	var o options
	flag.StringVar(&o.out, "o", "", "image tarball to write (required)")
	flag.StringVar(&o.tag, "tag", "", "image reference recorded in the tarball, e.g. distcache.local/operator:dev (required)")
	flag.StringVar(&o.base, "base", "none", "none, or nonroot: the files of distroless/static:nonroot a static program can need")
	flag.StringVar(&o.caBundle, "ca-bundle", "", "PEM file installed as /etc/ssl/certs/ca-certificates.crt")
	flag.StringVar(&o.user, "user", "", "user the image runs as, e.g. 65532:65532")
	flag.StringVar(&o.workdir, "workdir", "/", "working directory")
	flag.Var(&o.entrypoint, "entrypoint", "entrypoint word (repeat for more)")
	flag.Var(&o.cmd, "cmd", "default argument (repeat for more)")
	flag.Var(&o.env, "env", "environment variable NAME=VALUE (repeat for more)")
	flag.Var(&o.add, "add", "SRC=DST: put file SRC at absolute path DST, keeping its permission bits (repeat for more)")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "imagebuild:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	if o.out == "" || o.tag == "" {
		return errors.New("-o and -tag are required")
	}
	if len(o.entrypoint) == 0 {
		return errors.New("-entrypoint is required")
	}
	if o.user != "" {
		if err := checkUser(o.user); err != nil {
			return err
		}
	}
	tag, err := name.NewTag(o.tag, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("-tag: %w", err)
	}
	files, err := layerFiles(o)
	if err != nil {
		return err
	}

	key := inputsKey(o, files)
	if prev, err := os.ReadFile(o.out + ".inputs"); err == nil && string(prev) == key {
		if _, err := os.Stat(o.out); err == nil {
			fmt.Fprintf(os.Stderr, "imagebuild: %s unchanged (%s)\n", o.tag, o.out)
			return nil
		}
	}

	img, err := buildImage(o, files)
	if err != nil {
		return err
	}
	// Write next to the target and rename, so a reader never sees half a file
	// and an interrupted build leaves the previous image in place.
	tmp := o.out + ".tmp"
	if err := tarball.WriteToFile(tmp, tag, img); err != nil {
		_ = os.Remove(tmp)
		return fmt.Errorf("write %s: %w", o.out, err)
	}
	if err := os.Rename(tmp, o.out); err != nil {
		return err
	}
	if err := os.WriteFile(o.out+".inputs", []byte(key), 0o644); err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "imagebuild: %s %s (%s)\n", o.tag, digest, o.out)
	return nil
}

// layerFiles lists the layer's content: the base files, then the added ones,
// with every parent directory, sorted by name.
func layerFiles(o options) ([]file, error) {
	byName := map[string]file{}
	put := func(f file) { byName[f.name] = f }

	switch o.base {
	case "none":
	case "nonroot":
		for _, f := range nonrootBase() {
			put(f)
		}
		if o.caBundle != "" {
			data, err := os.ReadFile(o.caBundle)
			if err != nil {
				return nil, fmt.Errorf("-ca-bundle: %w", err)
			}
			put(file{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: data})
		}
	default:
		return nil, fmt.Errorf("-base: unknown base %q (none or nonroot)", o.base)
	}

	for _, a := range o.add {
		src, dst, ok := strings.Cut(a, "=")
		if !ok || src == "" || !path.IsAbs(dst) || path.Clean(dst) == "/" {
			return nil, fmt.Errorf("-add %q: want SRC=/absolute/destination", a)
		}
		info, err := os.Stat(src)
		if err != nil {
			return nil, fmt.Errorf("-add: %w", err)
		}
		if !info.Mode().IsRegular() {
			return nil, fmt.Errorf("-add: %s is not a regular file", src)
		}
		data, err := os.ReadFile(src)
		if err != nil {
			return nil, fmt.Errorf("-add: %w", err)
		}
		put(file{name: strings.TrimPrefix(path.Clean(dst), "/"), mode: int64(info.Mode().Perm()), data: data})
	}

	// Parent directories, unless given (like /tmp or /home/nonroot).
	for n := range byName {
		for d := path.Dir(n); d != "."; d = path.Dir(d) {
			if _, ok := byName[d]; !ok {
				byName[d] = file{name: d, dir: true, mode: 0o755}
			}
		}
	}
	files := make([]file, 0, len(byName))
	for _, f := range byName {
		files = append(files, f)
	}
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })
	return files, nil
}

// nonrootBase is the part of gcr.io/distroless/static:nonroot a static Go
// binary can rely on: the user database (nonroot is 65532), its home, /tmp
// and the name-service order.
func nonrootBase() []file {
	const nonroot = 65532
	return []file{
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\n" +
			"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
			"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n")},
		{name: "etc/nsswitch.conf", mode: 0o644, data: []byte("hosts: files dns\n")},
		{name: "home/nonroot", dir: true, mode: 0o700, uid: nonroot, gid: nonroot},
		{name: "root", dir: true, mode: 0o700},
		{name: "tmp", dir: true, mode: 0o1777},
	}
}

// inputsKey hashes everything the image is made of.
func inputsKey(o options, files []file) string {
	h := sha256.New()
	fmt.Fprintf(h, "tag=%s\nuser=%s\nworkdir=%s\narch=%s\n", o.tag, o.user, o.workdir, runtime.GOARCH)
	fmt.Fprintf(h, "entrypoint=%q\ncmd=%q\nenv=%q\n", []string(o.entrypoint), []string(o.cmd), []string(o.env))
	for _, f := range files {
		fmt.Fprintf(h, "%s %t %o %d %d %d\n", f.name, f.dir, f.mode, f.uid, f.gid, len(f.data))
		h.Write(f.data)
	}
	return hex.EncodeToString(h.Sum(nil)) + "\n"
}

func buildImage(o options, files []file) (v1.Image, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		hdr := &tar.Header{
			Name:    f.name,
			Mode:    f.mode,
			Uid:     f.uid,
			Gid:     f.gid,
			ModTime: epoch,
			Format:  tar.FormatPAX,
		}
		if f.dir {
			hdr.Typeflag = tar.TypeDir
			hdr.Name += "/"
		} else {
			hdr.Typeflag = tar.TypeReg
			hdr.Size = int64(len(f.data))
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	layerBytes := buf.Bytes()
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerBytes)), nil
	}, tarball.WithCompressionLevel(gzip.BestSpeed))
	if err != nil {
		return nil, err
	}
	img, err := mutate.AppendLayers(empty.Image, layer)
	if err != nil {
		return nil, err
	}

	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.OS = "linux"
	cf.Architecture = runtime.GOARCH
	cf.Config.Entrypoint = o.entrypoint
	cf.Config.Cmd = o.cmd
	cf.Config.User = o.user
	cf.Config.WorkingDir = o.workdir
	// distroless's PATH.
	cf.Config.Env = append([]string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"}, o.env...)
	return mutate.ConfigFile(img, cf)
}

// checkUser accepts a numeric UID[:GID] only: Kubernetes' runAsNonRoot can
// verify numeric users only, and names would need /etc/passwd entries.
func checkUser(u string) error {
	uid, gid, hasGID := strings.Cut(u, ":")
	if _, err := strconv.Atoi(uid); err != nil {
		return fmt.Errorf("-user %q: want numeric UID[:GID]", u)
	}
	if _, err := strconv.Atoi(gid); hasGID && err != nil {
		return fmt.Errorf("-user %q: want numeric UID[:GID]", u)
	}
	return nil
}
