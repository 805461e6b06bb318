package main

import (
	"strings"
	"testing"

	"github.com/distcache/distcache/internal/kubewatch"
)

func TestServeFlagsAPIWatch(t *testing.T) {
	base := []string{"--tls-cert=c", "--tls-key=k", "--client-ca=ca", "--tenants-file=t.yaml", "--node-name=n-0"}
	t.Run("refs with and without keys", func(t *testing.T) {
		f, err := parseServeFlags(append(base, "--ring-file=r.json", "--ring-configmap=ns/c-ring:zone-a.json", "--tenants-secret=ns/c-tenants"))
		if err != nil {
			t.Fatal(err)
		}
		if f.ringRef != (kubewatch.Ref{Namespace: "ns", Name: "c-ring", Key: "zone-a.json"}) {
			t.Errorf("ring ref %+v", f.ringRef)
		}
		if f.tenantsRef != (kubewatch.Ref{Namespace: "ns", Name: "c-tenants", Key: "tenants.yaml"}) {
			t.Errorf("tenants ref %+v", f.tenantsRef)
		}
	})
	t.Run("from the environment", func(t *testing.T) {
		t.Setenv("DISTCACHE_TENANTS_SECRET", "ns/from-env:x.yaml")
		f, err := parseServeFlags(base)
		if err != nil {
			t.Fatal(err)
		}
		if f.tenantsRef != (kubewatch.Ref{Namespace: "ns", Name: "from-env", Key: "x.yaml"}) {
			t.Errorf("tenants ref %+v", f.tenantsRef)
		}
	})
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"ring ConfigMap without a ring file", []string{"--ring-configmap=ns/c-ring"}, "--ring-configmap needs --ring-file"},
		{"malformed ring ConfigMap", []string{"--ring-file=r.json", "--ring-configmap=c-ring"}, "--ring-configmap"},
		{"malformed tenants Secret", []string{"--tenants-secret=ns/Bad_Name"}, "--tenants-secret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := parseServeFlags(append(append([]string(nil), base...), tc.args...))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}
