package operator_test

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	cachev1alpha1 "github.com/distcache/distcache/api/v1alpha1"
	"github.com/distcache/distcache/controllers"
	"github.com/distcache/distcache/internal/pki"
)

// rotationStep is what every holder of the cache's certificates has at one
// step of a CA rotation: the nodes' certificate Secret and a tenant's.
type rotationStep struct {
	name         string
	node, tenant map[string][]byte
}

// handshake runs a real mutual TLS 1.3 handshake between a node serving with
// server's Secret data (the nodes' TLS configuration, client CAs from its
// ca.crt) and a client dialing with client's (certificate and CA bundle
// followed as gateways and nodes do), addressing host. Both ends must
// accept.
func handshake(ctx context.Context, server, client map[string][]byte, host string) error {
	dir := GinkgoT().TempDir()
	write := func(prefix string, data map[string][]byte) (crt, key, ca string) {
		for k, v := range data {
			Expect(os.WriteFile(filepath.Join(dir, prefix+k), v, 0o600)).To(Succeed())
		}
		return filepath.Join(dir, prefix+corev1.TLSCertKey), filepath.Join(dir, prefix+corev1.TLSPrivateKeyKey), filepath.Join(dir, prefix+"ca.crt")
	}
	scfg, err := pki.ServerTLSConfig(write("server-", server))
	Expect(err).NotTo(HaveOccurred())
	cfiles, err := pki.NewClientTLS(write("client-", client))
	Expect(err).NotTo(HaveOccurred())
	ccfg := cfiles.Config().Clone()
	ccfg.ServerName = host

	a, b := net.Pipe()
	deadline := time.Now().Add(20 * time.Second)
	Expect(a.SetDeadline(deadline)).To(Succeed())
	Expect(b.SetDeadline(deadline)).To(Succeed())
	serverErr := make(chan error, 1)
	go func() {
		s := tls.Server(a, scfg)
		err := s.HandshakeContext(ctx)
		if err == nil {
			// TLS 1.3: the client's certificate is checked on its
			// Finished; answering proves the server accepted it.
			_, err = s.Write([]byte{1})
		}
		_ = a.Close() // not s.Close: its close_notify would wait for a reader on the unbuffered pipe
		serverErr <- err
	}()
	c := tls.Client(b, ccfg)
	cerr := c.HandshakeContext(ctx)
	if cerr == nil {
		_, cerr = c.Read(make([]byte, 1))
	}
	_ = b.Close()
	return errors.Join(cerr, <-serverErr)
}

// bundleCerts are the certificates of a ca.crt bundle.
func bundleCerts(g Gomega, bundle []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for rest := bundle; ; {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			return out
		}
		c, err := x509.ParseCertificate(block.Bytes)
		g.Expect(err).NotTo(HaveOccurred())
		out = append(out, c)
	}
}

var _ = Describe("CA rotation", func() {
	It("rotates the CA in steps where every two consecutive versions of the certificate Secrets can talk", func(ctx SpecContext) {
		ns := newNamespace(ctx)
		dc := newCache(ns, "rot", 1, "zone-a")
		Expect(k8sClient.Create(ctx, dc)).To(Succeed())
		t := newTenant(ns, "ch", dc, "data")
		Expect(k8sClient.Create(ctx, t)).To(Succeed())
		host := fmt.Sprintf("rot-zone-a-0.rot-zone-a.%s.svc", ns)

		status := func(g Gomega) *cachev1alpha1.CertificateAuthorityStatus {
			var got cachev1alpha1.DistributedCache
			g.Expect(k8sClient.Get(ctx, key(ns, dc.Name), &got)).To(Succeed())
			g.Expect(got.Status.CertificateAuthority).NotTo(BeNil())
			return got.Status.CertificateAuthority
		}
		caSecret := func(g Gomega) *corev1.Secret {
			var s corev1.Secret
			g.Expect(k8sClient.Get(ctx, key(ns, controllers.CASecretName(dc)), &s)).To(Succeed())
			return &s
		}
		// settle waits until the CA Secret is in phase and both certificate
		// Secrets carry its bundle and a certificate of its signing CA.
		settle := func(name, phase string) rotationStep {
			GinkgoHelper()
			var step rotationStep
			n := 0
			Eventually(func(g Gomega) {
				// Nudge: the cache's reconciler polls tenants' Secrets
				// while reissuing; a change makes it look now.
				n++
				updateCache(ctx, ns, dc.Name, func(dc *cachev1alpha1.DistributedCache) {
					metav1.SetMetaDataAnnotation(&dc.ObjectMeta, "nudge", fmt.Sprint(n))
				})
				g.Expect(status(g).Rotation).To(Equal(phase))
				ca := caSecret(g)
				signer, err := pki.LoadCA(ca.Data[corev1.TLSCertKey], ca.Data[corev1.TLSPrivateKeyKey])
				g.Expect(err).NotTo(HaveOccurred())
				var node, tenant corev1.Secret
				g.Expect(k8sClient.Get(ctx, key(ns, controllers.NodeTLSSecretName(dc)), &node)).To(Succeed())
				g.Expect(k8sClient.Get(ctx, key(ns, t.CertificateSecretName()), &tenant)).To(Succeed())
				for _, s := range []*corev1.Secret{&node, &tenant} {
					g.Expect(s.Data["ca.crt"]).To(Equal(ca.Data["ca.crt"]), s.Name)
					g.Expect(parseCert(g, s).CheckSignatureFrom(signer.Cert)).To(Succeed(), s.Name)
				}
				step = rotationStep{name: name, node: node.Data, tenant: tenant.Data}
			}).WithPolling(500 * time.Millisecond).Should(Succeed())
			return step
		}

		before := settle("before", "")
		oldCA := bundleCerts(Default, before.node["ca.crt"])
		Expect(oldCA).To(HaveLen(1))
		Expect(status(Default).NotAfter.Time).To(BeTemporally("~", oldCA[0].NotAfter, time.Second))

		By("asking for a rotation: the new CA joins every bundle, the old one still signs")
		updateCache(ctx, ns, dc.Name, func(dc *cachev1alpha1.DistributedCache) {
			metav1.SetMetaDataAnnotation(&dc.ObjectMeta, controllers.AnnotationRotateCA, "2026-11-22")
		})
		distributing := settle("distributing", controllers.CARotationDistributing)
		both := bundleCerts(Default, distributing.node["ca.crt"])
		Expect(both).To(HaveLen(2))
		Expect(both[0].Equal(oldCA[0])).To(BeTrue())
		Expect(distributing.node[corev1.TLSCertKey]).To(Equal(before.node[corev1.TLSCertKey]), "certificates are not reissued while the bundle spreads")
		Consistently(func(g Gomega) string { return status(g).Rotation }).WithTimeout(2*time.Second).Should(Equal(controllers.CARotationDistributing),
			"the new CA must not sign before the grace period is over")

		By("after the grace period: the new CA signs and every certificate is reissued")
		clock.Advance(controllers.DefaultCARotationGrace + time.Minute)
		DeferCleanup(clock.Reset)
		reissued := settle("reissued", controllers.CARotationRetiring)
		Expect(bundleCerts(Default, reissued.node["ca.crt"])).To(HaveLen(2))
		Expect(parseCert(Default, &corev1.Secret{Data: reissued.tenant}).CheckSignatureFrom(both[1])).To(Succeed())

		By("after another grace period: the old CA leaves the bundles")
		clock.Advance(controllers.DefaultCARotationGrace + time.Minute)
		after := settle("after", "")
		newOnly := bundleCerts(Default, after.node["ca.crt"])
		Expect(newOnly).To(HaveLen(1))
		Expect(newOnly[0].Equal(both[1])).To(BeTrue())
		Expect(caSecret(Default).Data).NotTo(HaveKey("next.crt"))
		Expect(status(Default).NotAfter.Time).To(BeTemporally("~", newOnly[0].NotAfter, time.Second), "the status shows the new CA")

		By("every holder can talk to every other while kubelets deliver any two consecutive versions")
		steps := []rotationStep{before, distributing, reissued, after}
		for i := 1; i < len(steps); i++ {
			for _, srv := range steps[i-1 : i+1] {
				for _, cl := range steps[i-1 : i+1] {
					Expect(handshake(ctx, srv.node, cl.tenant, host)).To(Succeed(), "node %s, tenant %s", srv.name, cl.name)
					Expect(handshake(ctx, srv.node, cl.node, host)).To(Succeed(), "node %s, peer %s", srv.name, cl.name)
				}
			}
		}
		// Without the steps in between, holders would have been cut off.
		Expect(handshake(ctx, after.node, before.tenant, host)).To(MatchError(ContainSubstring("unknown authority")))
		Expect(handshake(ctx, before.node, after.tenant, host)).To(MatchError(ContainSubstring("unknown authority")))

		By("the same annotation value does not rotate again")
		updateCache(ctx, ns, dc.Name, func(dc *cachev1alpha1.DistributedCache) {
			metav1.SetMetaDataAnnotation(&dc.ObjectMeta, "nudge", "again")
		})
		Consistently(func(g Gomega) string { return status(g).Rotation }).WithTimeout(2 * time.Second).Should(BeEmpty())
	})
})
