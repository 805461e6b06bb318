package cluster_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/service/s3"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/distcache/distcache/internal/testutil"
)

// A tenant's clients use its status.endpoint, http://<tenant>-gateway.<ns>.svc:PORT:
// the Service's cluster IP, which kube-proxy sends to a ready gateway of the
// client's own zone (trafficDistribution PreferSameZone). This machine is
// outside the cluster's DNS, and the local cluster's one kube-proxy runs on
// the zone-a node, so it routes every client as a zone-a client. A zoneClient
// stands for a client in a given zone: it sends each new connection for the
// endpoint either to the Service's cluster IP (zone-a, through kube-proxy)
// or, for another zone, to one of the Service's endpoints of that zone that
// its EndpointSlices call ready, as kube-proxy on a node of that zone would.

// zoneClient is an S3 client of the tenant's endpoint in one zone.
type zoneClient struct {
	zone   string
	s3     *s3.Client
	follow *poller // nil: the client dials the cluster IP

	mu    sync.Mutex
	addrs []string // ready endpoints of the zone (other zones only)
	next  int
}

// newZoneClient follows the Service behind endpoint (the tenant's
// status.endpoint) for a client in zone, signing with the given keys.
// viaClusterIP: dial the Service's cluster IP (kube-proxy routes); else
// the zone's ready endpoints.
func newZoneClient(ctx context.Context, endpoint, zone string, viaClusterIP bool, keyID, secret string) *zoneClient {
	GinkgoHelper()
	u, err := url.Parse(endpoint)
	Expect(err).NotTo(HaveOccurred())
	svcName, svcNS, _ := strings.Cut(strings.TrimSuffix(u.Hostname(), ".svc"), ".")
	var svc corev1.Service
	Expect(k8sClient.Get(ctx, key(svcNS, svcName), &svc)).To(Succeed())
	Expect(u.Port()).NotTo(BeEmpty(), "endpoint %s names its port", endpoint)

	z := &zoneClient{zone: zone}
	dialer := &net.Dialer{Timeout: 5 * time.Second}
	dial := func(ctx context.Context, network, _ string) (net.Conn, error) {
		if viaClusterIP {
			return dialer.DialContext(ctx, network, net.JoinHostPort(svc.Spec.ClusterIP, u.Port()))
		}
		addr, err := z.pick()
		if err != nil {
			return nil, err
		}
		return dialer.DialContext(ctx, network, addr)
	}
	if !viaClusterIP {
		z.refresh(ctx, svcNS, svcName)
		Expect(z.ready()).NotTo(BeEmpty(), "ready endpoints of %s/%s in %s", svcNS, svcName, zone)
		z.follow = poll(250*time.Millisecond, false, func(ctx context.Context) { z.refresh(ctx, svcNS, svcName) })
	}
	z.s3 = testutil.S3Client(endpoint, keyID, secret, func(o *s3.Options) {
		o.HTTPClient = &http.Client{Transport: &http.Transport{
			DialContext: dial, MaxIdleConnsPerHost: 8, IdleConnTimeout: 30 * time.Second,
		}}
	})
	return z
}

// refresh reads the zone's ready endpoints from the Service's
// EndpointSlices (an error keeps the last ones).
func (z *zoneClient) refresh(ctx context.Context, ns, svc string) {
	var slices discoveryv1.EndpointSliceList
	if err := k8sClient.List(ctx, &slices, client.InNamespace(ns), client.MatchingLabels{discoveryv1.LabelServiceName: svc}); err != nil {
		return
	}
	var addrs []string
	for _, s := range slices.Items {
		// The slice's port is the pods' (the Service's targetPort).
		target := 0
		for _, p := range s.Ports {
			if p.Port != nil && (len(s.Ports) == 1 || (p.Name != nil && *p.Name == "s3")) {
				target = int(*p.Port)
			}
		}
		if target == 0 {
			continue
		}
		for _, e := range s.Endpoints {
			if e.Zone == nil || *e.Zone != z.zone || e.Conditions.Ready == nil || !*e.Conditions.Ready || len(e.Addresses) == 0 {
				continue
			}
			addrs = append(addrs, net.JoinHostPort(e.Addresses[0], strconv.Itoa(target)))
		}
	}
	z.mu.Lock()
	z.addrs = addrs
	z.mu.Unlock()
}

func (z *zoneClient) ready() []string {
	z.mu.Lock()
	defer z.mu.Unlock()
	return append([]string(nil), z.addrs...)
}

// pick is the next ready endpoint, round robin.
func (z *zoneClient) pick() (string, error) {
	z.mu.Lock()
	defer z.mu.Unlock()
	if len(z.addrs) == 0 {
		return "", fmt.Errorf("no ready gateway endpoint in %s", z.zone)
	}
	z.next++
	return z.addrs[z.next%len(z.addrs)], nil
}

// close stops following the endpoints.
func (z *zoneClient) close() {
	if z.follow != nil {
		z.follow.stop()
	}
}
