"""A compliant gtp stack as plain records (the offline plan's format), and helpers to break it."""
from __future__ import annotations

import copy
import json
from typing import Any

COMPUTED = "<computed>"
REGISTRY = "123456789012.dkr.ecr.us-east-1.amazonaws.com/gtp-trainer"
IMAGE = REGISTRY + "@sha256:" + "a" * 64
REQUIRED_TAGS = ["gtp:stack", "gtp:project", "gtp:lifecycle"]
MPS_CONFIG = ("version: v1\nsharing:\n  mps:\n    renameByDefault: true\n    resources:\n"
              "      - name: nvidia.com/gpu\n        replicas: 4\n")


def facts(kind: str = "dev", **overrides: Any) -> dict:
    base = {
        "dev": {"stack": "dev", "ephemeral": False, "production": False, "signedDigests": []},
        # The compliant production stack runs an image CI signed (rules_supply_chain).
        "prod": {"stack": "prod", "ephemeral": False, "production": True, "signedDigests": [IMAGE]},
        "bench": {"stack": "bench-a", "ephemeral": True, "production": False, "signedDigests": []},
        # An air-gapped stack whose registry is the site registry (rules_supply_chain offline-images-...).
        "offline": {"stack": "edge", "ephemeral": False, "production": False, "signedDigests": [],
                    "siteRegistry": REGISTRY.split("/", 1)[0]},
    }[kind]
    return {**base, "registry": REGISTRY, "requiredTags": list(REQUIRED_TAGS), **overrides}


def urn(stack: str, type_: str, name: str, parent_type: str | None = None) -> str:
    qualified = f"{parent_type}${type_}" if parent_type else type_
    return f"urn:pulumi:{stack}::gtp::{qualified}::{name}"


def record(stack: str, type_: str, name: str, inputs: dict, *, custom: bool = True, parent: str | None = None,
           provider: str | None = None, depends_on: tuple = (), protect: bool = False) -> dict:
    return {
        "urn": urn(stack, type_, name), "type": type_, "name": name, "custom": custom, "parent": parent,
        "provider": provider, "dependsOn": list(depends_on),
        "options": {"protect": protect, "retainOnDelete": False, "deleteBeforeReplace": False, "ignoreChanges": []},
        "inputs": inputs,
    }


def container(name: str = "pytorch", resource: str = "nvidia.com/gpu", image: str = IMAGE) -> dict:
    limits = {"cpu": "4", "memory": "16Gi", resource: "1"}
    return {
        "name": name, "image": image, "command": ["torchrun", "--nproc-per-node=1", "-m", "trainer.train"],
        "resources": {"requests": dict(limits), "limits": dict(limits)},
        "securityContext": {"runAsNonRoot": True, "readOnlyRootFilesystem": True,
                            "allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
    }


def pod_template(resource: str = "nvidia.com/gpu") -> dict:
    return {"metadata": {"labels": {"app": "trainer"}}, "spec": {
        "securityContext": {"runAsNonRoot": True, "runAsUser": 1000.0, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container(resource=resource)],
        "volumes": [{"name": "scratch", "emptyDir": {}}],
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Equal", "value": "true", "effect": "NoSchedule"}],
    }}


def tags(stack: str, ephemeral: bool) -> dict:
    values = {"gtp:stack": stack, "gtp:project": "gtp", "gtp:lifecycle": "ephemeral" if ephemeral else "persistent"}
    if ephemeral:
        values.update({"gtp:ttl-hours": "6", "gtp:expires-at": "2030-01-01T00:00:00Z"})
    return values


def compliant_stack(kind: str = "dev") -> list[dict]:
    f = facts(kind)
    stack, ephemeral, production = f["stack"], f["ephemeral"], f["production"]
    n = lambda suffix: f"{stack}-{suffix}"  # noqa: E731
    r = lambda *a, **k: record(stack, *a, **k)  # noqa: E731
    aws = r("pulumi:providers:aws", n("aws"), {"region": "us-east-1", "defaultTags": {"tags": tags(stack, ephemeral)}})
    key = r("aws:kms/key:Key", n("secrets-key"), {"enableKeyRotation": True, "deletionWindowInDays": 7.0},
            provider=aws["urn"], protect=production)
    cluster_component = r("gtp:cluster:EksCluster", n("cluster"), {}, custom=False)
    cluster = r("aws:eks/cluster:Cluster", n("cluster"), {
        "vpcConfig": {"endpointPublicAccess": not production, "endpointPrivateAccess": True,
                      "subnetIds": [COMPUTED], **({} if production else {"publicAccessCidrs": ["203.0.113.0/24"]})},
        "encryptionConfig": {"provider": {"keyArn": COMPUTED}, "resources": ["secrets"]},
        "enabledClusterLogTypes": ["api", "audit", "authenticator", "controllerManager", "scheduler"],
        "accessConfig": {"authenticationMode": "API", "bootstrapClusterCreatorAdminPermissions": False},
        "roleArn": COMPUTED,
    }, parent=cluster_component["urn"], provider=aws["urn"], depends_on=[key["urn"]], protect=production)
    access_entry = r("aws:eks/accessEntry:AccessEntry", n("deployer-access"),
                     {"clusterName": COMPUTED, "principalArn": "arn:aws:iam::123456789012:role/deployer"},
                     parent=cluster_component["urn"], provider=aws["urn"], depends_on=[cluster["urn"]])
    subnet = r("aws:ec2/subnet:Subnet", n("private-a"), {"mapPublicIpOnLaunch": False, "cidrBlock": "10.0.0.0/19",
                                                         "vpcId": COMPUTED}, provider=aws["urn"])
    public_subnet = r("aws:ec2/subnet:Subnet", n("public-a"), {"mapPublicIpOnLaunch": True,
                                                               "cidrBlock": "10.0.96.0/24", "vpcId": COMPUTED},
                      provider=aws["urn"])
    template = r("aws:ec2/launchTemplate:LaunchTemplate", n("gpu-lt"), {
        "metadataOptions": {"httpTokens": "required", "httpPutResponseHopLimit": 1.0, "httpEndpoint": "enabled"},
        "blockDeviceMappings": [{"deviceName": "/dev/xvda",
                                 "ebs": {"encrypted": "true", "volumeSize": 200.0, "volumeType": "gp3"}}],
        "networkInterfaces": [{"deviceIndex": 0.0, "associatePublicIpAddress": "false"}],
        "tagSpecifications": [{"resourceType": "instance", "tags": tags(stack, ephemeral)}],
    }, provider=aws["urn"])
    node_role = r("aws:iam/role:Role", n("gpu-node-role"), {"assumeRolePolicy": json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "ec2.amazonaws.com"},
                                                "Action": "sts:AssumeRole"}]})}, provider=aws["urn"])
    node_policy = r("aws:iam/rolePolicy:RolePolicy", n("gpu-node-ecr-pull"), {"role": COMPUTED, "policy": json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Resource": "*",
                                                "Action": ["ecr:GetAuthorizationToken", "ecr:BatchGetImage"]}]})},
                    provider=aws["urn"], depends_on=[node_role["urn"]])
    node_group = r("aws:eks/nodeGroup:NodeGroup", n("gpu"), {
        "amiType": "AL2023_x86_64_NVIDIA", "instanceTypes": ["g5.xlarge"], "capacityType": "SPOT",
        "taints": [{"key": "nvidia.com/gpu", "value": "true", "effect": "NO_SCHEDULE"}],
        "labels": {"nvidia.com/gpu.present": "true"}, "launchTemplate": {"id": COMPUTED, "version": COMPUTED},
        "subnetIds": [COMPUTED], "nodeRoleArn": COMPUTED,
        "scalingConfig": {"minSize": 0.0, "maxSize": 2.0, "desiredSize": 0.0},
        "nodeRepairConfig": {"enabled": True},
    }, parent=cluster_component["urn"], provider=aws["urn"],
        depends_on=[subnet["urn"], template["urn"], node_role["urn"]])
    monitoring_agent = r("aws:eks/addon:Addon", n("eks-node-monitoring-agent"), {
        "clusterName": COMPUTED, "addonName": "eks-node-monitoring-agent", "resolveConflictsOnCreate": "OVERWRITE"},
        parent=cluster_component["urn"], provider=aws["urn"], depends_on=[cluster["urn"]])
    training_role = r("aws:iam/role:Role", n("trainer-pod-role"), {"assumeRolePolicy": json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Principal": {"Service": "pods.eks.amazonaws.com"},
                                                "Action": ["sts:AssumeRole", "sts:TagSession"]}]})},
                      provider=aws["urn"])
    training_policy = r("aws:iam/policy:Policy", n("trainer-s3"), {"policy": json.dumps({
        "Version": "2012-10-17", "Statement": [{"Effect": "Allow", "Action": ["s3:GetObject", "s3:PutObject"],
                                                "Resource": "arn:aws:s3:::gtp-results/*"}]})}, provider=aws["urn"])
    attachment = r("aws:iam/rolePolicyAttachment:RolePolicyAttachment", n("trainer-s3-attach"),
                   {"role": COMPUTED, "policyArn": COMPUTED}, provider=aws["urn"],
                   depends_on=[training_role["urn"], training_policy["urn"]])
    association = r("aws:eks/podIdentityAssociation:PodIdentityAssociation", n("trainer-pod-identity"), {
        "clusterName": COMPUTED, "namespace": "training", "serviceAccount": "trainer", "roleArn": COMPUTED},
        provider=aws["urn"], depends_on=[training_role["urn"], cluster["urn"]])
    irsa_role = r("aws:iam/role:Role", n("keda-operator"), {"assumeRolePolicy": json.dumps({
        "Version": "2012-10-17", "Statement": [{
            "Effect": "Allow", "Action": "sts:AssumeRoleWithWebIdentity",
            "Principal": {"Federated": "arn:aws:iam::123456789012:oidc-provider/oidc.eks.example/id/X"},
            "Condition": {"StringEquals": {"oidc.eks.example/id/X:sub": "system:serviceaccount:keda:keda-operator",
                                           "oidc.eks.example/id/X:aud": "sts.amazonaws.com"}}}]})},
        provider=aws["urn"])
    repository = r("aws:ecr/repository:Repository", n("trainer"), {
        "name": "gtp-trainer", "imageScanningConfiguration": {"scanOnPush": True}, "imageTagMutability": "IMMUTABLE",
        "encryptionConfigurations": [{"encryptionType": "KMS", "kmsKey": COMPUTED}], "forceDelete": ephemeral},
        provider=aws["urn"], protect=production)
    lifecycle = r("aws:ecr/lifecyclePolicy:LifecyclePolicy", n("trainer-lifecycle"),
                  {"repository": COMPUTED, "policy": "{\"rules\": []}"}, provider=aws["urn"],
                  depends_on=[repository["urn"]])
    repository_policy = r("aws:ecr/repositoryPolicy:RepositoryPolicy", n("trainer-pull"), {
        "repository": COMPUTED, "policy": json.dumps({"Version": "2012-10-17", "Statement": [{
            "Effect": "Allow", "Principal": {"AWS": "arn:aws:iam::123456789012:root"},
            "Action": ["ecr:BatchGetImage"]}]})}, provider=aws["urn"], depends_on=[repository["urn"]])
    bucket = r("aws:s3/bucket:Bucket", n("results"), {"forceDestroy": ephemeral}, provider=aws["urn"],
               protect=production)
    k8s = r("pulumi:providers:kubernetes", n("k8s"), {"kubeconfig": "[secret]"},
            depends_on=[cluster_component["urn"], node_group["urn"]])
    kr = lambda *a, **k: r(*a, provider=k8s["urn"], **k)  # noqa: E731
    plugin_ns = kr("kubernetes:core/v1:Namespace", n("nvidia-device-plugin"), {"metadata": {
        "name": "nvidia-device-plugin", "labels": {"pod-security.kubernetes.io/enforce": "privileged"}}})
    training_ns = kr("kubernetes:core/v1:Namespace", n("training"), {"metadata": {
        "name": "training", "labels": {"pod-security.kubernetes.io/enforce": "restricted"}}})
    device_plugin = kr("kubernetes:helm.sh/v3:Release", n("nvidia-device-plugin"), {
        "chart": "vendor/charts/nvidia-device-plugin-0.20.0", "version": "0.20.0", "namespace": "nvidia-device-plugin",
        "values": {"gfd": {"enabled": True}, "config": {"map": {"default": MPS_CONFIG}, "default": "default"}}},
        depends_on=[plugin_ns["urn"]])
    operators = r("gtp:operators:TrainingOperators", n("operators"), {}, custom=False)
    operator_file = ("build/offline/edge/training-operator-v1.9.4-site-0123456789ab.yaml" if f.get("siteRegistry")
                     else "vendor/operators/training-operator-v1.9.4.yaml")
    training_operator = kr("kubernetes:yaml/v2:ConfigFile", n("training-operator"),
                           {"file": operator_file}, custom=False, parent=operators["urn"])
    dlrover = kr("kubernetes:helm.sh/v3:Release", n("dlrover"), {"chart": "dlrover", "namespace": "dlrover"},
                 parent=operators["urn"])
    keda = kr("kubernetes:helm.sh/v3:Release", n("keda"), {"chart": "keda", "version": "2.20.2",
                                                           "namespace": "keda"}, parent=operators["urn"])
    trainer = kr("kubernetes:yaml/v2:ConfigFile", n("trainer"), {"file": (
        "build/offline/edge/kubeflow-trainer-v2.3.0-site-0123456789ab.yaml" if f.get("siteRegistry")
        else "vendor/operators/kubeflow-trainer-v2.3.0.yaml")},
                 custom=False, parent=operators["urn"])
    workload = r("gtp:workload:TrainingWorkload", n("workload"), {}, custom=False, depends_on=[operators["urn"]])
    node = container("node", "nvidia.com/gpu")
    node["resources"]["requests"]["vpc.amazonaws.com/efa"] = node["resources"]["limits"]["vpc.amazonaws.com/efa"] = "1"
    runtime = kr("kubernetes:trainer.kubeflow.org/v1alpha1:ClusterTrainingRuntime", n("trainjob-runtime"), {
        "metadata": {"name": "training-torch"}, "spec": {"mlPolicy": {"numNodes": 1.0, "torch": {}}, "template": {
            "spec": {"replicatedJobs": [{"name": "node", "template": {"spec": {"template": {"spec": {
                **pod_template()["spec"], "containers": [node]}}}}}]}}}}, depends_on=[trainer["urn"]])
    train_job = kr("kubernetes:trainer.kubeflow.org/v1alpha1:TrainJob", n("trainjob"), {
        "metadata": {"name": "tj", "namespace": "training"},
        "spec": {"runtimeRef": {"name": "training-torch"}, "trainer": {
            "numNodes": 2.0, "numProcPerNode": 1.0, "resourcesPerNode": copy.deepcopy(node["resources"])}}},
        depends_on=[trainer["urn"], runtime["urn"]])
    pytorch_job = kr("kubernetes:kubeflow.org/v1:PyTorchJob", n("pytorchjob"), {
        "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "metadata": {"name": "train", "namespace": "training"},
        "spec": {"nprocPerNode": "1", "pytorchReplicaSpecs": {
            "Master": {"replicas": 1.0, "restartPolicy": "OnFailure", "template": pod_template()},
            "Worker": {"replicas": 1.0, "restartPolicy": "OnFailure", "template": pod_template()}}}},
        parent=workload["urn"])
    elastic_job = kr("kubernetes:elastic.iml.github.io/v1alpha1:ElasticJob", n("elasticjob"), {
        "metadata": {"name": "elastic", "namespace": "training"},
        "spec": {"replicaSpecs": {"worker": {"replicas": 1.0, "template": pod_template("nvidia.com/gpu.shared")}}}},
        depends_on=[dlrover["urn"]])
    scaled_job = kr("kubernetes:keda.sh/v1alpha1:ScaledJob", n("scaledjob"), {
        "metadata": {"name": "bench", "namespace": "training"},
        "spec": {"jobTargetRef": {"template": pod_template("nvidia.com/gpu.shared")}}}, parent=workload["urn"])
    job = kr("kubernetes:batch/v1:Job", n("smoke"), {"metadata": {"name": "smoke", "namespace": "training"},
                                                     "spec": {"template": pod_template()}})
    service = kr("kubernetes:core/v1:Service", n("metrics"), {"metadata": {"namespace": "training"},
                                                              "spec": {"type": "ClusterIP", "ports": [{"port": 80.0}]}})
    return copy.deepcopy([aws, key, cluster_component, cluster, access_entry, subnet, public_subnet, template,
                          node_role, node_policy, node_group, monitoring_agent, training_role, training_policy,
                          attachment, association, irsa_role, repository, lifecycle, repository_policy, bucket, k8s,
                          plugin_ns, training_ns, device_plugin, operators, training_operator, dlrover, keda, trainer,
                          workload, pytorch_job, elastic_job, scaled_job, job, service, runtime, train_job])


def find(records: list[dict], suffix: str) -> dict:
    matches = [r for r in records if r["name"].endswith(suffix)]
    if len(matches) > 1:  # a component and its main resource share a name; the resource is meant
        matches = [r for r in matches if r["custom"]]
    assert len(matches) == 1, f"{suffix}: {[r['name'] for r in matches]}"
    return matches[0]


def set_path(data: Any, path: list, value: Any) -> None:
    """Sets data[path...] = value; a value of DELETE removes the key."""
    for key in path[:-1]:
        data = data[key]
    if value is DELETE:
        del data[path[-1]]
    else:
        data[path[-1]] = value


DELETE = object()
