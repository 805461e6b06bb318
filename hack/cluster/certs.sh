# shellcheck shell=bash
# hack/cluster.sh's certificates and kubeconfigs, with openssl: a cluster CA
# (also the kubelets' client CA, the request-header CA and the signer of
# kube-controller-manager), the serving and client certificates of every
# component and node, the service-account key pair, and a kubeconfig for
# each client with everything embedded. All in PKI, kubeconfigs in CONF
# (the admin's is KUBECONFIG_FILE). Sourced by hack/cluster.sh.

gen_key() { openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$1" 2>/dev/null; }

# gen_cert NAME SUBJECT EXTENDED_KEY_USAGE [SUBJECT_ALT_NAMES]: a key and a
# certificate signed by the cluster CA.
gen_cert() {
  local name=$1 subject=$2 eku=$3 san=${4:-}
  gen_key "$PKI/$name.key"
  {
    echo "basicConstraints = critical, CA:FALSE"
    echo "keyUsage = critical, digitalSignature, keyEncipherment"
    echo "extendedKeyUsage = $eku"
    [ -z "$san" ] || echo "subjectAltName = $san"
  } >"$PKI/$name.ext"
  openssl req -new -config "$PKI/req.cnf" -key "$PKI/$name.key" -subj "$subject" -out "$PKI/$name.csr"
  openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" \
    -set_serial "0x$(openssl rand -hex 16)" -days 365 -extfile "$PKI/$name.ext" -out "$PKI/$name.crt" 2>/dev/null
  rm -f "$PKI/$name.csr" "$PKI/$name.ext"
}

gen_pki() {
  log "certificates and kubeconfigs in $PKI"
  mkdir -p "$PKI"
  chmod 700 "$PKI"
  printf '[req]\ndistinguished_name = dn\n[dn]\n' >"$PKI/req.cnf"
  printf '%s\n' '[req]' 'distinguished_name = dn' 'prompt = no' '[dn]' 'CN = distcache-cluster-ca' \
    '[ca]' 'basicConstraints = critical, CA:TRUE' 'keyUsage = critical, keyCertSign, cRLSign, digitalSignature' \
    'subjectKeyIdentifier = hash' >"$PKI/ca.cnf"
  gen_key "$PKI/ca.key"
  openssl req -x509 -new -config "$PKI/ca.cnf" -extensions ca -key "$PKI/ca.key" -days 3650 -out "$PKI/ca.crt"

  local svc="kubernetes.default.svc"
  gen_cert apiserver "/CN=kube-apiserver" serverAuth \
    "DNS:kubernetes,DNS:kubernetes.default,DNS:$svc,DNS:$svc.$CLUSTER_DOMAIN,DNS:localhost,IP:127.0.0.1,IP:$NODE_IP,IP:$KUBERNETES_SERVICE_IP"
  gen_cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
  gen_cert admin "/O=system:masters/CN=kubernetes-admin" clientAuth
  gen_cert kube-controller-manager "/CN=system:kube-controller-manager" clientAuth
  gen_cert kube-scheduler "/CN=system:kube-scheduler" clientAuth
  gen_cert kube-proxy "/CN=system:kube-proxy" clientAuth
  each_node gen_node_pki
  # The API server's identity towards aggregated API servers; with it, the
  # components' authentication delegation finds a request-header CA.
  gen_cert front-proxy-client "/CN=front-proxy-client" clientAuth
  gen_key "$PKI/sa.key"
  openssl pkey -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub"

  write_kubeconfig "$KUBECONFIG_FILE" admin
  local c
  for c in kube-controller-manager kube-scheduler kube-proxy; do
    write_kubeconfig "$CONF/$c.kubeconfig" "$c"
  done
}

# gen_node_pki: the current node's kubelet client and serving certificates
# and its kubeconfig.
gen_node_pki() {
  gen_cert "$N_KUBELET" "/O=system:nodes/CN=system:node:$N_NAME" clientAuth
  gen_cert "$N_KUBELET-serving" "/CN=$N_NAME" serverAuth "DNS:$N_NAME,IP:$N_IP"
  write_kubeconfig "$CONF/$N_KUBELET.kubeconfig" "$N_KUBELET"
}

# write_kubeconfig FILE CERT: a kubeconfig for the API server, authenticating
# with pki/CERT.crt, everything embedded.
write_kubeconfig() {
  (
    umask 077
    cat >"$1" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: distcache
  cluster:
    server: $APISERVER
    certificate-authority-data: $(base64 -w0 "$PKI/ca.crt")
users:
- name: $2
  user:
    client-certificate-data: $(base64 -w0 "$PKI/$2.crt")
    client-key-data: $(base64 -w0 "$PKI/$2.key")
contexts:
- name: distcache
  context:
    cluster: distcache
    user: $2
current-context: distcache
EOF
  )
}
