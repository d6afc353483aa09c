import pulumi
import pulumi_kubernetes as k8s

cfg = pulumi.Config()
prov = k8s.Provider("test-cluster", kubeconfig=open("/work/spike/cluster/admin.kubeconfig").read())
opts = pulumi.ResourceOptions(provider=prov)
ns = k8s.core.v1.Namespace("smoke", metadata={"name": "smoke", "labels": {"pod-security.kubernetes.io/enforce": "baseline"}}, opts=opts)
dep = k8s.apps.v1.Deployment(
    "web",
    metadata={"name": "web", "namespace": ns.metadata["name"]},
    spec={
        "replicas": int(cfg.get("replicas") or 2),
        "selector": {"matchLabels": {"app": "web"}},
        "template": {
            "metadata": {"labels": {"app": "web"}},
            "spec": {
                "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}],
                "containers": [{"name": "web", "image": "registry.invalid/web:1"}],
            },
        },
    },
    opts=opts,
)
pulumi.export("ready", dep.status["ready_replicas"])
