"""The EFA health check: NCCL's INFO log says which network it used; EFA expected but sockets used fails."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from trainer_harness import PYTHON, trainer_env

from trainer import nccl_net

pytestmark = pytest.mark.torchrun


DATA = Path(__file__).parent / "data"
EFA_LOG = DATA / "nccl_efa.log"
SOCKET_LOG = DATA / "nccl_socket_fallback.log"


def test_parses_the_efa_run():
    usage = nccl_net.parse(EFA_LOG.read_text())
    assert (usage.network, usage.plugin, usage.provider) == ("Libfabric", "Libfabric", "efa")
    assert usage.transport == "efa" and not usage.socket_interfaces


def test_parses_the_socket_fallback():
    usage = nccl_net.parse(SOCKET_LOG.read_text())
    assert (usage.network, usage.plugin, usage.provider) == ("Socket", None, None)
    assert usage.transport == "socket" and usage.socket_interfaces


@pytest.mark.parametrize(("text", "transport"), [
    ("x [0] NCCL INFO NET/OFI Selected provider is efa\nx [0] NCCL INFO Using network AWS Libfabric", "efa"),
    ("x [0] NCCL INFO NET/OFI Selected Provider is tcp (found 1 nics)\nx [0] NCCL INFO Using network Libfabric",
     "ofi"),
    ("x [0] NCCL INFO Using network AWS Libfabric", "ofi"),          # plugin but provider unknown: not proven EFA
    ("x [0] NCCL INFO Using network IB", "ib"),
    ("NCCL version 2.27.5+cuda13.0", "unknown"),
])
def test_transport_classification(text, transport):
    assert nccl_net.parse(text).transport == transport


def test_efa_expected_but_sockets_used_fails_with_the_cause():
    ok, detail = nccl_net.verify(nccl_net.parse(SOCKET_LOG.read_text()), "efa")
    assert not ok
    assert "expected NCCL network efa, but NCCL used socket" in detail and "fell back to TCP sockets" in detail


@pytest.mark.parametrize(("log", "expect", "ok"), [
    (EFA_LOG, "efa", True), (EFA_LOG, "socket", False), (EFA_LOG, "any", True),
    (SOCKET_LOG, "efa", False), (SOCKET_LOG, "socket", True), (SOCKET_LOG, "any", True),
])
def test_verify_matrix(log, expect, ok):
    assert nccl_net.verify(nccl_net.parse(log.read_text()), expect)[0] is ok


def test_no_using_network_line_is_not_a_pass():
    ok, detail = nccl_net.verify(nccl_net.parse("NCCL version 2.27.5"), "efa")
    assert not ok and "NCCL_DEBUG=INFO" in detail


def _healthcheck(tmp_path: Path, *flags: str) -> tuple[int, dict]:
    completed = subprocess.run([PYTHON, "-m", "trainer.healthcheck", "--shm-path", str(tmp_path), "--min-shm-gib", "0",
                                *flags], capture_output=True, text=True, timeout=60, env=trainer_env(), check=False)
    return completed.returncode, json.loads(completed.stdout)


def test_healthcheck_expect_net_efa_fails_on_the_socket_log(tmp_path):
    code, report = _healthcheck(tmp_path, "--expect-net", "efa", "--nccl-log", str(SOCKET_LOG))
    assert code == 1 and report["failed"] == ["nccl_net"]
    detail = next(check["detail"] for check in report["checks"] if check["name"] == "nccl_net")
    assert "NCCL used socket" in detail


def test_healthcheck_expect_net_efa_passes_on_the_efa_log(tmp_path):
    code, report = _healthcheck(tmp_path, "--expect-net", "efa", "--nccl-log", str(EFA_LOG))
    assert code == 0 and report["ok"] is True
    assert "nccl_net" in {check["name"] for check in report["checks"]}


def test_healthcheck_expect_net_needs_a_log(tmp_path):
    code, report = _healthcheck(tmp_path, "--expect-net", "efa")
    assert code == 1 and report["failed"] == ["nccl_net"]
