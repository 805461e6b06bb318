package v1alpha1

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
