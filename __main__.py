"""GPU training platform: wiring only.

Load the stack's typed config once, then build the stages in dependency order and export what users need.
Everything a stack does differently is data in `stacks/Pulumi.<stack>.yaml`; each stage (`stages/`) is the only
reader of the config for its part. See ARCHITECTURE.md.
"""

from stages import build_cluster, build_gpu, build_image, build_workloads, export_outputs, load_stack_config

config = load_stack_config()
cluster = build_cluster(config)  # network, EKS and node groups, or an existing cluster; the Kubernetes provider
image = build_image(config, cluster)  # the training image, by digest
gpu = build_gpu(config, cluster, image.image_ref)  # device plugins, metrics, the readiness gate
workloads = build_workloads(config, cluster, image.image_ref, gpu)  # operators, namespace, storage, the job
export_outputs(config, cluster, image.image_ref, workloads)
