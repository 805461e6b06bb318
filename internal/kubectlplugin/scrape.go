package kubectlplugin

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// MetricsPortName is the name of a cache node container's plain HTTP port
// (/metrics, /healthz, /readyz), as the operator builds the pods.
const MetricsPortName = "metrics"

// Scraper reads a cache node's /metrics. The plugin's goes through the API
// server's pod proxy; tests bring their own.
type Scraper interface {
	Scrape(ctx context.Context, pod *corev1.Pod, port int32) ([]byte, error)
}

// proxyScraper reads /metrics through the API server
// (GET /api/v1/namespaces/NS/pods/NAME:PORT/proxy/metrics), so the caller
// needs the pods/proxy permission and no route to the pods.
type proxyScraper struct {
	kube kubernetes.Interface
}

func (s proxyScraper) Scrape(ctx context.Context, pod *corev1.Pod, port int32) ([]byte, error) {
	body, err := s.kube.CoreV1().RESTClient().Get().
		Namespace(pod.Namespace).Resource("pods").Name(pod.Name+":"+strconv.Itoa(int(port))).
		SubResource("proxy").Suffix("metrics").
		// The text format from the node (promhttp would answer protobuf
		// to a client that asks for it), and the API server's own errors
		// (a Status: forbidden, no such pod) in JSON, which it cannot
		// write as text/plain.
		SetHeader("Accept", "text/plain;version=0.0.4, application/json;q=0.5").
		DoRaw(ctx)
	if err != nil {
		// client-go does not decode the Status of a request whose Accept
		// it did not choose: the API server's message says who may not
		// do what.
		var st metav1.Status
		if json.Unmarshal(body, &st) == nil && st.Kind == "Status" && st.Message != "" {
			return nil, &apierrors.StatusError{ErrStatus: st}
		}
		return nil, err
	}
	return body, nil
}

// metricsPort is the pod's container port named "metrics".
func metricsPort(pod *corev1.Pod) (int32, bool) {
	for _, c := range pod.Spec.Containers {
		for _, p := range c.Ports {
			if p.Name == MetricsPortName {
				return p.ContainerPort, true
			}
		}
	}
	return 0, false
}

// scrapeResult is one node's metrics or why there are none.
type scrapeResult struct {
	metrics *NodeMetrics
	err     error
}

// scrapeLimit bounds the scrapes in flight through the API server.
const scrapeLimit = 8

// scrapePods reads the metrics of every running pod, in parallel; a pod
// that is not running or whose metrics cannot be read gets an error.
func scrapePods(ctx context.Context, s Scraper, pods []corev1.Pod) map[string]scrapeResult {
	var (
		mu  sync.Mutex
		out = make(map[string]scrapeResult, len(pods))
		g   errgroup.Group
	)
	g.SetLimit(scrapeLimit)
	for i := range pods {
		pod := &pods[i]
		g.Go(func() error {
			r := scrapePod(ctx, s, pod)
			mu.Lock()
			out[pod.Name] = r
			mu.Unlock()
			return nil
		})
	}
	_ = g.Wait()
	return out
}

func scrapePod(ctx context.Context, s Scraper, pod *corev1.Pod) scrapeResult {
	if pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" {
		return scrapeResult{err: fmt.Errorf("pod is %s, not running", phase(pod))}
	}
	port, ok := metricsPort(pod)
	if !ok {
		return scrapeResult{err: fmt.Errorf("pod has no container port named %q", MetricsPortName)}
	}
	text, err := s.Scrape(ctx, pod, port)
	if err != nil {
		return scrapeResult{err: fmt.Errorf("metrics through the API server's pod proxy: %w", err)}
	}
	m, err := parseNodeMetrics(text)
	if err != nil {
		return scrapeResult{err: err}
	}
	return scrapeResult{metrics: m}
}

func phase(pod *corev1.Pod) string {
	if pod.DeletionTimestamp != nil {
		return "Terminating"
	}
	if pod.Status.Phase == "" {
		return "Pending"
	}
	return string(pod.Status.Phase)
}
