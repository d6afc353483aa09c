"""Installing a pinned upstream Helm chart: one way, everywhere."""

from __future__ import annotations

from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from catalog.versions import HelmChart


def pinned_release(resource_name: str, chart: HelmChart, *, release_name: str, namespace: pulumi.Input[str],
                   values: dict[str, Any], opts: pulumi.ResourceOptions, **extra: Any) -> k8s.helm.v3.Release:
    """A `helm.v3.Release` of `chart` from its vendored copy (`vendor/charts/<chart>-<version>`, a local path: no
    chart repository is contacted at `pulumi up`; `make plan` renders the same directory with `helm template`).
    `version` is recorded for review (plan diffs show bumps); helm ignores it for a local chart.

    `atomic`: a failed install or upgrade rolls back instead of leaving a half-applied release behind.
    helm.v3.Release (not v4.Chart) so the plan records chart, version, repository and the full values.
    """
    return k8s.helm.v3.Release(
        resource_name, name=release_name, chart=chart.path, version=chart.version, namespace=namespace, values=values, atomic=True, opts=opts,
        **extra)
