package v1alpha1

import "k8s.io/apimachinery/pkg/api/resource"

// Defaults are the +kubebuilder:default markers on the types, applied by the
// API server. What cannot be a schema default, because it depends on the
// object's name or the operator's configuration, is computed here, so it is
// still defined in one place.

// CertificateSecretSuffix ends the default name of a tenant's certificate
// Secret.
const CertificateSecretSuffix = "-distcache-client"

// CertificateSecretName is the Secret that receives the tenant's client
// certificate: spec.certificateSecretName, or <name>-distcache-client.
func (t *CacheTenant) CertificateSecretName() string {
	if t.Spec.CertificateSecretName != "" {
		return t.Spec.CertificateSecretName
	}
	return t.Name + CertificateSecretSuffix
}

// Mode reports which storage mode is set ("" if none, which the API server
// refuses).
func (s *StorageSpec) Mode() StorageMode {
	switch {
	case s.HostPath != nil:
		return StorageModeHostPath
	case s.VolumeClaimTemplate != nil:
		return StorageModeVolumeClaimTemplate
	case s.EmptyDir != nil:
		return StorageModeEmptyDir
	}
	return ""
}

// CacheNodeImage returns spec.image, or operatorDefault (the operator's
// --cachenode-image) when it is empty.
func (s *DistributedCacheSpec) CacheNodeImage(operatorDefault string) string {
	if s.Image != "" {
		return s.Image
	}
	return operatorDefault
}

// Gateway defaults that the schema also sets (+kubebuilder:default), for
// objects built in code or read from a server without them.
const (
	DefaultGatewayPort            = 8099
	DefaultGatewayReplicasPerZone = 1
	DefaultGatewayPageCacheSize   = "256Mi"
)

// GatewayEnabled reports whether the tenant runs operator-managed gateways.
func (t *CacheTenant) GatewayEnabled() bool {
	g := t.Spec.Gateway
	return g != nil && (g.Enabled == nil || *g.Enabled)
}

// GatewayPort is spec.gateway.port or its default.
func (g *GatewaySpec) GatewayPort() int32 {
	if g.Port != nil {
		return *g.Port
	}
	return DefaultGatewayPort
}

// GatewayReplicasPerZone is spec.gateway.replicasPerZone or its default.
func (g *GatewaySpec) GatewayReplicasPerZone() int32 {
	if g.ReplicasPerZone != nil {
		return *g.ReplicasPerZone
	}
	return DefaultGatewayReplicasPerZone
}

// GatewayPageCacheBytes is spec.gateway.pageCacheSize in bytes, or its
// default.
func (g *GatewaySpec) GatewayPageCacheBytes() int64 {
	if g.PageCacheSize != nil {
		return g.PageCacheSize.Value()
	}
	q := resource.MustParse(DefaultGatewayPageCacheSize)
	return q.Value()
}
