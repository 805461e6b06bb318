# shellcheck shell=bash
# hack/cluster.sh's cluster DNS: CoreDNS as a Deployment in kube-system,
# from the image distcache.local/coredns:dev, answering for the cluster's
# names only, checked by a lookup from a pod. Sourced by hack/cluster.sh.

coredns_ready() {
  [ "$(kubectl -n kube-system get deployment coredns -o jsonpath='{.status.readyReplicas}')" = 1 ]
}

dns_check_done() {
  local phase
  phase=$(kubectl -n kube-system get pod dns-check -o jsonpath='{.status.phase}')
  [ "$phase" = Succeeded ] && return 0
  if [ "$phase" = Failed ]; then
    kubectl -n kube-system logs dns-check >&2 || true
    die "the DNS check pod failed"
  fi
  return 1
}

start_dns() {
  log "starting CoreDNS"
  cat >"$CONF/coredns.yaml" <<EOF
apiVersion: v1
kind: ServiceAccount
metadata:
  name: coredns
  namespace: kube-system
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: system:coredns
rules:
- apiGroups: [""]
  resources: [endpoints, services, pods, namespaces]
  verbs: [list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata:
  name: system:coredns
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: ClusterRole
  name: system:coredns
subjects:
- kind: ServiceAccount
  name: coredns
  namespace: kube-system
---
# Cluster names only: no forward to resolvers outside. TTL and cache are 5 s
# so that a recreated pod's name does not resolve to its old address for long.
apiVersion: v1
kind: ConfigMap
metadata:
  name: coredns
  namespace: kube-system
data:
  Corefile: |
    .:53 {
        errors
        health {
            lameduck 5s
        }
        ready
        kubernetes $CLUSTER_DOMAIN in-addr.arpa ip6.arpa {
            pods insecure
            fallthrough in-addr.arpa ip6.arpa
            ttl 5
        }
        cache 5
    }
---
apiVersion: apps/v1
kind: Deployment
metadata:
  name: coredns
  namespace: kube-system
  labels:
    k8s-app: kube-dns
spec:
  replicas: 1
  selector:
    matchLabels:
      k8s-app: kube-dns
  template:
    metadata:
      labels:
        k8s-app: kube-dns
    spec:
      priorityClassName: system-cluster-critical
      serviceAccountName: coredns
      dnsPolicy: Default
      securityContext:
        runAsNonRoot: true
        runAsUser: 65532
        runAsGroup: 65532
        # Port 53 as a non-root user, without file capabilities in the image.
        sysctls:
        - name: net.ipv4.ip_unprivileged_port_start
          value: "53"
      containers:
      - name: coredns
        image: distcache.local/coredns:dev
        imagePullPolicy: Never
        args: [-conf, /etc/coredns/Corefile]
        ports:
        - {name: dns, containerPort: 53, protocol: UDP}
        - {name: dns-tcp, containerPort: 53, protocol: TCP}
        resources:
          requests: {cpu: 50m, memory: 70Mi}
          limits: {memory: 170Mi}
        securityContext:
          allowPrivilegeEscalation: false
          readOnlyRootFilesystem: true
          capabilities:
            drop: [ALL]
        livenessProbe:
          httpGet: {path: /health, port: 8080}
          periodSeconds: 10
          failureThreshold: 5
        readinessProbe:
          httpGet: {path: /ready, port: 8181}
          periodSeconds: 2
        volumeMounts:
        - name: config
          mountPath: /etc/coredns
          readOnly: true
      volumes:
      - name: config
        configMap:
          name: coredns
---
apiVersion: v1
kind: Service
metadata:
  name: kube-dns
  namespace: kube-system
  labels:
    k8s-app: kube-dns
spec:
  clusterIP: $DNS_SERVICE_IP
  selector:
    k8s-app: kube-dns
  ports:
  - {name: dns, port: 53, protocol: UDP}
  - {name: dns-tcp, port: 53, protocol: TCP}
EOF
  local ns
  for ns in kube-system default; do
    wait_until "the default service account in $ns" kube-controller-manager kubectl -n "$ns" get serviceaccount default
  done
  kubectl apply -f "$CONF/coredns.yaml" >/dev/null
  wait_until "CoreDNS to be Ready" kubelet coredns_ready

  log "checking DNS from a pod"
  kubectl -n kube-system run dns-check --image=distcache.local/probe:dev --image-pull-policy=Never \
    --restart=Never -- lookup -timeout "${TIMEOUT}s" "kubernetes.default.svc.$CLUSTER_DOMAIN" >/dev/null
  wait_until "a DNS lookup from a pod" kubelet dns_check_done
  log "DNS: $(kubectl -n kube-system logs dns-check)"
  kubectl -n kube-system delete pod dns-check --wait=true >/dev/null
}
