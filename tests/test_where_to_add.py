"""ARCHITECTURE.md's "where to add" table, measured: in a clone of the working tree, a throwaway workload kind, cluster
target, simulation check and Helm chart are added the way the table says, a stack that uses each is planned and
simulated (`python -m tools.plan`, exit 0), and the files the addition touched are counted with git.

A stack file that selects the new thing is the user's input, not part of the addition, so it lives outside the
clone's tracked files. Each addition is the smallest real one: a kind on an existing operator, a Kubernetes target
reached by a kubeconfig, a check that inspects the world, a chart copied from a vendored one under a new name.
"""

from __future__ import annotations

import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, clone_working_tree

pytestmark = pytest.mark.program

LIMITS = {"a workload kind": 2, "a cluster target": 2, "a simulation check": 2, "a Helm add-on": 4}
"""The most files each addition may touch (issue 24); ARCHITECTURE.md states the same numbers."""


def _insert_after(path: Path, anchor: str, text: str) -> None:
    """Insert `text` after the first line matching `anchor` (a regex) in `path`; the anchor must exist."""
    lines = path.read_text().splitlines(keepends=True)
    index = next(i for i, line in enumerate(lines) if re.search(anchor, line))
    lines.insert(index + 1, text)
    path.write_text("".join(lines))


def _touched(clone: Path) -> list[str]:
    """Tracked files changed and new files, relative to the clone (its base commit is the working tree)."""
    out = subprocess.run(["git", "status", "--porcelain", "--untracked-files=all"], cwd=clone, capture_output=True,
                         text=True, check=True).stdout
    return sorted(line[3:] for line in out.splitlines() if not line[3:].startswith("build/"))


def _plan(clone: Path, stack: str, edit: Callable[[dict], None], tmp_path: Path) -> subprocess.CompletedProcess:
    """Plan and simulate `stack` of the clone with its config edited by `edit`, from a stack file outside the
    clone (its outputs under tmp_path/plan)."""
    document = yaml.safe_load((clone / "stacks" / f"Pulumi.{stack}.yaml").read_text())
    edit(document["config"])
    stack_file = tmp_path / f"Pulumi.{stack}.yaml"
    stack_file.write_text(yaml.safe_dump(document, sort_keys=False))
    return subprocess.run([sys.executable, "-m", "tools.plan", "--stack", stack, "--stack-file", str(stack_file),
                           "--out", str(tmp_path / "plan"), "--quiet", "--no-cache"], cwd=clone, capture_output=True,
                          text=True, check=False, timeout=600)


def _add_kind(clone: Path) -> None:
    (clone / "workload_kinds" / "throwawayjob.py").write_text('''"""A throwaway kind on the training-operator."""

from typing import ClassVar

from workload_kinds.pytorchjob import PyTorchJobKind


class ThrowawayJobKind(PyTorchJobKind):
    name: ClassVar[str] = "throwawayjob"
''')
    init = clone / "workload_kinds" / "__init__.py"
    _insert_after(init, r"^from workload_kinds\.trainjob import", "from workload_kinds.throwawayjob import "
                                                                   "ThrowawayJobKind\n")
    _insert_after(init, r"^    TrainJobKind\(\),", "    ThrowawayJobKind(),\n")


def _add_target(clone: Path) -> None:
    (clone / "cluster_targets" / "throwaway.py").write_text('''"""A throwaway target: a Kubernetes cluster someone
else runs, reached by its kubeconfig."""

from typing import ClassVar

import pulumi

from cluster_targets.base import Cluster, ClusterTarget
from components.cluster_access import ClusterAccess, ClusterAccessArgs
from stack_config import StackConfig
from stack_config.targets import TargetTraits


class ThrowawayTarget(ClusterTarget):
    mode: ClassVar[str] = "throwaway"
    traits: ClassVar[TargetTraits] = TargetTraits(platform="kubernetes", air_gap=True, node_default_runtime="runc",
                                                  site_runtime_classes=(("nvidia", "nvidia"),))

    def node_selector(self, config: StackConfig, group: str) -> dict[str, str]:
        return dict(config.gpu_node_groups[group].node_selector) or {"throwaway/group": group}

    def tolerations(self, config: StackConfig, group: str) -> list[dict[str, str]]:
        return []

    def provision(self, config: StackConfig, aws_opts: pulumi.ResourceOptions) -> Cluster:
        kubeconfig = config.kubeconfig.get_secret_value() if config.kubeconfig else None
        access = ClusterAccess("cluster", ClusterAccessArgs(
            kubeconfig=pulumi.Output.secret(kubeconfig) if kubeconfig else None, context=config.cluster.context))
        return Cluster(target=self, provider=access.provider, aws_opts=aws_opts)
''')
    init = clone / "cluster_targets" / "__init__.py"
    _insert_after(init, r"^from cluster_targets\.swarm import", "from cluster_targets.throwaway import "
                                                                  "ThrowawayTarget\n")
    _insert_after(init, r"^    SwarmTarget\(\),", "    ThrowawayTarget(),\n")


def _add_check(clone: Path) -> None:
    (clone / "verify" / "simulate" / "throwaway.py").write_text('''"""A throwaway check: every pod has an
owner."""

from verify.simulate.model import CheckResult


def check(pods) -> CheckResult:
    result = CheckResult("throwaway: every pod has an owner")
    for pod in pods:
        result.record(bool(pod.owner))
    return result
''')
    init = clone / "verify" / "simulate" / "__init__.py"
    _insert_after(init, r"^    swarm,$", "    throwaway,\n")
    _insert_after(init, r"^CHECKS: tuple\[SimulationCheck", '    SimulationCheck("throwaway", lambda w: '
                                                              '[throwaway.check(w.pods)]),\n')


def _add_chart(clone: Path) -> None:
    """The EFA device plugin's vendored chart again as `throwaway-plugin` (the copy is data under vendor/, which
    tools/vendor.py records; not counted): its pin, its images' row, a component, one call in the GPU stage."""
    import shutil

    from catalog import versions

    chart = versions.EFA_DEVICE_PLUGIN
    copy = clone / "vendor" / "charts" / f"throwaway-plugin-{chart.version}"
    shutil.copytree(clone / "vendor" / "charts" / f"{chart.chart}-{chart.version}", copy)
    chart_yaml = copy / "Chart.yaml"
    chart_yaml.write_text(re.sub(r"(?m)^name: .*$", "name: throwaway-plugin", chart_yaml.read_text()))
    subprocess.run(["git", "add", "-A", "vendor"], cwd=clone, check=True)
    subprocess.run(["git", "-c", "user.email=t@t", "-c", "user.name=t", "commit", "--quiet", "-m", "the chart's copy"],
                   cwd=clone, check=True)
    with (clone / "catalog" / "versions.py").open("a") as pins:
        pins.write(f'THROWAWAY_PLUGIN = HelmChart("https://example.invalid/charts", "throwaway-plugin", '
                   f'"{chart.version}")\n')
    _insert_after(clone / "catalog" / "images.py", r"^EKS_ONLY_CHARTS: frozenset",
                  "EKS_ONLY_CHARTS = EKS_ONLY_CHARTS | {versions.THROWAWAY_PLUGIN.chart}\n")
    (clone / "components" / "throwaway_plugin.py").write_text('''"""A throwaway add-on: the EFA plugin's chart again."""

import pulumi

from catalog import versions
from components.efa_device_plugin import EfaDevicePluginArgs, efa_plugin_values
from components.helm import pinned_release


class ThrowawayPlugin(pulumi.ComponentResource):
    def __init__(self, name: str, args: EfaDevicePluginArgs, opts: pulumi.ResourceOptions | None = None):
        super().__init__("gtp:gpu:ThrowawayPlugin", name, None, opts)
        self.release = pinned_release(
            f"{name}-release", versions.THROWAWAY_PLUGIN, release_name="throwaway-plugin", namespace=args.namespace,
            values=efa_plugin_values(args.node_groups, args.tolerations),
            opts=pulumi.ResourceOptions(parent=self, provider=args.provider))
        self.register_outputs({})
''')
    stage = clone / "stages" / "gpu.py"
    _insert_after(stage, r"^from components.efa_device_plugin import", "from components.throwaway_plugin import "
                                                                        "ThrowawayPlugin\n")
    _insert_after(stage, r"^    gpu_plugins: list\[pulumi.Resource\] =", "    ThrowawayPlugin(\"throwaway\", "
                  "efa_plugin_args(config, cluster.provider, device_plugin_namespace))\n")


def _kind_stack(config: dict) -> None:
    for workload in config["gtp:workloads"].values():
        if workload.get("kind") == "pytorchjob":
            workload["kind"] = "throwawayjob"


def _unchanged(config: dict) -> None:
    del config


def _adopted_by_throwaway(config: dict) -> None:
    config["gtp:cluster"]["mode"] = "throwaway"


ADDITIONS: dict[str, tuple[Callable[[Path], None], str, Callable[[dict], None], str]] = {
    "a workload kind": (_add_kind, "prod", _kind_stack, "resources.json"),
    "a cluster target": (_add_target, "edge", _adopted_by_throwaway, "resources.json"),
    "a simulation check": (_add_check, "prod", _unchanged, "simulation.json"),
    "a Helm add-on": (_add_chart, "prod", _unchanged, "cluster.yaml"),
}
"""What is added, the stack planned with it, how the stack selects it, and the plan output it must show in."""
SHOWS = {"a simulation check": "throwaway: every pod has an owner", "a Helm add-on": "name: throwaway-plugin"}
"""What the plan's output must show of a check or a chart. A kind or a target is a new value of a config choice:
the stack that selects it is refused before the addition and planned after it."""


@pytest.mark.parametrize("what", sorted(ADDITIONS))
def test_an_addition_touches_no_more_files_than_the_table_says(tmp_path: Path, what: str) -> None:
    add, stack, select, output = ADDITIONS[what]
    clone = tmp_path / "clone"
    clone_working_tree(clone)
    if what not in SHOWS:
        before = _plan(clone, stack, select, tmp_path)
        assert before.returncode == 2 and "throwaway" in before.stderr and "is not allowed" in before.stderr, (
            before.stderr[-2000:])
    add(clone)
    after = _plan(clone, stack, select, tmp_path)
    assert after.returncode == 0, after.stderr[-4000:]
    if what in SHOWS:
        assert SHOWS[what] in (tmp_path / "plan" / stack / output).read_text()
    touched = _touched(clone)
    print(f"{what}: {len(touched)} files: {', '.join(touched)}")
    assert len(touched) <= LIMITS[what], touched


def test_the_architecture_table_states_the_measured_limits() -> None:
    text = (ROOT / "ARCHITECTURE.md").read_text()
    for what, limit in LIMITS.items():
        row = next((line for line in text.splitlines() if line.startswith(f"| {what} ")), None)
        assert row is not None, what
        assert f"{limit} files" in row.split("|")[1], row
