"""Every object that would exist in the cluster after `pulumi up`, rendered offline from the vendored sources.

- `stack`: the objects the program applies directly (the plan's `manifests.yaml`);
- `chart`: each `helm.v3.Release` rendered with the real helm (v4.1.4, `make setup` installs it) from the same
  vendored chart directory and the same values the release records: `helm template <name> <chart> --namespace
  <ns> --kube-version <stack's version> --include-crds -f values.json` (no `--include-crds` when the release skips
  them), plus the Namespace a release creates, minus
  hooks that never run at `up` (delete, rollback and test hooks);
- `operator`: each operator manifest (`yaml.v2.ConfigFile`) read from its vendored file.

Helm hooks: an object annotated `helm.sh/hook` is in cluster.yaml only if it is still there after `pulumi up`
(see `exists_after_up`): post-delete/pre-delete/test/rollback hooks never are, nor are install/upgrade hooks that
helm deletes once they succeed.

Namespaced objects without a namespace get the one `helm install` / the provider would give them (the release's,
or `default`). `build/plan/<stack>/cluster.yaml` holds them all, each document preceded by a `# source:` line.
The helm processes of one stack run concurrently (a stack's releases render in a fraction of a second).
"""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from verify.helm import helm_binary
from verify.plan_record import COMPUTED, ROOT, SECRET, Plan, dicts_in

YAML_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
YAML_DUMPER = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
CONFIG_FILE = "kubernetes:yaml/v2:ConfigFile"

# Kinds without a namespace (core and the API groups the vendored sources use); everything else is namespaced.
CLUSTER_SCOPED = frozenset({
    "Namespace", "Node", "PersistentVolume", "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition",
    "PriorityClass", "StorageClass", "CSIDriver", "CSINode", "VolumeAttachment", "RuntimeClass", "IngressClass",
    "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration", "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding", "APIService", "ClusterTrainingRuntime", "ClusterQueue", "ResourceFlavor",
    "ClusterTriggerAuthentication", "NodeFeatureRule", "NodeFeatureGroup", "FlowSchema",
    "PriorityLevelConfiguration",
})


@dataclass(frozen=True)
class ClusterObject:
    source: str
    """`stack`, `chart <chart dir> release <namespace>/<name>` or `operator <file>`."""
    obj: dict[str, Any]

    @property
    def kind(self) -> str:
        return str(self.obj.get("kind"))

    @property
    def namespace(self) -> str | None:
        return (self.obj.get("metadata") or {}).get("namespace")

    @property
    def name(self) -> str:
        return str((self.obj.get("metadata") or {}).get("name"))

    def describe(self) -> str:
        namespace = self.namespace
        return f"{self.kind} {namespace + '/' if namespace else ''}{self.name} ({self.source})"


class RenderError(RuntimeError):
    pass


def _plain_values(node: Any) -> Any:
    """Release values as helm gets them at apply time: a computed value or a secret becomes a string of the
    same role (helm never sees the plan's markers)."""
    if isinstance(node, dict):
        return {key: _plain_values(value) for key, value in node.items()}
    if isinstance(node, list):
        return [_plain_values(item) for item in node]
    if node == COMPUTED:
        return "computed-at-apply"
    if node == SECRET:
        return "secret-at-apply"
    return node


def _namespaced(obj: dict[str, Any], namespace: str) -> dict[str, Any]:
    if obj.get("kind") not in CLUSTER_SCOPED:
        metadata = obj.setdefault("metadata", {})
        if not metadata.get("namespace"):
            metadata["namespace"] = namespace
    return obj


def _masked(obj: dict[str, Any]) -> dict[str, Any]:
    """Secret values never reach a file (`[secret]`, as in the plan); a pod template's `checksum/secret*`
    annotation, derived from them, is known only at apply (charts like grafana generate a password with
    `randAlphaNum` unless the release finds one in the cluster), so it is `<computed>`: cluster.yaml stays
    deterministic."""
    if obj.get("kind") == "Secret":
        for field in ("data", "stringData"):
            if isinstance(obj.get(field), dict):
                obj[field] = dict.fromkeys(obj[field], SECRET)

    for node in dicts_in(obj):
        annotations = node.get("metadata", {}).get("annotations") if isinstance(node.get("metadata"), dict) else None
        if isinstance(annotations, dict):
            for key in annotations:
                if key.startswith("checksum/secret"):
                    annotations[key] = COMPUTED
    return obj


HOOK = "helm.sh/hook"
HOOK_DELETE_POLICY = "helm.sh/hook-delete-policy"
# The events `pulumi up` runs a release's hooks for: a helm.v3.Release is created with helm's install action and
# changed with its upgrade action. Delete, rollback and test hooks run only on `pulumi destroy`, a rollback or
# `helm test`, so after `up` their objects don't exist.
UP_EVENTS = frozenset({"pre-install", "post-install", "pre-upgrade", "post-upgrade"})
# Every event helm knows (helm v4.1.4 pkg/release/v1/util/manifest_sorter.go `events`, incl. helm 2's
# `test-success`); an object naming any other one is skipped by helm altogether (`manifestFile.sort`:
# "skipping unknown hooks").
HOOK_EVENTS = UP_EVENTS | {"pre-delete", "post-delete", "pre-rollback", "post-rollback", "test", "test-success"}


def exists_after_up(obj: Mapping[str, Any]) -> bool:
    """Whether a rendered chart object exists after a successful `pulumi up`, per helm v4.1.4's hook handling:

    - not a hook (no `helm.sh/hook` annotation): a release object, yes;
    - `manifestFile.sort` (pkg/release/v1/util/manifest_sorter.go) splits the annotation on commas, trims and
      lower-cases each event; one unknown event drops the whole object (never created);
    - only delete/rollback/test events: never created by install or upgrade;
    - an install/upgrade hook: created by `Configuration.execHookWithDelayedShutdown` (pkg/action/hooks.go), then
      deleted after success by `deleteHookByPolicy(h, HookSucceeded, ...)` when its `helm.sh/hook-delete-policy`
      lists `hook-succeeded`, except a CustomResourceDefinition, which that function never deletes. The default
      policy (`hookSetDeletePolicy`) is `before-hook-creation`, which deletes only the previous copy before the
      next run: the hook's object stays, as it does with `hook-failed` after a success.
    """
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    if HOOK not in annotations:
        return True
    events = {event.strip().lower() for event in str(annotations[HOOK]).split(",")}
    if not events <= HOOK_EVENTS or not events & UP_EVENTS:
        return False
    policies = {policy.strip().lower() for policy in str(annotations.get(HOOK_DELETE_POLICY, "")).split(",")}
    return obj.get("kind") == "CustomResourceDefinition" or "hook-succeeded" not in policies


def _documents(text: str) -> Iterator[dict[str, Any]]:
    for document in yaml.load_all(text, Loader=YAML_LOADER):
        if isinstance(document, dict) and document:
            if document.get("kind", "").endswith("List") and "items" in document:
                yield from (item for item in document["items"] if item)
            else:
                yield document


def render_releases(releases: list[Mapping[str, Any]], kubernetes_version: str,
                    root: Path = ROOT) -> list[ClusterObject]:
    """Render every release (recorded Release inputs) with helm, concurrently; in the order given."""
    from verify import plan_cache

    helm = helm_binary()
    objects: list[ClusterObject] = []
    with tempfile.TemporaryDirectory(prefix="gtp-helm-") as tmp:
        running = []
        for index, release in enumerate(releases):
            values_text = json.dumps(_plain_values(release.get("values") or {}))
            # `skipCrds`: helm installs none of the charts' crds/ (the stack applies them itself, so that `pulumi
            # destroy` deletes them: components/helm.py `pinned_release`).
            include_crds = not release.get("skipCrds")
            # A render of the same chart, values and version is reused (verify/plan_cache.py): an edited stack
            # runs helm only for the releases the edit touched.
            key = plan_cache.helm_render_key(helm, root / release["chart"], release["name"], release["namespace"],
                                             kubernetes_version, values_text, include_crds)
            cached = plan_cache.load_helm_render(key)
            if cached is not None:
                running.append((release, key, cached))
                continue
            values = Path(tmp) / f"values-{index}.json"
            values.write_text(values_text)
            command = [helm, "template", release["name"], str(root / release["chart"]),
                       "--namespace", release["namespace"], "--kube-version", kubernetes_version,
                       *(["--include-crds"] if include_crds else []), "--values", str(values)]
            running.append((release, key, subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                                           text=True, cwd=tmp)))
        for release, key, process in running:
            source = f"chart {release['chart']} release {release['namespace']}/{release['name']}"
            if isinstance(process, str):
                out = process
            else:
                out, err = process.communicate()
                if process.returncode != 0:
                    raise RenderError(f"helm template failed for {source}: {err.strip()}")
                plan_cache.store_helm_render(key, out)
            if release.get("createNamespace"):
                objects.append(ClusterObject(source, {"apiVersion": "v1", "kind": "Namespace",
                                                      "metadata": {"name": release["namespace"]}}))
            objects.extend(ClusterObject(source, _masked(_namespaced(doc, release["namespace"])))
                           for doc in _documents(out) if exists_after_up(doc))
    return objects


def render_operator(path: str, root: Path = ROOT) -> list[ClusterObject]:
    return [ClusterObject(f"operator {path}", _namespaced(doc, "default")) for doc in _parsed(root / path)]


def _parsed(path: Path) -> list[dict[str, Any]]:
    """The documents of a vendored manifest. Parsing training-operator's 3.6 MB of CRDs takes ~1 s even with
    libyaml, so the parse is kept as JSON under build/cache, keyed by the file's SHA-256 (a fresh copy per call)."""
    data = path.read_bytes()
    cache = ROOT / "build" / "cache" / "manifests" / f"{hashlib.sha256(data).hexdigest()}.json"
    if cache.exists():
        return json.loads(cache.read_text())
    documents = list(_documents(data.decode()))
    cache.parent.mkdir(parents=True, exist_ok=True)
    partial = cache.with_suffix(f".{os.getpid()}.partial")
    partial.write_text(json.dumps(documents))
    os.replace(partial, cache)
    return documents


def config_file_children(config_file: Mapping[str, Any], root: Path = ROOT) -> list[dict[str, Any]]:
    """The resources a `kubernetes:yaml/v2:ConfigFile` (its record in resources.json) registers, one per object of
    its file, as records like resources.json's. The provider registers them in its Construct, which the mocks
    never call: the offline plan has none of them, and the policy pack under the real engine judged objects its
    offline run had never seen (found by `make up-test`, docs/real-pulumi.md). As pulumi-kubernetes v4.25.0
    registers them: named `<prefix>:<namespace>/<name>` (`<prefix>:<name>` without a namespace), the prefix
    defaulting to the ConfigFile's name (provider/pkg/provider/yaml/v2/yaml.go:296-304 `register`,
    configfile.go:81-88), typed `kubernetes:<group>/<version>:<Kind>` (`core` for the core group), parented to the
    ConfigFile with its provider; a namespaced object without a namespace gets the provider's default one
    (yaml.go:169-175), a Secret's data and stringData are secret (yaml.go:332-338), and `skipAwait` annotates each
    object (yaml.go:306-323)."""
    inputs = config_file["inputs"]
    prefix = inputs.get("resourcePrefix") or config_file["urn"].rsplit("::", 1)[1]
    stack, project, qualified = config_file["urn"].split("::")[:3]
    records = []
    for document in _parsed(root / inputs["file"]):
        document = _namespaced(document, "default")  # the provider's default: the stack's providers set none
        metadata = document.get("metadata") or {}
        name = f"{metadata['namespace']}/{metadata['name']}" if metadata.get("namespace") else metadata["name"]
        group_version = document["apiVersion"] if "/" in document["apiVersion"] else f"core/{document['apiVersion']}"
        type_ = f"kubernetes:{group_version}:{document['kind']}"
        if inputs.get("skipAwait") is True:
            metadata = {**metadata, "annotations": {**(metadata.get("annotations") or {}),
                                                    "pulumi.com/skipAwait": "true"}}
            document = {**document, "metadata": metadata}
        if document["apiVersion"] == "v1" and document["kind"] == "Secret":
            document = {key: SECRET if key in ("data", "stringData") else value for key, value in document.items()}
        records.append({
            "urn": f"{stack}::{project}::{qualified}${type_}::{prefix}:{name}", "type": type_,
            "name": f"{prefix}:{name}", "custom": True, "parent": config_file["urn"],
            "provider": config_file["provider"],
            "dependsOn": [], "options": {"protect": False, "retainOnDelete": False, "deleteBeforeReplace": False,
                                         "ignoreChanges": []},
            "inputs": document,
        })
    return records


def registered(resources: Iterable[Mapping[str, Any]], root: Path = ROOT) -> list[dict[str, Any]]:
    """What the engine registers for a plan's resources (resources.json records): the records, and after them the
    objects each ConfigFile registers (`config_file_children`). The policy pack and `make up-test`'s mock-vs-real
    comparison read this."""
    records = [dict(resource) for resource in resources]
    return records + [child for record in records if record["type"] == CONFIG_FILE
                      for child in config_file_children(record, root)]


def render_cluster(plan: Plan, root: Path = ROOT) -> list[ClusterObject]:
    """Every object of the stack's cluster: stack objects, then releases and operators in plan (URN) order."""
    objects = [ClusterObject("stack", obj) for obj in plan.kubernetes_objects()]
    if not plan.by_type(HELM_RELEASE) and not plan.by_type(CONFIG_FILE):
        return objects
    releases = [resource.inputs for resource in plan.by_type(HELM_RELEASE)]
    # helm runs in subprocesses: parse the (large) operator manifests meanwhile instead of after.
    with ThreadPoolExecutor(max_workers=1) as pool:
        charts = pool.submit(render_releases, releases, plan.config.kubernetes_version, root) if releases else None
        operators = [item for resource in plan.by_type(CONFIG_FILE)
                     for item in render_operator(resource.inputs["file"], root)]
        objects += charts.result() if charts is not None else []
    return objects + operators


def dump(objects: Iterable[ClusterObject]) -> str:
    """`cluster.yaml`: one document per object, each preceded by its `# source:` line."""
    parts = []
    for item in objects:
        body = yaml.dump(item.obj, Dumper=YAML_DUMPER, sort_keys=False, width=120, default_flow_style=False)
        parts.append(f"# source: {item.source}\n{body}")
    return "---\n".join(parts)


def load(text: str) -> list[ClusterObject]:
    """Read `cluster.yaml` back (sources from the comment lines)."""
    objects = []
    for chunk in text.split("\n---\n") if text else []:
        chunk = chunk.removeprefix("---\n")
        first, _, body = chunk.partition("\n")
        if not first.startswith("# source: "):
            raise ValueError(f"cluster.yaml document without a '# source:' line: {first[:80]!r}")
        objects.append(ClusterObject(first.removeprefix("# source: "), yaml.load(body, Loader=YAML_LOADER)))
    return objects


def by_source(objects: Iterable[ClusterObject]) -> dict[str, int]:
    """How many objects each kind of source contributes (`stack`, `chart`, `operator`)."""
    counts: dict[str, int] = {}
    for item in objects:
        key = item.source.split(" ", 1)[0]
        counts[key] = counts.get(key, 0) + 1
    return counts
