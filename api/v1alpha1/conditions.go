package v1alpha1

// Condition types of DistributedCache and CacheTenant status, used with
// metav1.Condition and ObservedGeneration.
const (
	// ConditionReady: DistributedCache: every zone has all its replicas ready
	// and its ring published. CacheTenant: the tenant is registered with the
	// cache and its certificate Secret is current.
	ConditionReady = "Ready"
	// ConditionProgressing: the operator is moving the cache towards its spec
	// (scaling, rolling out, ring handoff). DistributedCache only.
	ConditionProgressing = "Progressing"
	// ConditionDegraded: the cache serves, but not as specified (a zone short
	// of ready nodes, monitoring unavailable, a reconcile step failing).
	// DistributedCache only.
	ConditionDegraded = "Degraded"
	// ConditionGatewayReady: CacheTenant with spec.gateway: every zone's
	// gateways are ready and the endpoint serves.
	ConditionGatewayReady = "GatewayReady"
)

// Condition reasons. Each is a CamelCase word, as metav1.Condition requires.
const (
	// ReasonAvailable (Ready=True): all zones are ready.
	ReasonAvailable = "Available"
	// ReasonPodsNotReady (Ready=False): some zone has fewer ready nodes than
	// spec.replicas.
	ReasonPodsNotReady = "PodsNotReady"
	// ReasonReconcileFailed (Ready=False or Degraded=True): a reconcile step
	// failed; the message says which and why.
	ReasonReconcileFailed = "ReconcileFailed"

	// ReasonScaling (Progressing=True): a zone's replicas are changing.
	ReasonScaling = "Scaling"
	// ReasonRollingOut (Progressing=True): pods are being replaced with a new
	// template.
	ReasonRollingOut = "RollingOut"
	// ReasonRingHandoff (Progressing=True): a ring change is in force and
	// draining members still hand their chunks off.
	ReasonRingHandoff = "RingHandoff"
	// ReasonHeldDataDraining (Progressing=True): a scale-down waits for
	// pods being scaled away that still hold write-back or transient data
	// (status.zones[].leavingPods); their nodes hand it over or persist it.
	ReasonHeldDataDraining = "HeldDataDraining"
	// ReasonLeavingPodUnanswered (Progressing=True): a scale-down waits for
	// a pod being scaled away that cannot be asked what it holds, for at
	// most the operator's bound.
	ReasonLeavingPodUnanswered = "LeavingPodUnanswered"
	// ReasonReconciled (Progressing=False): nothing is in flight.
	ReasonReconciled = "Reconciled"

	// ReasonAsExpected (Degraded=False): nothing is wrong.
	ReasonAsExpected = "AsExpected"
	// ReasonZoneUnavailable (Degraded=True): a zone has no ready node; its
	// gateways fall back to other zones or S3.
	ReasonZoneUnavailable = "ZoneUnavailable"
	// ReasonMonitoringUnavailable (Degraded=True): monitoring was asked for
	// but the prometheus-operator's CRDs are not installed.
	ReasonMonitoringUnavailable = "MonitoringUnavailable"
	// ReasonSecretNotFound: a credentials Secret (or one of its keys) named in
	// the spec does not exist.
	ReasonSecretNotFound = "SecretNotFound"
	// ReasonIssuerNotReady: the cert-manager issuer in spec.tls.issuerRef is
	// missing or not ready.
	ReasonIssuerNotReady = "IssuerNotReady"

	// ReasonCertificateIssued (CacheTenant Ready=True): the tenant is
	// registered and its certificate Secret is current.
	ReasonCertificateIssued = "CertificateIssued"
	// ReasonCertificatePending (CacheTenant Ready=False): the certificate is
	// being issued or renewed.
	ReasonCertificatePending = "CertificatePending"
	// ReasonCacheNotFound (CacheTenant Ready=False): spec.cacheRef names no
	// DistributedCache.
	ReasonCacheNotFound = "CacheNotFound"
	// ReasonNamespaceNotAllowed (CacheTenant Ready=False): the cache's
	// spec.tenantNamespaceSelector does not admit the tenant's namespace.
	ReasonNamespaceNotAllowed = "NamespaceNotAllowed"

	// ReasonGatewaysAvailable (GatewayReady=True): every zone has its
	// gateways ready.
	ReasonGatewaysAvailable = "GatewaysAvailable"
	// ReasonGatewaysNotReady (GatewayReady=False): some zone has fewer
	// ready gateways than spec.gateway.replicasPerZone; the message says
	// which and why (unschedulable, image, crash...).
	ReasonGatewaysNotReady = "GatewaysNotReady"
	// ReasonTenantNotReady (GatewayReady=False): the tenant itself is not
	// Ready (no certificate), so its gateways cannot reach the cache.
	ReasonTenantNotReady = "TenantNotReady"
	// ReasonZoneNotInCache (GatewayReady=False): spec.gateway.zones names a
	// zone the cache does not run in.
	ReasonZoneNotInCache = "ZoneNotInCache"
)
