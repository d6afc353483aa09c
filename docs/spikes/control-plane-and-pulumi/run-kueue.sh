#!/bin/bash
# Kueue v0.19.2 manager as a host process against the test cluster (start-cluster.sh must be running).
set -euo pipefail
R=/work/spike/kueue-run; P=/work/spike/cluster/pki; K="/work/spike/testcluster/bin/kubectl --kubeconfig /work/spike/cluster/admin.kubeconfig"
mkdir -p $R/certs; cd $R/certs
if [ ! -f tls.crt ]; then
  printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' > ext
  openssl req -newkey rsa:2048 -nodes -keyout tls.key -out tls.csr -subj "/CN=kueue-webhook" 2>/dev/null
  openssl x509 -req -in tls.csr -CA $P/ca.crt -CAkey $P/ca.key -CAcreateserial -out tls.crt -days 2 -extfile ext 2>/dev/null
fi
cd $R
/work/spike/venv/bin/python prepare.py /work/main/vendor/operators/kueue-v0.19.2.yaml $P/ca.crt 29443 kueue-local.yaml
t0=$(date +%s)
$K apply --server-side -f kueue-local.yaml > apply.log 2>&1 || { tail -5 apply.log; exit 1; }
echo "manifest applied ($(grep -c . apply.log) objects) in $(( $(date +%s)-t0 ))s"
# Kueue reads its metrics serving cert from the fixed path /etc/kueue/metrics/certs when internalCertManagement is off
# (cmd/kueue/main.go): give it one through an overlay on /etc in a private mount namespace (the host's /etc is untouched).
# VisibilityOnDemand=false: its aggregated API server wants certs in /visibility and the APIServices are dropped anyway.
mkdir -p etc-upper/kueue/metrics/certs etc-work; cp certs/tls.crt certs/tls.key etc-upper/kueue/metrics/certs/
KUBECONFIG=/work/spike/cluster/admin.kubeconfig nohup unshare -m --propagation private sh -c \
  "mount -t overlay overlay -o lowerdir=/etc,upperdir=$R/etc-upper,workdir=$R/etc-work /etc && exec /work/spike/kueue/bin/kueue --config $R/config.yaml --feature-gates=VisibilityOnDemand=false" \
  > kueue.log 2>&1 & echo $! > kueue.pid
until curl -sf http://127.0.0.1:28081/readyz >/dev/null; do sleep 1; [ $(( $(date +%s)-t0 )) -gt 120 ] && { echo "kueue not ready"; tail -20 kueue.log; exit 1; }; done
echo "kueue ready after $(( $(date +%s)-t0 ))s"
$K apply --server-side -f - <<'YAML'
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: kwok}
spec:
  nodeLabels: {type: kwok}
  tolerations: [{key: kwok.x-k8s.io/node, operator: Exists, effect: NoSchedule}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: cq}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu, memory]
    flavors:
    - name: kwok
      resources: [{name: cpu, nominalQuota: "4"}, {name: memory, nominalQuota: 16Gi}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: lq, namespace: default}
spec: {clusterQueue: cq}
YAML
for j in small big; do
  cpu=1; [ $j = big ] && cpu=8
  $K apply -f - <<YAML
apiVersion: batch/v1
kind: Job
metadata: {name: $j, namespace: default, labels: {kueue.x-k8s.io/queue-name: lq}}
spec:
  parallelism: 2
  completions: 2
  template:
    spec:
      restartPolicy: Never
      containers: [{name: c, image: registry.invalid/j:1, resources: {requests: {cpu: "$cpu", memory: 1Gi}}}]
YAML
done
sleep 15
$K get workloads -A; $K get jobs,pods -o wide
$K get job small -o jsonpath='{.spec.suspend} {.spec.template.spec.nodeSelector} {.spec.template.spec.tolerations}'; echo
