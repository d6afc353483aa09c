"""Values only AWS, the API server, a kubelet, an operator or a site would refuse at `up`, refused at plan time.

Each rule names the key path, the value, what is allowed and the upstream source of the limit (issue 45, classes 2
and 4). The shared helpers (`aws_id_problem`, `label_key_problem`, `label_value_problem`, `host_problem`) are what
the cluster targets use for their own fields. `RULES` is registered in stack_config/rules.py `_RULES`.
"""

from __future__ import annotations

import ipaddress
import posixpath
import re
from collections.abc import Iterator

from conventions.container_paths import CONTAINER_OWN_PATHS, SYSTEM_PATHS
from conventions.images import DOMAIN_AND_PORT, REFERENCE_GRAMMAR, REPOSITORY_NAME_MAX, REPOSITORY_PATH
from conventions.names import PLATFORM_NODE_LABELS
from stack_config.derived import configured_pods
from stack_config.kinds import kind_traits
from stack_config.problems import Problem
from stack_config.schema import StackConfig
from stack_config.targets import IN_AWS, ON_KUBERNETES

# ---------------------------------------------------------------------------------------------------------
# Mount paths
# ---------------------------------------------------------------------------------------------------------

VOLUME_MOUNT_SOURCE = ("kubernetes v1.34.12 pkg/apis/core/validation/validation.go:3030,3046 "
                       "`ValidateVolumeMounts`: \"must be unique\"")


def clean_absolute(path: str) -> bool:
    """`/a/b`: absolute, no `.`/`..` component, no `//`, no trailing `/` (Go's `path.Clean` leaves it as is)."""
    return path.startswith("/") and posixpath.normpath(path) == path and not path.startswith("//")


def _within(path: str, parent: str) -> bool:
    return path == parent or path.startswith(parent.rstrip("/") + "/")


def check_mount_path(config: StackConfig) -> Iterator[Problem]:
    """The shared volume's mount path can't be one the training container already mounts or needs (the pod spec's
    /dev/shm and /tmp, the MPS pipe directory, a Swarm task's secrets, the image's workdir and home:
    conventions/container_paths.py) nor a system directory: Kubernetes refuses a second mount at the same path, and
    a mount over, inside or around one hides what the container needs there, silently."""
    path = config.storage.mount_path
    key = "storage.mountPath"
    if not path.startswith("/"):
        return  # stack_config/rules.py `_check_storage` says it must be absolute
    if not clean_absolute(path):
        yield Problem(key, f"{path!r} is not a clean absolute path (no '.', '..', '//' or trailing '/'); write "
                           f"{posixpath.normpath(path)!r}")
        return
    allowed = ("allowed: an absolute path outside " + ", ".join(CONTAINER_OWN_PATHS) + " and the system's "
               "directories (" + ", ".join(SYSTEM_PATHS) + "), e.g. '/mnt/shared'")
    for own, what in CONTAINER_OWN_PATHS.items():
        relation = ("is" if path == own else "sits inside" if _within(path, own)
                    else "contains" if _within(own, path) else None)
        if relation:
            yield Problem(key, f"{path!r} {relation} {own}, {what}: a second mount there is refused ("
                               f"{VOLUME_MOUNT_SOURCE}) or hides it; {allowed}")
            return
    for system in SYSTEM_PATHS:
        if path == system or (system != "/" and (_within(path, system) or _within(system, path))):
            yield Problem(key, f"{path!r} is or covers the system directory {system}: the volume would hide what the "
                               f"image or the container runtime keeps there; {allowed}")
            return


# ---------------------------------------------------------------------------------------------------------
# Tags
# ---------------------------------------------------------------------------------------------------------

IAM_TAGS_DOC = "https://docs.aws.amazon.com/IAM/latest/UserGuide/id_tags.html"


def check_tag_keys(config: StackConfig) -> Iterator[Problem]:
    """IAM treats tag keys case-insensitively ("tag keys are case insensitive", IAM User Guide, tagging IAM
    resources): `Team` and `team` are one key, so a role tagged with both is refused. The `gtp:` prefix itself is
    refused in any case by stack_config/rules.py `_check_tags`."""
    first: dict[str, str] = {}
    for key in config.tags:
        seen = first.setdefault(key.lower(), key)
        if seen != key:
            yield Problem(f"tags.{key}", f"{key!r} equals tags.{seen} except for case: IAM tag keys are "
                                         f"case-insensitive ({IAM_TAGS_DOC}), so the two are one key; keep one")


# ---------------------------------------------------------------------------------------------------------
# Labels: Kubernetes' grammar, the kubelet's namespaces, the platform's own
# ---------------------------------------------------------------------------------------------------------

LABEL_SOURCE = ("apimachinery v0.34.9 pkg/util/validation/validation.go:29-64 IsQualifiedName, :154-171 "
                "IsValidLabelValue")
_QUALIFIED_NAME = re.compile(r"^[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*$")
KUBELET_LABELS = ("kubernetes.io/hostname", "topology.kubernetes.io/zone", "topology.kubernetes.io/region",
                  "failure-domain.beta.kubernetes.io/zone", "failure-domain.beta.kubernetes.io/region",
                  "beta.kubernetes.io/instance-type", "node.kubernetes.io/instance-type", "kubernetes.io/os",
                  "kubernetes.io/arch", "beta.kubernetes.io/os", "beta.kubernetes.io/arch")
"""The labels under kubernetes.io a kubelet may set (k8s.io/kubelet v0.34.9 pkg/apis/well_known_labels.go:35-48)."""
KUBELET_LABEL_NAMESPACES = ("kubelet.kubernetes.io", "node.kubernetes.io")
"""...and the namespaces (and their subdomains) it may set (well_known_labels.go:50-53, :67-79 `IsKubeletLabel`)."""


def label_key_problem(key: str) -> str | None:
    """Why `key` is not a label (or taint) key: an optional DNS-subdomain prefix (<= 253) and '/', then a name of at
    most 63 characters, alphanumerics with '-', '_', '.' inside (IsQualifiedName)."""
    parts = key.split("/")
    prefix, name = (None, parts[0]) if len(parts) == 1 else (parts[0], parts[1]) if len(parts) == 2 else ("", "")
    wrong = (len(parts) > 2 or (prefix is not None and (len(prefix) > 253 or not _DNS_SUBDOMAIN.match(prefix)))
             or len(name) > 63 or not _QUALIFIED_NAME.match(name))
    if not wrong:
        return None
    return (f"{key!r} is not a label key: an optional DNS-subdomain prefix (lower case, at most 253 characters) and "
            "'/', then a name of 1..63 letters, digits, '-', '_' or '.' that starts and ends with a letter or digit, "
            f"like 'example.com/pool' ({LABEL_SOURCE})")


def label_value_problem(value: str) -> str | None:
    """Why `value` is not a label value: empty, or at most 63 characters of the qualified-name charset."""
    if value == "" or (len(value) <= 63 and _QUALIFIED_NAME.match(value)):
        return None
    return (f"{value!r} is not a label value: empty, or 1..63 letters, digits, '-', '_' or '.' that start and end "
            f"with a letter or digit ({LABEL_SOURCE})")


def _kubelet_refuses(key: str) -> bool:
    """kubernetes v1.34.12 cmd/kubelet/app/options/options.go:148-176 `ValidateKubeletFlags`: a `--node-labels` key
    under kubernetes.io or k8s.io (`isKubernetesLabel`, :176) that is not a kubelet label (`IsKubeletLabel`) stops
    the kubelet (:164 "unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels")."""
    namespace = key.split("/", 1)[0] if "/" in key else ""
    if not any(namespace == ns or namespace.endswith("." + ns) for ns in ("kubernetes.io", "k8s.io")):
        return False
    return not (key in KUBELET_LABELS or any(namespace == ns or namespace.endswith("." + ns)
                                             for ns in KUBELET_LABEL_NAMESPACES))


def check_node_labels(config: StackConfig) -> Iterator[Problem]:
    """Labels and taints of the nodes the stack creates (EKS passes a managed node group's labels to each node's
    kubelet), and the node selectors of an adopted Kubernetes cluster's groups, by Kubernetes' label grammar; a
    kubelet label outside its allowed namespaces; a label the platform sets itself."""
    creates_nodes = config.cluster.mode in IN_AWS
    for name, group in config.gpu_node_groups.items():
        path = f"gpuNodeGroups.{name}"
        for key, value in (group.labels.items() if creates_nodes else ()):
            why = label_key_problem(key) or label_value_problem(value)
            if why:
                yield Problem(f"{path}.labels.{key}", why)
            elif key in PLATFORM_NODE_LABELS:
                yield Problem(f"{path}.labels.{key}", f"{key!r} is a label the platform sets itself (node group name, "
                              "device-plugin sharing config, system role: conventions/names.py PLATFORM_NODE_LABELS); "
                              "remove it, or use a key of your own, like 'example.com/pool'")
            elif _kubelet_refuses(key):
                yield Problem(f"{path}.labels.{key}", f"{key!r}: the kubelet refuses --node-labels under kubernetes.io "
                              "and k8s.io (EKS hands a node group's labels to it, so no node of the group would "
                              "register) except the namespaces " + ", ".join(KUBELET_LABEL_NAMESPACES) + " (and "
                              "their subdomains) and " + ", ".join(KUBELET_LABELS) + "; use e.g. 'example.com/"
                              f"{key.rsplit('/', 1)[-1]}' or 'node.kubernetes.io/{key.rsplit('/', 1)[-1]}' "
                              "(kubernetes v1.34.12 cmd/kubelet/app/options/options.go:164 "
                              "`ValidateKubeletFlags`; k8s.io/kubelet v0.34.9 pkg/apis/well_known_labels.go:67-79 "
                              "`IsKubeletLabel`)")
        for key, taint in ((group.taints or {}).items() if creates_nodes else ()):
            if why := label_key_problem(key):
                yield Problem(f"{path}.taints.{key}", why)
            if why := label_value_problem(taint.value):
                yield Problem(f"{path}.taints.{key}.value", why)
        if config.cluster.mode in ON_KUBERNETES and not creates_nodes:
            for key, value in group.node_selector.items():
                if why := label_key_problem(key) or label_value_problem(value):
                    yield Problem(f"{path}.nodeSelector.{key}", why)


# ---------------------------------------------------------------------------------------------------------
# Names an operator derives from a workload's name
# ---------------------------------------------------------------------------------------------------------

NAME_MAX = 63
_WORKLOAD_NAME = re.compile(r"^[a-z]([-a-z0-9]{0,61}[a-z0-9])?$")


def check_generated_names(config: StackConfig) -> Iterator[Problem]:
    """The longest name each workload's kind derives from it (`KindTraits.generated_names`, declared beside the
    kind's code with the upstream source), at its largest replica index, fits 63 characters."""
    for name, workload in config.workloads.items():
        if not _WORKLOAD_NAME.match(name):
            continue  # stack_config/rules.py `_check_workload` says what a name must be
        max_index = configured_pods(workload) - 1
        if workload.autoscaling.mode == "scaledobject":
            max_index = max(max_index, workload.autoscaling.max_replicas - 1)
        single_pod = workload.elastic is None and workload.num_nodes == 1
        mode = workload.autoscaling.mode
        names = [(generated.longest(name, max_index), generated) for generated in kind_traits(workload.kind)
                 .generated_names if (generated.autoscaling is None or mode in generated.autoscaling)
                 and generated.single_pod in (None, single_pod)]
        if not names:
            continue
        longest, generated = max(names, key=lambda item: len(item[0]))
        if len(longest) > NAME_MAX:
            room = NAME_MAX - (len(longest) - len(name))
            yield Problem(f"workloads.{name}", f"{name!r} ({len(name)} characters) makes {generated.what} "
                          f"{longest!r}, {len(longest)} characters; at most {NAME_MAX} are allowed there (a DNS "
                          f"label; {generated.source}): use a workload name of at most {room} characters")


# ---------------------------------------------------------------------------------------------------------
# AWS resource ids, hosts, registry names
# ---------------------------------------------------------------------------------------------------------

AWS_ID_DOC = "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/resource-ids.html"


def aws_id_problem(path: str, value: str, prefix: str, what: str) -> Problem | None:
    """An EC2 resource id: its type's prefix, '-', then 8 or 17 lower-case hex digits ("a resource identifier ...
    and a hyphen followed by a combination of 8 or 17 characters", EC2 User Guide, resource IDs)."""
    if re.fullmatch(rf"{re.escape(prefix)}-(?:[0-9a-f]{{8}}|[0-9a-f]{{17}})", value):
        return None
    hint = "" if value.startswith(prefix + "-") else (
        f"; it looks like a name (a Name tag?), but the {what} id is required: look it up in the console or with "
        "`aws ec2 describe-...`")
    return Problem(path, f"{value!r} is not a {what} id ('{prefix}-' and 8 or 17 hex digits, like "
                         f"'{prefix}-0123456789abcdef0'; {AWS_ID_DOC}){hint}")


_DNS_NAME_LABEL = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?$")


def host_problem(host: str) -> bool:
    """True when `host` is neither an IP address nor a DNS name (RFC 1123 labels of at most 63, 253 in all)."""
    try:
        ipaddress.ip_address(host)
        return False
    except ValueError:
        pass
    labels = host.rstrip(".").split(".")
    return len(host) > 253 or not all(_DNS_NAME_LABEL.match(label) for label in labels)


def registry_host(domain: str) -> bool:
    """A registry `host[:port]` that Docker reads as one: the grammar's domain with a '.' or ':' or `localhost`
    (distribution/reference v0.6.0 normalize.go:126-150 `splitDockerDomain`; without one it is a Docker Hub path)."""
    return bool(DOMAIN_AND_PORT.match(domain)) and ("." in domain or ":" in domain or domain == "localhost")


def check_registry_names(config: StackConfig) -> Iterator[Problem]:
    """Registry addresses by the distribution reference grammar the Docker daemon and containerd parse them with:
    the site registry is a `host[:port]` (no scheme, no path), the mirror prefix a repository path, an existing
    registry a repository name (`host[:port]/path`, no tag or digest)."""
    image = config.image
    air_gap = image.air_gap
    grammar = f"({REFERENCE_GRAMMAR})"
    if air_gap is not None:
        if not registry_host(air_gap.site_registry):
            yield Problem("image.airGap.siteRegistry", f"{air_gap.site_registry!r} is not a registry host: "
                          "'host[:port]' with no scheme and no path, and a '.' or a port (or 'localhost'), else "
                          "Docker reads it as a Docker Hub namespace (normalize.go:126-150 `splitDockerDomain`), "
                          f"like 'registry.site.internal:5000' {grammar}")
        if not REPOSITORY_PATH.match(air_gap.prefix):
            yield Problem("image.airGap.prefix", f"{air_gap.prefix!r} is not a repository path: lower-case "
                          "components of letters and digits joined by '.', '_', '__' or '-', separated by '/', no "
                          f"leading or trailing '/', like 'mirror' or 'site/mirror' {grammar}")
    registry = image.existing_registry
    if image.registry != "existing" or not registry:
        return
    key = "image.existingRegistry"
    domain, _, path = registry.partition("/")
    if not path:
        yield Problem(key, f"{registry!r} has no repository path: write 'host[:port]/path', like "
                           f"'{registry}/trainer' {grammar}")
    elif "@" in registry or ":" in registry.rsplit("/", 1)[-1]:
        yield Problem(key, f"{registry!r} has a tag or digest: give the repository name alone, like "
                           f"'{registry.split('@')[0].rsplit(':', 1)[0]}' (the stack tags and pins what it pushes)")
    elif (not registry_host(domain) or not REPOSITORY_PATH.match(path) or len(registry) > REPOSITORY_NAME_MAX):
        yield Problem(key, f"{registry!r} is not a repository name: 'host[:port]/path' with a registry host (with a "
                           "'.' or a port, or 'localhost'; no scheme) and a lower-case path, at most "
                           f"{REPOSITORY_NAME_MAX} characters, like 'registry.example.internal:5000/trainer' {grammar}")


RULES = (
    (check_mount_path, ("storage",)),
    (check_tag_keys, ("tags",)),
    (check_node_labels, ("gpuNodeGroups", "cluster")),
    (check_generated_names, ("workloads",)),
    (check_registry_names, ("image",)),
)
"""The site rules, each with the top-level keys it reads (stack_config/rules.py `Rule`)."""
