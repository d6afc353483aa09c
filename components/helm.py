"""Installing a pinned upstream Helm chart: one way, everywhere."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from catalog.images import CHART_IMAGES, ImageSlot
from catalog.versions import HelmChart
from conventions.images import normalized, parse


def _slot_values(slot: ImageSlot, site_ref: str) -> dict[str, str]:
    """The values object that makes `slot` render `site_ref` (`<repository>[:tag][@sha256:...]`)."""
    ref = parse(site_ref)
    tag = ref.tag or parse(slot.source).tag or ""
    registry, _, path = ref.repository.partition("/")
    if slot.style == "tag":
        return {"repository": ref.repository, "tag": f"{tag}@{ref.digest}" if ref.digest else tag}
    if slot.style == "digest":
        return {"repository": ref.repository, "tag": tag, "digest": ref.digest or ""}
    if slot.style == "registry-tag":
        return {"registry": registry, "repository": path, "tag": f"{tag}@{ref.digest}" if ref.digest else tag}
    return {"registry": registry, "repository": path, "tag": tag,
            "sha": ref.digest.removeprefix("sha256:") if ref.digest else ""}


def site_image_values(chart: str, site_images: Mapping[str, str]) -> dict[str, Any]:
    """Chart values that point every image of `chart` (catalog.images.CHART_IMAGES) at its site copy.
    `site_images`: normalised source → site reference. A slot without an entry is left as the chart has it: it is
    one the stack switches off (e.g. NFD when the cluster runs its own); the policy rule
    `offline-images-from-site-registry` and tests/test_mirror.py catch any other."""
    values: dict[str, Any] = {}
    for slot in CHART_IMAGES.get(chart, ()):
        source = normalized(slot.source)
        if source not in site_images:
            continue
        node = values
        for key in slot.values_path:
            node = node.setdefault(key, {})
        node.update(_slot_values(slot, site_images[source]))
    return values


def merged(values: Mapping[str, Any], override: Mapping[str, Any]) -> dict[str, Any]:
    """`values` with `override` merged in, key by key (as helm merges values files)."""
    result = copy.deepcopy(dict(values))
    for key, value in override.items():
        if isinstance(value, Mapping) and isinstance(result.get(key), Mapping):
            result[key] = merged(result[key], value)
        else:
            result[key] = copy.deepcopy(value)
    return result


def pinned_release(resource_name: str, chart: HelmChart, *, release_name: str, namespace: pulumi.Input[str],
                   values: dict[str, Any], opts: pulumi.ResourceOptions,
                   site_images: Mapping[str, str] | None = None, crds: Sequence[str] = (),
                   **extra: Any) -> k8s.helm.v3.Release:
    """A `helm.v3.Release` of `chart` from its vendored copy (`vendor/charts/<chart>-<version>`, a local path: no
    chart repository is contacted at `pulumi up`; `make plan` renders the same directory with `helm template`).
    `version` is recorded for review (plan diffs show bumps); helm ignores it for a local chart.

    `atomic`: a failed install or upgrade rolls back instead of leaving a half-applied release behind.
    helm.v3.Release (not v4.Chart) so the plan records chart, version, repository and the full values.

    `site_images` (an air-gapped stack's source → site copy): every image of the chart comes from the site registry.

    `crds`: the chart's (and its enabled subcharts') `crds/` files, relative to the chart directory. Helm installs a
    crds/ file once and never deletes it ("there is no support at this time for upgrading or deleting CRDs using
    Helm", helm.sh/docs/chart_best_practices/custom_resource_definitions), so `pulumi destroy` would leave those
    CRDs behind (`make up-test` found the NFD ones). Each file is applied as a `yaml.v2.ConfigFile` from the same
    vendored chart instead, which `pulumi destroy` deletes, and the release skips them (`skipCrds`) and waits for
    them. tests/test_helm_crds.py: every crds/ file of every release a plan installs is given here.
    """
    if site_images:
        values = merged(values, site_image_values(chart.chart, site_images))
    if crds:
        definitions = [k8s.yaml.v2.ConfigFile(f"{resource_name}-crds-{PurePosixPath(file).stem}",
                                              file=f"{chart.path}/{file}", opts=opts)
                       for file in crds]
        opts = pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(depends_on=definitions))
        extra = {**extra, "skip_crds": True}
    return k8s.helm.v3.Release(
        resource_name, name=release_name, chart=chart.path, version=chart.version, namespace=namespace, values=values,
        atomic=True, opts=opts, **extra)
