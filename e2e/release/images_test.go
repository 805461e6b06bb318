package release_test

import (
	"archive/tar"
	"bufio"
	"errors"
	"io"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
)

var _ = Describe("the release images", func() {
	It("are pushed to KO_DOCKER_REPO as archived, with SBOMs, non-root, stamped with the version", func(ctx SpecContext) {
		// An OCI registry on loopback, in this process.
		reg := httptest.NewServer(registry.New(registry.Logger(log.New(GinkgoWriter, "registry: ", 0))))
		DeferCleanup(reg.Close)
		repoName := strings.TrimPrefix(reg.URL, "http://") + "/distcache"
		out := filepath.Join(testEnv.Dir, "dist")
		platform := v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
		// One platform keeps the test's build short; make release builds
		// linux/amd64 and linux/arm64 the same way.
		run(ctx, []string{"VERSION=9.9.9", "KO_DOCKER_REPO=" + repoName, "PLATFORMS=" + platform.String()},
			filepath.Join(root, "hack", "ko-images.sh"), out)

		digests := readLines(filepath.Join(out, "images", "digests.txt"))
		Expect(digests).To(HaveLen(2))
		for i, img := range []struct{ name, binary, versionArg string }{
			{"operator", "ko-app/distcache", "--version"},
			{"cachenode", "ko-app/cachenode", "version"},
		} {
			By(img.name)
			ref, err := name.NewTag(repoName + "/" + img.name + ":v9.9.9")
			Expect(err).NotTo(HaveOccurred())
			pushed := manifestDigest(reg.URL, "distcache/"+img.name, "v9.9.9")
			Expect(digests[i]).To(Equal(ref.String() + "@" + pushed))

			// The archive holds the same index (so the same images: content
			// addressed), named for containerd and docker.
			dir := untar(filepath.Join(out, "images", "distcache-"+img.name+"-9.9.9.oci.tar"))
			p, err := layout.FromPath(dir)
			Expect(err).NotTo(HaveOccurred())
			idx, err := p.ImageIndex()
			Expect(err).NotTo(HaveOccurred())
			im, err := idx.IndexManifest()
			Expect(err).NotTo(HaveOccurred())
			Expect(im.Manifests).To(HaveLen(1))
			Expect(im.Manifests[0].Digest.String()).To(Equal(pushed))
			Expect(im.Manifests[0].Annotations).To(HaveKeyWithValue("io.containerd.image.name", ref.String()))

			// ko attaches the SBOM as sha256-DIGEST.sbom; the files are in dist/sbom.
			Expect(manifestDigest(reg.URL, "distcache/"+img.name, strings.Replace(pushed, ":", "-", 1)+".sbom")).NotTo(BeEmpty())
			Expect(filepath.Join(out, "sbom", filepath.Base(img.binary)+"-linux-"+runtime.GOARCH+".spdx.json")).To(BeAnExistingFile())

			image, err := partialImages(p, im.Manifests[0].Digest, platform)
			Expect(err).NotTo(HaveOccurred())
			cf, err := image.ConfigFile()
			Expect(err).NotTo(HaveOccurred())
			Expect(cf.Config.User).To(Equal("65532:65532"))
			Expect(cf.Config.Entrypoint).To(Equal([]string{"/" + img.binary}))
			Expect(fileIn(image, "etc/passwd")).To(ContainSubstring("nonroot:x:65532:65532"))

			// The binary in the image reports the release's version.
			bin := filepath.Join(testEnv.Dir, img.name)
			Expect(os.WriteFile(bin, []byte(fileIn(image, img.binary)), 0o755)).To(Succeed())
			Expect(run(ctx, nil, bin, img.versionArg)).To(ContainSubstring("9.9.9"))
		}
	})
})

// manifestDigest asks the registry at base for repo's manifest ref, as a
// client pulling it would, and returns its digest.
func manifestDigest(base, repo, ref string) string {
	GinkgoHelper()
	req, err := http.NewRequest(http.MethodHead, base+"/v2/"+repo+"/manifests/"+ref, nil)
	Expect(err).NotTo(HaveOccurred())
	req.Header.Set("Accept", "application/vnd.oci.image.index.v1+json, application/vnd.oci.image.manifest.v1+json")
	resp, err := http.DefaultClient.Do(req)
	Expect(err).NotTo(HaveOccurred())
	Expect(resp.Body.Close()).To(Succeed())
	Expect(resp.StatusCode).To(Equal(http.StatusOK), "%s:%s in the registry", repo, ref)
	return resp.Header.Get("Docker-Content-Digest")
}

// partialImages returns the image of platform in the layout's manifest h: a
// multi-platform index, or (ko builds one platform so) an image.
func partialImages(p layout.Path, h v1.Hash, platform v1.Platform) (v1.Image, error) {
	idx, err := p.ImageIndex()
	if err != nil {
		return nil, err
	}
	if img, err := idx.Image(h); err == nil {
		if m, err := img.MediaType(); err == nil && m.IsImage() {
			return img, nil
		}
	}
	inner, err := idx.ImageIndex(h)
	if err != nil {
		return nil, err
	}
	im, err := inner.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range im.Manifests {
		if d.Platform != nil && d.Platform.Satisfies(platform) {
			return inner.Image(d.Digest)
		}
	}
	return nil, errors.New("no image for " + platform.String())
}

func readLines(path string) []string {
	GinkgoHelper()
	f, err := os.Open(path)
	Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	var lines []string
	s := bufio.NewScanner(f)
	for s.Scan() {
		lines = append(lines, s.Text())
	}
	Expect(s.Err()).NotTo(HaveOccurred())
	return lines
}

// untar unpacks an OCI archive into a new directory.
func untar(archive string) string {
	GinkgoHelper()
	dir, err := os.MkdirTemp(testEnv.Dir, "oci-")
	Expect(err).NotTo(HaveOccurred())
	f, err := os.Open(archive)
	Expect(err).NotTo(HaveOccurred())
	defer f.Close()
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return dir
		}
		Expect(err).NotTo(HaveOccurred())
		target := filepath.Join(dir, filepath.Clean("/"+hdr.Name))
		switch hdr.Typeflag {
		case tar.TypeDir:
			Expect(os.MkdirAll(target, 0o755)).To(Succeed())
		case tar.TypeReg:
			Expect(os.MkdirAll(filepath.Dir(target), 0o755)).To(Succeed())
			w, err := os.Create(target)
			Expect(err).NotTo(HaveOccurred())
			_, err = io.Copy(w, tr)
			Expect(err).NotTo(HaveOccurred())
			Expect(w.Close()).To(Succeed())
		}
	}
}

// fileIn returns the content of a regular file of the image's filesystem.
func fileIn(img v1.Image, path string) string {
	GinkgoHelper()
	rc := mutate.Extract(img)
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		hdr, err := tr.Next()
		Expect(err).NotTo(HaveOccurred(), "%s not in the image", path)
		if strings.TrimPrefix(hdr.Name, "/") == path && hdr.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			Expect(err).NotTo(HaveOccurred())
			return string(b)
		}
	}
}
