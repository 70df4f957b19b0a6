# shellcheck shell=bash
# Certificates and kubeconfigs of the local cluster (sourced by up.sh after lib.sh).
# One CA signs everything; ECDSA P-256 keys because they are generated instantly.
# Fresh on every cluster-up: the state directory never outlives cluster-down.

PKI=$LK/pki

# newkey FILE
newkey() { openssl ecparam -name prime256v1 -genkey -noout -out "$1" 2>/dev/null; chmod 600 "$1"; }

# cert NAME SUBJECT USAGE [SANS]: $PKI/NAME.{key,crt} signed by the CA.
# USAGE is clientAuth, serverAuth or both comma-separated; SANS like "DNS:a,IP:1.2.3.4".
cert() {
  local name=$1 subj=$2 usage=$3 sans=${4:-} ext
  newkey "$PKI/$name.key"
  ext=$(mktemp)
  {
    echo "basicConstraints=critical,CA:FALSE"
    echo "keyUsage=critical,digitalSignature,keyEncipherment"
    echo "extendedKeyUsage=$usage"
    [[ -z $sans ]] || echo "subjectAltName=$sans"
  } >"$ext"
  openssl req -new -key "$PKI/$name.key" -subj "$subj" -out "$PKI/$name.csr" 2>/dev/null
  openssl x509 -req -in "$PKI/$name.csr" -CA "$PKI/ca.crt" -CAkey "$PKI/ca.key" -CAcreateserial \
    -days 3650 -sha256 -extfile "$ext" -out "$PKI/$name.crt" 2>/dev/null
  rm -f "$ext" "$PKI/$name.csr"
}

# kubeconfig FILE CERTNAME USER [SERVER]: a kubeconfig for the apiserver, on loopback unless
# SERVER says otherwise (a node's loopback is its own); certificates embedded so the admin
# one keeps working if copied elsewhere.
kubeconfig() {
  local file=$1 certname=$2 user=$3 server=${4:-$APISERVER_URL}
  cat >"$file" <<EOF
apiVersion: v1
kind: Config
clusters:
- name: localkube
  cluster:
    server: $server
    certificate-authority-data: $(base64 -w0 <"$PKI/ca.crt")
users:
- name: $user
  user:
    client-certificate-data: $(base64 -w0 <"$PKI/$certname.crt")
    client-key-data: $(base64 -w0 <"$PKI/$certname.key")
contexts:
- name: localkube
  context: {cluster: localkube, user: $user, namespace: default}
current-context: localkube
EOF
  chmod 600 "$file"
}

make_pki() {
  mkdir -p "$PKI" "$LK/kubeconfigs"
  newkey "$PKI/ca.key"
  openssl req -x509 -new -key "$PKI/ca.key" -subj "/CN=localkube-ca" -days 3650 -sha256 \
    -addext "basicConstraints=critical,CA:TRUE" -addext "keyUsage=critical,keyCertSign,cRLSign" \
    -out "$PKI/ca.crt" 2>/dev/null

  local d sans="IP:127.0.0.1,IP:$KUBERNETES_SVC_IP,IP:$NODE_IP,DNS:localhost"
  for d in kubernetes kubernetes.default kubernetes.default.svc "kubernetes.default.svc.$CLUSTER_DOMAIN"; do
    sans+=",DNS:$d"
  done
  cert apiserver "/CN=kube-apiserver" serverAuth "$sans"
  # The apiserver's client identity towards kubelets (logs, exec, port-forward).
  cert apiserver-kubelet-client "/O=system:masters/CN=kube-apiserver-kubelet-client" clientAuth
  cert admin "/O=system:masters/CN=localkube-admin" clientAuth
  cert controller-manager "/CN=system:kube-controller-manager" clientAuth
  cert scheduler "/CN=system:kube-scheduler" clientAuth
  cert kube-proxy "/CN=system:kube-proxy" clientAuth
  # CoreDNS and the provisioner are host processes of the cluster itself: admin rights.
  cert addons "/O=system:masters/CN=localkube-addons" clientAuth

  # ServiceAccount token signing key pair.
  newkey "$PKI/sa.key"
  openssl ec -in "$PKI/sa.key" -pubout -out "$PKI/sa.pub" 2>/dev/null

  kubeconfig "$KUBECONFIG_ADMIN" admin localkube-admin
  kubeconfig "$LK/kubeconfigs/controller-manager" controller-manager system:kube-controller-manager
  kubeconfig "$LK/kubeconfigs/scheduler" scheduler system:kube-scheduler
  kubeconfig "$LK/kubeconfigs/kube-proxy" kube-proxy system:kube-proxy
  # The nodes' kube-proxies reach the apiserver on the control plane's address.
  kubeconfig "$LK/kubeconfigs/node-kube-proxy" kube-proxy system:kube-proxy "$NODE_APISERVER_URL"
  kubeconfig "$LK/kubeconfigs/addons" addons localkube-addons
}

# node_pki NODE: the node's kubelet client certificate (the Node authorizer and NodeRestriction
# know a kubelet by it) and its kubeconfig.
node_pki() {
  cert "kubelet-$1" "/O=system:nodes/CN=system:node:$1" clientAuth
  kubeconfig "$NODES_DIR/$1/kubelet.kubeconfig" "kubelet-$1" "system:node:$1" "$NODE_APISERVER_URL"
}
