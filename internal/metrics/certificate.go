package metrics

import (
	"crypto/x509"
	"math"

	"github.com/prometheus/client_golang/prometheus"
)

// RegisterCertificateExpiry exports when the certificate a process presents
// (a node's serving certificate, a gateway's client certificate) expires, as
// loaded now: certificates are reloaded from their files, so a renewal that
// never reached the process shows here, and the CertificateExpiring alerts
// fire on it. cert returns nil when nothing is loaded.
func RegisterCertificateExpiry(reg prometheus.Registerer, cert func() *x509.Certificate) {
	reg.MustRegister(node.GaugeFunc("tls_certificate_expiration_timestamp_seconds",
		"When the TLS certificate this process presents expires (Unix seconds), as loaded now; the operator renews certificates spec.tls.renewBefore (720h) ahead.", func() float64 {
			c := cert()
			if c == nil {
				return math.NaN()
			}
			return float64(c.NotAfter.Unix())
		}))
}
