# shellcheck shell=bash
# hack/cluster.sh's control plane, as processes on node 0: etcd (on
# loopback, without fsync), kube-apiserver (on node 0's address),
# kube-controller-manager (which hands out the nodes' pod CIDRs and signs
# their certificates) and kube-scheduler. Sourced by hack/cluster.sh.

# start_control_plane: every port the cluster listens on checked free, then
# the four components, each waited for.
start_control_plane() {
  local addr
  for addr in "$ETCD_CLIENT" "$ETCD_PEER" "$NODE_IP:6443" 127.0.0.1:10257 127.0.0.1:10259 \
    "${NODE_IPS[0]}:10250" "${NODE_IPS[1]}:10250" 127.0.0.1:10248 127.0.0.1:10258 127.0.0.1:10249 127.0.0.1:10256; do
    port_free "$addr" || die "$addr is in use by another program (ss -ltnp 'sport = :${addr##*:}')"
  done

  log "starting etcd"
  start etcd "$(bin etcd)" --name=distcache --data-dir="$D/etcd" \
    --listen-client-urls="http://$ETCD_CLIENT" --advertise-client-urls="http://$ETCD_CLIENT" \
    --listen-peer-urls="http://$ETCD_PEER" --initial-advertise-peer-urls="http://$ETCD_PEER" \
    --initial-cluster="distcache=http://$ETCD_PEER" --unsafe-no-fsync --log-level=warn
  wait_until "etcd" etcd healthy "http://$ETCD_CLIENT/health"

  log "starting kube-apiserver"
  start kube-apiserver "$(bin kube-apiserver)" \
    --advertise-address="$NODE_IP" --bind-address="$NODE_IP" --secure-port=6443 \
    --etcd-servers="http://$ETCD_CLIENT" \
    --service-cluster-ip-range="$SERVICE_CIDR" \
    --client-ca-file="$PKI/ca.crt" \
    --tls-cert-file="$PKI/apiserver.crt" --tls-private-key-file="$PKI/apiserver.key" \
    --kubelet-client-certificate="$PKI/apiserver-kubelet-client.crt" \
    --kubelet-client-key="$PKI/apiserver-kubelet-client.key" \
    --kubelet-certificate-authority="$PKI/ca.crt" \
    --kubelet-preferred-address-types=InternalIP,Hostname \
    --authorization-mode=Node,RBAC --enable-admission-plugins=NodeRestriction \
    --service-account-issuer="https://kubernetes.default.svc.$CLUSTER_DOMAIN" \
    --service-account-key-file="$PKI/sa.pub" --service-account-signing-key-file="$PKI/sa.key" \
    --requestheader-client-ca-file="$PKI/ca.crt" --requestheader-allowed-names=front-proxy-client \
    --requestheader-username-headers=X-Remote-User --requestheader-group-headers=X-Remote-Group \
    --requestheader-extra-headers-prefix=X-Remote-Extra- \
    --proxy-client-cert-file="$PKI/front-proxy-client.crt" --proxy-client-key-file="$PKI/front-proxy-client.key" \
    --allow-privileged=true --profiling=false
  wait_until "kube-apiserver" kube-apiserver apiserver_ready

  log "starting kube-controller-manager and kube-scheduler"
  start kube-controller-manager "$(bin kube-controller-manager)" \
    --kubeconfig="$CONF/kube-controller-manager.kubeconfig" \
    --authentication-kubeconfig="$CONF/kube-controller-manager.kubeconfig" \
    --authorization-kubeconfig="$CONF/kube-controller-manager.kubeconfig" \
    --bind-address=127.0.0.1 --cert-dir="$D/kube-controller-manager" \
    --allocate-node-cidrs --cluster-cidr="$CLUSTER_CIDR" --node-cidr-mask-size=24 \
    --service-cluster-ip-range="$SERVICE_CIDR" --cluster-name=distcache \
    --use-service-account-credentials --root-ca-file="$PKI/ca.crt" \
    --service-account-private-key-file="$PKI/sa.key" \
    --cluster-signing-cert-file="$PKI/ca.crt" --cluster-signing-key-file="$PKI/ca.key" \
    --leader-elect=false --profiling=false
  start kube-scheduler "$(bin kube-scheduler)" \
    --kubeconfig="$CONF/kube-scheduler.kubeconfig" \
    --authentication-kubeconfig="$CONF/kube-scheduler.kubeconfig" \
    --authorization-kubeconfig="$CONF/kube-scheduler.kubeconfig" \
    --bind-address=127.0.0.1 --leader-elect=false --profiling=false
  wait_until "kube-controller-manager" kube-controller-manager healthy https://127.0.0.1:10257/healthz
  wait_until "kube-scheduler" kube-scheduler healthy https://127.0.0.1:10259/healthz
}
