"""The real Pulumi CLI and provider plugins, built from their Go modules, laid out where the CLI looks for them.

A `PULUMI_HOME` per run (under the run's state folder): `bin/pulumi` (the CLI), `plugins/resource-kubernetes-v<ver>/`
(the provider, installed as `pulumi plugin install` leaves it: the folder name is how the engine finds a plugin of
a version, sdk/go/common/workspace/plugins.go `getPluginInfoAndPath` at v3.274.0), and `policy-pack/run` (the
policy pack's runner: POLICY_RUNNER). The state is a local file backend: no Pulumi service, no account.
"""

from __future__ import annotations

import hashlib
import os
import shlex
from pathlib import Path

from catalog import versions
from tools.cluster_test import build

PASSPHRASE = "gtp-up-test"
"""The passphrase secrets provider's key for the test stacks' state (throwaway stacks, local files)."""

POLICY_RUNNER = """#!/bin/sh
# Runs the project's policy pack for the Pulumi CLI (written by tools/up_test/pulumi_home.py).
# `pulumi preview --policy-pack <folder>` runs a pack through its runtime's language plugin (`RunPlugin`), and no
# `pulumi-language-python` is obtainable here (docs/real-pulumi.md). Given a *file*, the CLI executes it as the
# analyzer plugin, with the engine's address as its argument and the PulumiPolicy.yaml beside it as the pack's
# project (pkg/v3 resource/plugin/analyzer_plugin.go:107-121 NewPolicyAnalyzer, resource/plugin/plugin.go:530-609
# at v3.274.0). The analyzer is the Python SDK's own `pulumi.policy` entry point (engine address, pack folder),
# running the pack's __main__.py with the project's virtualenv, as PulumiPolicy.yaml's `virtualenv` says.
exec {python} -u -m pulumi.policy "$1" {pack}
"""


def plugin_folder(home: Path) -> Path:
    return home / "plugins" / f"resource-kubernetes-v{versions.PULUMI_KUBERNETES_PROVIDER}"


def install(home: Path) -> dict[str, Path]:
    """Lay out `home` with the built CLI and provider (run `python -m tools.cluster_test build` first); name →
    installed path."""
    built = build.located(["pulumi", "pulumi-resource-kubernetes"])
    (home / "bin").mkdir(parents=True, exist_ok=True)
    cli = home / "bin" / "pulumi"
    cli.unlink(missing_ok=True)
    cli.symlink_to(built["pulumi"])
    folder = plugin_folder(home)
    folder.mkdir(parents=True, exist_ok=True)
    provider = folder / "pulumi-resource-kubernetes"
    provider.unlink(missing_ok=True)
    provider.symlink_to(built["pulumi-resource-kubernetes"])
    return {"pulumi": cli, "pulumi-resource-kubernetes": provider}


def policy_runner(home: Path, pack: Path, python: Path) -> Path:
    """The executable `pulumi preview --policy-pack` is given for the project's pack `pack` (see POLICY_RUNNER)."""
    folder = home / "policy-pack"
    folder.mkdir(parents=True, exist_ok=True)
    manifest = folder / "PulumiPolicy.yaml"
    manifest.unlink(missing_ok=True)
    manifest.symlink_to(pack / "PulumiPolicy.yaml")
    runner = folder / "run"
    runner.write_text(POLICY_RUNNER.format(python=shlex.quote(str(python)), pack=shlex.quote(str(pack))))
    runner.chmod(0o755)
    return runner


def environment(home: Path, backend: Path) -> dict[str, str]:
    """What every CLI run gets: its own home and state, no update check, nothing from the network."""
    return {
        "PULUMI_HOME": str(home),
        "PULUMI_BACKEND_URL": f"file://{backend}",
        "PULUMI_CONFIG_PASSPHRASE": PASSPHRASE,
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION": "true",
        "PATH": f"{home / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
    }


def checksums(paths: dict[str, Path]) -> dict[str, str]:
    """sha256 of each built binary (what `make up-test` prints and records)."""
    out = {}
    for name, path in sorted(paths.items()):
        with Path(os.path.realpath(path)).open("rb") as data:
            out[name] = hashlib.file_digest(data, "sha256").hexdigest()
    return out
