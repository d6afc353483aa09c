"""The engine harness and image checks without an engine: what they decide from files and arguments alone
(tests/engine runs them against the real Docker Engine)."""

from __future__ import annotations

import hashlib
import subprocess
from pathlib import Path

import pytest

from tools import engine, image_checks, mirror


def _pem(body_lines: list[str]) -> str:
    return "-----BEGIN CERTIFICATE-----\n" + "\n".join(body_lines) + "\n-----END CERTIFICATE-----\n"


def test_distinctive_certificates_are_those_the_base_lacks(tmp_path: Path) -> None:
    public = _pem(["AAAA", "BBBB", "public-root-line-3", "CCCC"])
    proxy = _pem(["DDDD", "EEEE", "proxy-ca-line-3", "FFFF"])
    bundle = tmp_path / "bundle.pem"
    bundle.write_text(public + proxy)
    found = image_checks.distinctive_certificates(bundle, known=public.encode())
    assert found == {"CA bundle certificate #1": b"proxy-ca-line-3"}


def test_host_ca_bundle_prefers_pip_cert(tmp_path: Path) -> None:
    bundle = tmp_path / "ca.pem"
    bundle.write_text("x")
    assert engine.host_ca_bundle({"PIP_CERT": str(bundle)}) == bundle
    assert engine.host_ca_bundle({"PIP_CERT": str(tmp_path / "missing.pem"), "SSL_CERT_FILE": str(bundle)}) == bundle


def test_engine_root_follows_the_environment(tmp_path: Path) -> None:
    assert engine.engine_root({"GTP_ENGINE_ROOT": str(tmp_path)}) == tmp_path.resolve()
    assert engine.engine_root({}) == engine.DEFAULT_ENGINE_ROOT.resolve()


def test_mounts_under_ignores_siblings_with_a_common_prefix(tmp_path: Path) -> None:
    mounts = tmp_path / "mounts"
    root = tmp_path / "engine"
    mounts.write_text(f"overlay {root}/data/overlay2/x/merged overlay rw 0 0\n"
                      f"overlay {root}-other/y overlay rw 0 0\n"
                      f"tmpfs {root}/exec tmpfs rw 0 0\n")
    assert engine.mounts_under(root, mounts) == [f"{root}/data/overlay2/x/merged", f"{root}/exec"]


def test_skopeo_global_flags_reach_every_command() -> None:
    skopeo = ["skopeo", "--registries-conf", "/etc/site.conf"]
    assert mirror.copy_command(skopeo, "127.0.0.1:5000/a/b:1", "site:5000/m/a/b:1")[:4] == [*skopeo, "copy"]
    assert mirror.inspect_command(skopeo, "site:5000/m/a/b:1")[:4] == [*skopeo, "inspect"]
    assert mirror.config_command(skopeo, "site:5000/m/a/b:1")[:4] == [*skopeo, "inspect"]
    assert mirror.copy_command("skopeo", "127.0.0.1:5000/a/b:1", "site:5000/m/a/b:1")[:2] == ["skopeo", "copy"]


def test_mirror_only_refuses_an_image_the_stack_does_not_run(capsys: pytest.CaptureFixture[str]) -> None:
    assert mirror.main(["--stack", "edge", "--only", "127.0.0.1:5000/not/ours:1"]) == 2
    error = capsys.readouterr().err
    assert "--only 127.0.0.1:5000/not/ours:1: not an image of stack 'edge'" in error
    assert "Traceback" not in error


def test_system_packages_installs_only_what_is_missing_as_root() -> None:
    from tools import system_packages

    calls: list[list[str]] = []

    def run(command, **_kwargs):
        calls.append(command)
        return subprocess.CompletedProcess(command, 0, "", "")

    wanted = system_packages.missing(["prometheus", "skopeo"])
    assert system_packages.install(["prometheus", "skopeo"], is_root=True, run=run) == wanted
    if wanted:
        assert calls[-1][-len(wanted):] == wanted and calls[0][:2] == ["apt-get", "update"]
    else:
        assert calls == []


def test_system_packages_names_the_command_when_not_root(monkeypatch: pytest.MonkeyPatch) -> None:
    from tools import system_packages

    fake = {"nothing-here": system_packages.SystemPackage("/nonexistent/bin/x", "nothing-here", "a test needs it")}
    monkeypatch.setattr(system_packages, "PACKAGES", fake)
    with pytest.raises(system_packages.MissingPackages,
                       match=r"nothing-here: a test needs it\): run `sudo apt-get install -y --no-install-recommends "
                             r"nothing-here`"):
        system_packages.install(["nothing-here"], is_root=False)
    assert system_packages.main(["unknown"]) == 2


def test_every_suite_names_known_packages() -> None:
    from tools import system_packages

    for suite, names in system_packages.SUITES.items():
        assert set(names) <= set(system_packages.PACKAGES), suite


def test_verify_lock_names_an_entry_the_site_serves_differently_or_not_at_all() -> None:
    from conventions.images import Lock

    served = {"site:5000/mirror/registry.example-5000/a/b:1": b'{"manifest": "a"}'}
    digest = "sha256:" + hashlib.sha256(served["site:5000/mirror/registry.example-5000/a/b:1"]).hexdigest()

    def run(command, **_kwargs):
        reference = command[-1].removeprefix("docker://")
        if reference in served:
            return subprocess.CompletedProcess(command, 0, served[reference], b"")
        return subprocess.CompletedProcess(command, 1, b"", b"manifest unknown")

    good = Lock("site:5000", {"registry.example:5000/a/b:1": f"site:5000/mirror/registry.example-5000/a/b@{digest}"})
    assert mirror.verify_lock(good, "mirror", run=run) == []
    zeros = f"sha256:{'0' * 64}"
    wrong = Lock("site:5000", {"registry.example:5000/a/b:1": f"site:5000/mirror/registry.example-5000/a/b@{zeros}"})
    assert mirror.verify_lock(wrong, "mirror", run=run) == [
        f"registry.example:5000/a/b:1: the lock pins {zeros}, the site serves {digest} at "
        "site:5000/mirror/registry.example-5000/a/b:1"]
    missing = Lock("site:5000", {"registry.example:5000/c/d:2": f"site:5000/mirror/registry.example-5000/c/d@{digest}"})
    [problem] = mirror.verify_lock(missing, "mirror", run=run)
    assert (problem.startswith("registry.example:5000/c/d:2: the site does not serve "
                               "site:5000/mirror/registry.example-5000/c/d:2: skopeo inspect")
            and "manifest unknown" in problem)
