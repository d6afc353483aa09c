#!/bin/bash
# Pulumi CLI v3.259.0 + language host + pulumi-resource-kubernetes v4.32.0 (ambient, on PATH) against the test cluster.
set -x
export PATH=/work/spike/pulumi/bin:$PATH PULUMI_HOME=/work/spike/pulumi-home PULUMI_CONFIG_PASSPHRASE=spike \
  PULUMI_SKIP_UPDATE_CHECK=true PULUMI_DIY_BACKEND_URL= PULUMI_BACKEND_URL=file:///work/spike/pulumi-state
cd /work/spike/pulumi-smoke
pulumi stack select dev --create --non-interactive || exit 1
time pulumi preview --non-interactive || exit 1
time pulumi up --yes --non-interactive --skip-preview || exit 1
time pulumi up --yes --non-interactive --skip-preview --expect-no-changes; echo "second up rc=$?"
pulumi config set replicas 3
time pulumi preview --non-interactive --diff
time pulumi up --yes --non-interactive --skip-preview
time pulumi destroy --yes --non-interactive --skip-preview; echo "destroy rc=$?"
