// Command ocilayout does the two things around ko (hack/ko-images.sh) that
// ko does not do itself, on OCI image layouts, without a registry:
//
//	ocilayout base -layout DIR [-name distcache.local/static] [-ca-bundle FILE] [-platforms linux/amd64,linux/arm64]
//	ocilayout name -layout DIR -ref REGISTRY/REPO:TAG
//
// base writes the base image ko builds on: the files of
// gcr.io/distroless/static:nonroot that a static Go binary can use (the user
// database with nonroot = 65532, /home/nonroot, /tmp, the name-service
// order and, with -ca-bundle, the CA certificates), user 65532:65532, as an
// index of one image per platform. There is no registry to pull the real
// distroless from. It prints NAME@DIGEST of the index. ko finds a base given
// by digest in the OCI layout of its cache, $KOCACHE/img, before it asks a
// registry (github.com/google/ko pkg/commands/cache.go), so DIR is that
// layout: the index and each platform's image are listed in its index.json,
// as ko's cache lists what it pulled. The build is reproducible: equal
// inputs give the same digest.
//
// name gives the one image (or index) of a layout that `ko build
// --oci-layout-path` wrote a name, in index.json, as BuildKit's OCI exporter
// does (io.containerd.image.name = the full reference,
// org.opencontainers.image.ref.name = the tag), so that `ctr images import`,
// `docker load`, `podman load` and `skopeo copy oci-archive:` know what to
// call it once the layout is tarred up. It prints the digest of what it
// named.
package main

import (
	"archive/tar"
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/match"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const usage = `usage:
  ocilayout base -layout DIR [-name distcache.local/static] [-ca-bundle FILE] [-platforms linux/amd64,linux/arm64]
  ocilayout name -layout DIR -ref REGISTRY/REPO:TAG`

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	var err error
	switch os.Args[1] {
	case "base":
		err = runBase(os.Args[2:])
	case "name":
		err = runName(os.Args[2:])
	default:
		fmt.Fprintln(os.Stderr, usage)
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "ocilayout:", err)
		os.Exit(1)
	}
}

func runBase(args []string) error {
	fs := flag.NewFlagSet("base", flag.ExitOnError)
	dir := fs.String("layout", "", "OCI layout to add the base to, created if missing (ko's $KOCACHE/img)")
	baseName := fs.String("name", "distcache.local/static", "repository the digest is printed with")
	caBundle := fs.String("ca-bundle", "", "PEM file installed as /etc/ssl/certs/ca-certificates.crt")
	platforms := fs.String("platforms", "linux/amd64,linux/arm64", "platforms of the index")
	_ = fs.Parse(args)
	if *dir == "" {
		return errors.New("base: -layout is required")
	}
	repo, err := name.NewRepository(*baseName)
	if err != nil {
		return fmt.Errorf("base: -name: %w", err)
	}
	var ca []byte
	if *caBundle != "" {
		if ca, err = os.ReadFile(*caBundle); err != nil {
			return fmt.Errorf("base: -ca-bundle: %w", err)
		}
	}
	var plats []v1.Platform
	for _, s := range strings.Split(*platforms, ",") {
		p, err := v1.ParsePlatform(s)
		if err != nil {
			return fmt.Errorf("base: -platforms: %w", err)
		}
		plats = append(plats, *p)
	}

	idx, imgs, err := baseIndex(ca, plats)
	if err != nil {
		return err
	}
	p, err := openLayout(*dir)
	if err != nil {
		return err
	}
	digest, err := idx.Digest()
	if err != nil {
		return err
	}
	// Replace, not append: a second run with the same inputs leaves
	// index.json as it was.
	if err := p.ReplaceIndex(idx, match.Digests(digest)); err != nil {
		return err
	}
	for _, img := range imgs {
		d, err := img.Digest()
		if err != nil {
			return err
		}
		if err := p.ReplaceImage(img, match.Digests(d)); err != nil {
			return err
		}
	}
	fmt.Println(repo.Digest(digest.String()).String())
	return nil
}

// baseIndex builds one image per platform on the same single layer.
func baseIndex(ca []byte, plats []v1.Platform) (v1.ImageIndex, []v1.Image, error) {
	layerTar, err := baseLayer(ca)
	if err != nil {
		return nil, nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, nil, err
	}
	var idx v1.ImageIndex = mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	var imgs []v1.Image
	for _, plat := range plats {
		img, err := mutate.AppendLayers(mutate.MediaType(empty.Image, types.OCIManifestSchema1), layer)
		if err != nil {
			return nil, nil, err
		}
		img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, nil, err
		}
		cf = cf.DeepCopy()
		cf.OS, cf.Architecture, cf.Variant = plat.OS, plat.Architecture, plat.Variant
		cf.Config.User = "65532:65532"
		cf.Config.WorkingDir = "/home/nonroot"
		// distroless's PATH and SSL_CERT_FILE.
		cf.Config.Env = []string{
			"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
			"SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt",
		}
		if img, err = mutate.ConfigFile(img, cf); err != nil {
			return nil, nil, err
		}
		p := plat
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: &p}})
		imgs = append(imgs, img)
	}
	return idx, imgs, nil
}

// baseLayer is the tar of the base's files, with fixed times and owners so
// that equal inputs give equal digests.
func baseLayer(ca []byte) ([]byte, error) {
	const nonroot = 65532
	type entry struct {
		name     string
		dir      bool
		mode     int64
		uid, gid int
		data     string
	}
	entries := []entry{
		{name: "etc", dir: true, mode: 0o755},
		{name: "etc/passwd", mode: 0o644, data: "root:x:0:0:root:/root:/sbin/nologin\n" +
			"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
			"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"},
		{name: "etc/group", mode: 0o644, data: "root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n"},
		{name: "etc/nsswitch.conf", mode: 0o644, data: "hosts: files dns\n"},
		{name: "home", dir: true, mode: 0o755},
		{name: "home/nonroot", dir: true, mode: 0o700, uid: nonroot, gid: nonroot},
		{name: "root", dir: true, mode: 0o700},
		{name: "tmp", dir: true, mode: 0o1777},
	}
	if len(ca) > 0 {
		entries = append(entries,
			entry{name: "etc/ssl", dir: true, mode: 0o755},
			entry{name: "etc/ssl/certs", dir: true, mode: 0o755},
			entry{name: "etc/ssl/certs/ca-certificates.crt", mode: 0o644, data: string(ca)})
	}
	sort.Slice(entries, func(i, j int) bool { return entries[i].name < entries[j].name })

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.gid,
			ModTime: time.Unix(0, 0).UTC(), Format: tar.FormatPAX, Typeflag: tar.TypeReg, Size: int64(len(e.data))}
		if e.dir {
			hdr.Typeflag, hdr.Name, hdr.Size = tar.TypeDir, e.name+"/", 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return nil, err
		}
		if _, err := io.WriteString(tw, e.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

func runName(args []string) error {
	fs := flag.NewFlagSet("name", flag.ExitOnError)
	dir := fs.String("layout", "", "OCI layout with exactly one image or index (what ko build --oci-layout-path wrote for one image)")
	ref := fs.String("ref", "", "the name to give it, REGISTRY/REPO:TAG")
	_ = fs.Parse(args)
	if *dir == "" || *ref == "" {
		return errors.New("name: -layout and -ref are required")
	}
	tag, err := name.NewTag(*ref, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("name: -ref: %w", err)
	}
	p, err := layout.FromPath(*dir)
	if err != nil {
		return err
	}
	ii, err := p.ImageIndex()
	if err != nil {
		return err
	}
	im, err := ii.IndexManifest()
	if err != nil {
		return err
	}
	if len(im.Manifests) != 1 {
		return fmt.Errorf("name: %s lists %d manifests, want exactly one", *dir, len(im.Manifests))
	}
	im.Manifests[0].Annotations = map[string]string{
		"io.containerd.image.name":          tag.String(),
		"org.opencontainers.image.ref.name": tag.TagStr(),
	}
	b, err := json.MarshalIndent(im, "", "  ")
	if err != nil {
		return err
	}
	if err := p.WriteFile("index.json", b, 0o644); err != nil {
		return err
	}
	fmt.Println(im.Manifests[0].Digest.String())
	return nil
}

// openLayout opens the layout at dir, or creates an empty one.
func openLayout(dir string) (layout.Path, error) {
	if p, err := layout.FromPath(dir); err == nil {
		return p, nil
	}
	return layout.Write(dir, mutate.IndexMediaType(empty.Index, types.OCIImageIndex))
}
