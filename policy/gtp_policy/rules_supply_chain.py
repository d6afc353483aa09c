"""Supply chain: what a production workload may run.

A production pod runs either the image this stack built and pushed itself, or an image CI built with BuildKit
attestations, signed with cosign and verified (`.github/workflows/image.yml`), listed in the stack's
`image.signedDigests` (policy fact `signedDigests`). Any other image, even one by digest from the stack's own
registry, is a violation.

How the rule tells "the stack's own build" apart:
- Once the build ran (`pulumi up`, or a preview of a stack whose image is unchanged), the build resource's
  outputs name the pushed digest: `docker:index/image:Image` `repoDigest`, or `docker:index/registryImage:
  RegistryImage` `name` + `sha256Digest`. The pod's image must equal it exactly. (Stack policies see each
  resource's final outputs: pulumi's `AnalyzeStack` is called on outputs, not inputs.)
- Before the push (a preview that builds, and the offline plan, which records inputs only) the digest is
  unknown, and so is every pod image made from it. An unknown image passes only when the pod's resource
  depends directly on one of this stack's image builds whose digest is itself still unknown: the Pulumi SDKs
  record every resource an input was computed from as a dependency (and, under the engine, per property in
  `propertyDependencies`, which the rule then reads for the property that holds the pod spec). An unknown
  from anything else (another resource's output, a stack reference) names no image build and fails.
"""
from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from typing import Any

from .graph import StackIndex, inputs
from .model import DIGEST_REF, Facts, Finding, Record, is_computed
from .rules_kubernetes import _each_container

DOCKER_IMAGE = "docker:index/image:Image"
REGISTRY_IMAGE = "docker:index/registryImage:RegistryImage"
IMAGE_BUILDS = (DOCKER_IMAGE, REGISTRY_IMAGE)


def _known(value: Any) -> str | None:
    return value if isinstance(value, str) and value and not is_computed(value) else None


def built_reference(build: Record) -> str | None:
    """`repo@sha256:<digest>` a build resource pushed, or None while it is unknown (not pushed yet)."""
    props = inputs(build)
    if build.get("type") == DOCKER_IMAGE:
        reference = _known(props.get("repoDigest"))
        return reference if reference and DIGEST_REF.match(reference) else None
    name, digest = _known(props.get("name")), _known(props.get("sha256Digest"))
    if not name or not digest:
        return None
    repository = name.split("@", 1)[0]
    last = repository.rsplit("/", 1)[-1]
    if ":" in last:  # drop the tag, keep a registry's :port
        repository = repository[: len(repository) - len(last)] + last.split(":", 1)[0]
    return f"{repository}@{digest}"


def _pending_build_dependencies(stack: StackIndex, record: Record, field: str, pending: set) -> bool:
    """Whether the property holding `field` was computed from one of this stack's not-yet-pushed builds."""
    by_property: Mapping = record.get("propertyDependencies") or {}
    top = field.split(".", 1)[0]
    if top in by_property:
        urns = set(by_property.get(top) or ())
    else:
        urns = {dep.get("urn") for dep in stack.direct_dependencies(record)}
    return bool(urns & pending)


def production_image_signed_or_own_build(stack: StackIndex, facts: Facts) -> Iterator[Finding]:
    if not facts.production:
        return
    builds = stack.of_type(*IMAGE_BUILDS)
    built = {ref for ref in map(built_reference, builds) if ref}
    pending = {b.get("urn") for b in builds if built_reference(b) is None}
    signed = set(facts.signed_digests)
    for record in stack.records:
        for path, container, _ in _each_container(record):
            field, image = f"{path}.image", container.get("image")
            if is_computed(image):
                if _pending_build_dependencies(stack, record, field, pending):
                    continue
                yield Finding(field, image, "unknown until apply and not computed from this stack's image build; "
                              "run the stack's own build or a digest listed in image.signedDigests", record=record)
            elif image not in built and image not in signed:
                allowed = sorted(built | signed)
                yield Finding(field, image, "production runs only the stack's own build or an image CI signed and "
                              f"verified (add it to image.signedDigests); allowed here: {allowed or 'none'}",
                              record=record)


# ---------------------------------------------------------------- air-gapped sites

HELM_RELEASE = "kubernetes:helm.sh/v3:Release"
CONFIG_FILE = "kubernetes:yaml/v2:ConfigFile"
SITE_COPY = re.compile(r"-site-[0-9a-f]{12}\.yaml$")
"""The name of an operator manifest copy rewritten to the site's images (components/training_operators.py
`derived_name`, `SITE_COPY_MARKER`). The vendored file and a copy that only adds the platform's priority class
(`<name>-<hash>.yaml`) both run upstream images."""


def _on_site(image: str, site: str) -> bool:
    return image.startswith(site) and len(image) > len(site) and image[len(site)] in "/@:"


def _value_images(node: Any, path: str) -> Iterator[tuple[str, Any]]:
    """Image references in chart values: a string under an `image` key, and an object with a string `repository`
    (composed with its `registry` when it has one, as the charts' templates compose them)."""
    if isinstance(node, Mapping):
        repository = node.get("repository")
        if isinstance(repository, str) and repository:
            registry = node.get("registry")
            yield (f"{path}.repository" if path else "repository",
                   f"{registry}/{repository}" if isinstance(registry, str) and registry else repository)
        for key, value in node.items():
            child = f"{path}.{key}" if path else str(key)
            if key == "image" and isinstance(value, str):
                yield child, value
            else:
                yield from _value_images(value, child)
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _value_images(value, f"{path}[{index}]")


def offline_images_from_site_registry(record: Record, facts: Facts) -> Iterator[Finding]:
    """On an air-gapped stack every image comes from the site registry: the containers the stack applies, the image
    values of its Helm releases, the training image it builds; operator manifests are applied from the copies
    rewritten to the site's images (`<manifest>-site-<hash>.yaml`), never from `vendor/` or another copy (whose
    images are upstream). A chart default the values don't override is invisible here; tests/test_mirror.py renders
    the charts and checks those."""
    site = facts.site_registry
    if not site:
        return
    reason = (f"an air-gapped stack pulls only from its site registry {site!r} "
              "(`make mirror`, docs/edge.md, 'Air-gapped site')")
    for path, container, _ in _each_container(record):
        image = container.get("image")
        if not is_computed(image) and not (isinstance(image, str) and _on_site(image, site)):
            yield Finding(f"{path}.image", image, reason)
    props = inputs(record)
    if record.get("type") == HELM_RELEASE:
        for path, image in _value_images(props.get("values") or {}, "values"):
            if not is_computed(image) and not _on_site(image, site):
                yield Finding(path, image, reason)
    elif record.get("type") == CONFIG_FILE:
        # A chart's crds/ file holds CustomResourceDefinitions only (Helm's convention for that folder: it is never
        # templated), so it runs no image (components/helm.py `pinned_release` applies them). Each object a
        # manifest holds is judged by the container check above too: the engine registers them as the
        # ConfigFile's children, and `make plan` does the same (verify/render.py `config_file_children`).
        file = props.get("file")
        if isinstance(file, str) and not SITE_COPY.search(file) and "/crds/" not in file:
            yield Finding("file", file, "this manifest (the vendored one, or a copy without site images) runs upstream "
                                        "images; an air-gapped stack applies only copies rewritten to the site "
                                        "registry, named `<manifest>-site-<hash>.yaml` (components.training_operators)")
    elif record.get("type") == DOCKER_IMAGE:
        name = props.get("imageName")
        if isinstance(name, str) and not is_computed(name) and not _on_site(name, site):
            yield Finding("imageName", name, reason)
