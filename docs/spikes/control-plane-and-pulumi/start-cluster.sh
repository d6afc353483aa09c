#!/bin/bash
# Start a loopback test control plane: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok (one fake
# node), then create a pod and wait for it to be Running. Usage: start-cluster.sh [stop]
# Binaries: /work/spike/testcluster/bin (k8s 1.34.12), /work/spike/etcd/bin/etcd, /work/spike/kwok/bin/kwok.
set -euo pipefail
S=/work/spike
D=${CLUSTER_DIR:-$S/cluster}
BIN=$S/testcluster/bin
ETCD=${ETCD_BIN:-$S/etcd/bin/etcd}
KWOK=$S/kwok/bin/kwok
ETCD_PORT=${ETCD_PORT:-23790}; ETCD_PEER_PORT=$((ETCD_PORT+1))
API_PORT=${API_PORT:-26443}; KCM_PORT=${KCM_PORT:-26257}; SCHED_PORT=${SCHED_PORT:-26259}; KWOK_PORT=${KWOK_PORT:-26247}
KUBECTL="$BIN/kubectl --kubeconfig $D/admin.kubeconfig"

stop() {
  for p in kwok kube-scheduler kube-controller-manager kube-apiserver etcd; do
    if [ -f "$D/$p.pid" ]; then kill "$(cat "$D/$p.pid")" 2>/dev/null || true; rm -f "$D/$p.pid"; fi
  done
}
if [ "${1:-}" = stop ]; then stop; exit 0; fi
if [ "${1:-}" = clean ]; then stop; sleep 1; rm -rf "$D"; exit 0; fi

mkdir -p "$D/pki" "$D/logs"; cd "$D/pki"
# --- PKI (openssl): one CA; apiserver serving cert; client certs per component; service-account key pair
if [ ! -f ca.crt ]; then
  openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj "/CN=spike-ca" 2>/dev/null
  openssl genrsa -out sa.key 2048 2>/dev/null; openssl rsa -in sa.key -pubout -out sa.pub 2>/dev/null
  cat > apiserver.ext <<EXT
subjectAltName=IP:127.0.0.1,IP:10.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc,DNS:kubernetes.default.svc.cluster.local
extendedKeyUsage=serverAuth
EXT
  printf 'extendedKeyUsage=clientAuth\n' > client.ext
  cert() { # name subject extfile
    openssl req -newkey rsa:2048 -nodes -keyout "$1.key" -out "$1.csr" -subj "$2" 2>/dev/null
    openssl x509 -req -in "$1.csr" -CA ca.crt -CAkey ca.key -CAcreateserial -out "$1.crt" -days 2 -extfile "$3" 2>/dev/null
  }
  cert apiserver "/CN=kube-apiserver" apiserver.ext
  cert admin "/O=system:masters/CN=spike-admin" client.ext
  cert controller-manager "/CN=system:kube-controller-manager" client.ext
  cert scheduler "/CN=system:kube-scheduler" client.ext
  cert kwok "/O=system:masters/CN=kwok" client.ext
  cert front-proxy-client "/CN=front-proxy-client" client.ext
fi
kubeconfig() { # name
  cat > "$D/$1.kubeconfig" <<KC
apiVersion: v1
kind: Config
clusters:
- name: spike
  cluster: {server: "https://127.0.0.1:$API_PORT", certificate-authority: "$D/pki/ca.crt"}
users:
- name: $1
  user: {client-certificate: "$D/pki/$1.crt", client-key: "$D/pki/$1.key"}
contexts:
- name: spike
  context: {cluster: spike, user: $1}
current-context: spike
KC
}
for n in admin controller-manager scheduler kwok; do kubeconfig $n; done
cd "$D"

t0=$(date +%s.%N)
ts() { python3 -c "import sys;print(f'{float(sys.argv[1])-float(sys.argv[2]):.1f}s')" "$(date +%s.%N)" "$t0"; }
# --- etcd (plain HTTP, loopback only)
nohup "$ETCD" --name spike --data-dir "$D/etcd-data" \
  --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster "spike=http://127.0.0.1:$ETCD_PEER_PORT" --listen-metrics-urls "" \
  --quota-backend-bytes 2147483648 --unsafe-no-fsync > logs/etcd.log 2>&1 & echo $! > etcd.pid
until curl -sf "http://127.0.0.1:$ETCD_PORT/health" >/dev/null; do sleep 0.2; done; echo "etcd healthy at $(ts)"

# --- kube-apiserver (Pod Security admission is in the default admission set)
nohup "$BIN/kube-apiserver" --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
  --bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" \
  --tls-cert-file pki/apiserver.crt --tls-private-key-file pki/apiserver.key --client-ca-file pki/ca.crt \
  --service-account-issuer https://kubernetes.default.svc.cluster.local --service-account-key-file pki/sa.pub \
  --service-account-signing-key-file pki/sa.key --service-cluster-ip-range 10.0.0.0/24 \
  --authorization-mode Node,RBAC --allow-privileged=true --cert-dir "$D/apiserver-certs" \
  --enable-admission-plugins NodeRestriction,PodSecurity --profiling=false \
  --endpoint-reconciler-type none \
  --requestheader-client-ca-file pki/ca.crt --requestheader-allowed-names front-proxy-client \
  --requestheader-username-headers X-Remote-User --requestheader-group-headers X-Remote-Group \
  --requestheader-extra-headers-prefix X-Remote-Extra- \
  --proxy-client-cert-file pki/front-proxy-client.crt --proxy-client-key-file pki/front-proxy-client.key > logs/kube-apiserver.log 2>&1 & echo $! > kube-apiserver.pid
until $KUBECTL get --raw /readyz >/dev/null 2>&1; do sleep 0.5; done; echo "apiserver ready at $(ts)"

# --- controller-manager and scheduler
nohup "$BIN/kube-controller-manager" --kubeconfig controller-manager.kubeconfig \
  --authentication-kubeconfig controller-manager.kubeconfig --authorization-kubeconfig controller-manager.kubeconfig \
  --bind-address 127.0.0.1 --secure-port "$KCM_PORT" --leader-elect=false --use-service-account-credentials=true \
  --service-account-private-key-file pki/sa.key --root-ca-file pki/ca.crt \
  --cluster-signing-cert-file pki/ca.crt --cluster-signing-key-file pki/ca.key \
  --service-cluster-ip-range 10.0.0.0/24 --cluster-name spike > logs/kube-controller-manager.log 2>&1 & echo $! > kube-controller-manager.pid
nohup "$BIN/kube-scheduler" --kubeconfig scheduler.kubeconfig \
  --authentication-kubeconfig scheduler.kubeconfig --authorization-kubeconfig scheduler.kubeconfig \
  --bind-address 127.0.0.1 --secure-port "$SCHED_PORT" --leader-elect=false > logs/kube-scheduler.log 2>&1 & echo $! > kube-scheduler.pid

# --- kwok with the upstream "fast" node and pod stages (from the kwok module at the built version)
KW=$(cd $S/kwok && . $S/env.sh && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)/kustomize/stage
{ for f in $KW/node/fast/node-initialize.yaml $KW/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml \
           $KW/pod/fast/pod-ready.yaml $KW/pod/fast/pod-complete.yaml $KW/pod/fast/pod-delete.yaml; do
    echo '---'; cat "$f"; done; } > kwok-stages.yaml
nohup "$KWOK" --config kwok-stages.yaml --kubeconfig kwok.kubeconfig --manage-all-nodes=false \
  --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake --node-lease-duration-seconds 40 \
  --cidr 10.0.1.1/24 --node-ip 10.0.1.1 --server-address "127.0.0.1:$KWOK_PORT" > logs/kwok.log 2>&1 & echo $! > kwok.pid

# --- one fake node, one pod
$KUBECTL apply -f - <<'YAML'
apiVersion: v1
kind: Node
metadata:
  name: kwok-node-0
  annotations: {kwok.x-k8s.io/node: fake, node.alpha.kubernetes.io/ttl: "0"}
  labels: {type: kwok, kubernetes.io/hostname: kwok-node-0, kubernetes.io/os: linux, kubernetes.io/arch: amd64}
spec:
  taints: [{key: kwok.x-k8s.io/node, value: fake, effect: NoSchedule}]
status:
  allocatable: {cpu: "32", memory: 256Gi, pods: "110"}
  capacity: {cpu: "32", memory: 256Gi, pods: "110"}
YAML
until [ "$($KUBECTL get node kwok-node-0 -o jsonpath='{.status.conditions[?(@.type=="Ready")].status}')" = True ]; do sleep 0.5; done
echo "node Ready at $(ts)"
until $KUBECTL -n default get serviceaccount default >/dev/null 2>&1; do sleep 0.5; done
$KUBECTL apply -f - <<'YAML'
apiVersion: v1
kind: Pod
metadata: {name: hello, namespace: default}
spec:
  nodeSelector: {type: kwok}
  tolerations: [{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}]
  containers: [{name: c, image: registry.invalid/hello:1}]
YAML
$KUBECTL -n default wait pod/hello --for=jsonpath='{.status.phase}'=Running --timeout=120s
echo "pod Running at $(ts)"
$KUBECTL get nodes -o wide; $KUBECTL get pods -A -o wide
