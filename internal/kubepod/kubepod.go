// Package kubepod reads the state of the cache's pods the same way for the
// operator (controllers) and the kubectl plugin (internal/kubectlplugin).
package kubepod

import corev1 "k8s.io/api/core/v1"

// Ready reports whether p is Ready and not being deleted.
func Ready(p *corev1.Pod) bool {
	if p.DeletionTimestamp != nil {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}
