#!/bin/bash
# Builds the control-plane binaries one at a time, timing each (first = cold cache).
set -u
cd /work/spike/testcluster
. /work/spike/env.sh
V=v1.34.12
LD="-s -w -X k8s.io/component-base/version.gitVersion=$V -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=34 -X k8s.io/component-base/version.gitTreeState=clean -X k8s.io/client-go/pkg/version.gitVersion=$V -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=34"
mkdir -p bin logs
for c in "$@"; do
  echo "=== $c start $(date -u +%T)"
  /usr/bin/time -v nice -n 19 go build -ldflags "$LD" -o bin/$c k8s.io/kubernetes/cmd/$c > logs/$c.log 2>&1
  echo "=== $c rc=$? end $(date -u +%T)"
  grep -E "Elapsed|Maximum resident|User time|System time" logs/$c.log
  ls -l bin/$c 2>/dev/null
done
