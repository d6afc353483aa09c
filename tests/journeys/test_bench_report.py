"""tools.bench_report: golden text on sample runs, tolerant parsing, S3 prefix listing (moto)."""

import json
import os
import sys
from pathlib import Path

import boto3
import pytest
from moto import mock_aws

from tools import bench_report
from tools.bench_report import format_report, format_size, load, parse_run, split_s3_url

DATA = Path(__file__).parent / "data"
GOLDEN = DATA / "bench_report.golden.txt"


def test_report_matches_golden():
    text = format_report(load(str(DATA / "bench")))
    if os.environ.get("UPDATE_GOLDEN") == "1":
        GOLDEN.write_text(text, encoding="utf-8")
    assert text == GOLDEN.read_text(encoding="utf-8"), "run with UPDATE_GOLDEN=1 to accept the new output"


def test_missing_optional_keys_print_as_dash():
    run = parse_run("minimal.json", {"kind": "bench", "allreduce": [{"size_bytes": 1024}, "junk"]})
    assert run.world_size is None and run.tokens_per_s is None and run.busbw_gbps_by_size == {}
    table = format_report(bench_report.LoadResult(runs=[run]))
    assert table.splitlines()[3].split() == ["minimal.json"] + ["-"] * 10


@pytest.mark.parametrize(
    ("document", "message"),
    [([1, 2], "expected a JSON object, got list"), ({"kind": "train"}, "kind is 'train', not 'bench'")],
)
def test_non_bench_documents_are_rejected(document, message):
    with pytest.raises(ValueError, match=message):
        parse_run("x.json", document)


def test_cli_prints_note_without_matplotlib(monkeypatch, capsys, tmp_path):
    import builtins

    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name.startswith("matplotlib"):
            raise ImportError("No module named 'matplotlib'")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    assert bench_report.main([str(DATA / "bench"), "--plot", str(tmp_path / "busbw.png")]) == 0
    out = capsys.readouterr().out
    assert "matplotlib is not installed; skipped the plot" in out
    assert not (tmp_path / "busbw.png").exists()


def test_cli_errors(tmp_path, capsys):
    assert bench_report.main([str(tmp_path / "missing")]) == 2
    assert "error: no such directory:" in capsys.readouterr().err
    assert bench_report.main([str(tmp_path)]) == 1
    assert capsys.readouterr().out == "no benchmark runs found\n"


def test_format_size():
    sizes = (512, 1024, 1536, 1 << 20, 3 << 30)
    assert [format_size(n) for n in sizes] == ["512 B", "1 KiB", "1536 B", "1 MiB", "3 GiB"]


def test_split_s3_url():
    assert split_s3_url("s3://bucket/results/run1") == ("bucket", "results/run1/")
    assert split_s3_url("s3://bucket") == ("bucket", "")
    with pytest.raises(ValueError, match="no bucket in 's3:///x'"):
        split_s3_url("s3:///x")


def test_reads_runs_under_an_s3_prefix_only(monkeypatch):
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1"}.items():
        monkeypatch.setenv(key, value)
    with mock_aws():
        session = boto3.Session(region_name="us-east-1")
        s3 = session.client("s3")
        s3.create_bucket(Bucket="gtp-bench")
        for path in sorted((DATA / "bench").glob("*.json")):
            s3.put_object(Bucket="gtp-bench", Key=f"results/bench-a/{path.name}", Body=path.read_bytes())
        s3.put_object(Bucket="gtp-bench", Key="results/bench-a/log.txt", Body=b"not a result")
        s3.put_object(Bucket="gtp-bench", Key="results/bench-ab/other.json",
                      Body=json.dumps({"kind": "bench", "world_size": 99}).encode())
        for index in range(5):
            s3.put_object(Bucket="gtp-bench", Key=f"results/bench-a/extra/{index}.json",
                          Body=json.dumps({"kind": "bench", "world_size": index + 1}).encode())
        result = load("s3://gtp-bench/results/bench-a", session_factory=lambda: session)

    names = sorted(run.name for run in result.runs)
    assert names == ["a10g-2-gloo.json", "extra/0.json", "extra/1.json", "extra/2.json", "extra/3.json",
                     "extra/4.json", "h200-16.json"]
    assert 99 not in [run.world_size for run in result.runs]
    directory_text = format_report(load(str(DATA / "bench")))
    s3_only_sample = bench_report.LoadResult(
        runs=[run for run in result.runs if not run.name.startswith("extra/")], skipped=result.skipped)
    assert format_report(s3_only_sample) == directory_text


# ---- checks: EFA requested but sockets used, busbw floors ---------------------------------------------------
def _run(name="r.json", **document):
    return parse_run(name, {"kind": "bench", **document})


def _allreduce(peak):
    return [{"size_bytes": 1 << 20, "busbw_gbps": peak / 4}, {"size_bytes": 1 << 30, "busbw_gbps": peak}]


def test_efa_requested_but_sockets_used_fails():
    run = _run(network={"requested": "efa", "used": "socket"})
    [problem] = bench_report.check_runs([run], {})
    assert problem.startswith("r.json: requested EFA but NCCL used socket")


def test_efa_requested_and_used_passes_and_not_requested_is_not_checked():
    runs = [_run(network={"requested": "efa", "used": "efa"}), _run(network={"requested": None, "used": "socket"}),
            _run()]
    assert bench_report.check_runs(runs, {}) == []


def test_efa_requested_without_a_recorded_network_fails_closed():
    [problem] = bench_report.check_runs([_run(network={"requested": "efa"})], {})
    assert "not recorded" in problem and "--nccl-log" in problem


@pytest.mark.parametrize(("peak", "ok"), [(99.0, True), (150.0, True), (98.9, False), (3.2, False)])
def test_busbw_floor_is_inclusive(peak, ok):
    run = _run(instance_type="p5.48xlarge", allreduce=_allreduce(peak))
    problems = bench_report.check_runs([run], bench_report.DEFAULT_BUSBW_FLOORS_GBPS)
    assert (problems == []) is ok
    if not ok:
        assert f"peak busbw {peak:.1f} GB/s is under the p5.48xlarge floor of 99 GB/s" in problems[0]


def test_floor_applies_only_to_its_instance_type_and_missing_results_fail():
    floors = {"p4d.24xlarge": 45.0}
    assert bench_report.check_runs([_run(instance_type="g6e.48xlarge", allreduce=_allreduce(1.0)), _run()],
                                   floors) == []
    [problem] = bench_report.check_runs([_run(instance_type="p4d.24xlarge")], floors)
    assert "no all-reduce result is under the p4d.24xlarge floor" in problem


def test_default_floors_cover_the_efa_p_types():
    assert set(bench_report.DEFAULT_BUSBW_FLOORS_GBPS) == {"p5.48xlarge", "p4d.24xlarge"}
    assert bench_report.DEFAULT_BUSBW_FLOORS_GBPS["p5.48xlarge"] > bench_report.DEFAULT_BUSBW_FLOORS_GBPS[
        "p4d.24xlarge"]


def _write(directory: Path, **document) -> None:
    (directory / "run.json").write_text(json.dumps({"kind": "bench", **document}), encoding="utf-8")


def test_cli_exits_3_with_a_clear_message(tmp_path, capsys):
    _write(tmp_path, instance_type="p5.48xlarge", network={"requested": "efa", "used": "socket"},
           allreduce=_allreduce(4.0))
    assert bench_report.main([str(tmp_path)]) == 3
    errors = capsys.readouterr().err.splitlines()
    assert errors[0] == ("FAIL: run.json: requested EFA but NCCL used socket; the image lacks aws-ofi-nccl/libfabric, "
                         "or the pods have no EFA devices")
    assert "under the p5.48xlarge floor of 99 GB/s" in errors[1]


def test_cli_floor_overrides_and_no_default_floors(tmp_path):
    _write(tmp_path, instance_type="p5.48xlarge", allreduce=_allreduce(50.0))
    assert bench_report.main([str(tmp_path)]) == 3
    assert bench_report.main([str(tmp_path), "--busbw-floor", "p5.48xlarge=40"]) == 0
    assert bench_report.main([str(tmp_path), "--no-busbw-floors"]) == 0
    assert bench_report.main([str(tmp_path), "--no-busbw-floors", "--busbw-floor", "p5.48xlarge=60"]) == 3


def test_cli_rejects_a_malformed_floor(tmp_path):
    with pytest.raises(SystemExit):
        bench_report.main([str(tmp_path), "--busbw-floor", "p5.48xlarge"])


def _p5_runs() -> bench_report.LoadResult:
    run = bench_report.BenchRun(name="p5.json", instance_type="p5.48xlarge", world_size=16, device="H200",
                                busbw_gbps_by_size={1 << 20: 15.0, 1 << 30: 83.8})
    other = bench_report.BenchRun(name="cpu.json", instance_type="m7i.large", busbw_gbps_by_size={1 << 20: 1.0})
    return bench_report.LoadResult(runs=[run, other])


def test_the_plot_draws_the_floor_of_each_plotted_instance_type_only():
    floors = {"p5.48xlarge": 99.0, "p4d.24xlarge": 45.0}
    assert bench_report.plot_floors(_p5_runs(), floors) == {"p5.48xlarge": 99.0}
    assert bench_report.plot_floors(bench_report.LoadResult(), floors) == {}


def test_the_plot_has_a_dashed_floor_line(monkeypatch, tmp_path):
    """matplotlib is not in the base setup (requirements-plot.txt): a recording stand-in shows what is drawn."""
    import types

    calls: list[tuple[str, tuple, dict]] = []

    class Recorder:
        def __getattr__(self, name):
            return lambda *args, **kwargs: calls.append((name, args, kwargs))

    pyplot = types.ModuleType("matplotlib.pyplot")
    pyplot.subplots = lambda **kwargs: (Recorder(), Recorder())
    pyplot.close = lambda figure: None
    matplotlib = types.ModuleType("matplotlib")
    matplotlib.use = lambda backend: None
    matplotlib.pyplot = pyplot
    monkeypatch.setitem(sys.modules, "matplotlib", matplotlib)
    monkeypatch.setitem(sys.modules, "matplotlib.pyplot", pyplot)
    note = bench_report.write_plot(_p5_runs(), tmp_path / "busbw.png", {"p5.48xlarge": 99.0})
    assert note.endswith("(2 run(s), 1 floor line(s))")
    floors = [(args, kwargs) for name, args, kwargs in calls if name == "axhline"]
    assert floors == [((99.0,), {"linestyle": "--", "linewidth": 1, "color": "red",
                                 "label": "p5.48xlarge floor 99 GB/s"})]


def test_the_plot_is_a_png_with_real_matplotlib(tmp_path, monkeypatch):
    """With matplotlib (requirements-plot.txt, which `make bench-report PLOT=...` installs): a real PNG. Without it
    (the base setup): the available part, that the report says in one line how to get the plot and writes none."""
    output = tmp_path / "busbw.png"
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        print("\nmatplotlib is not installed (requirements-plot.txt): checked the missing-plot note, not a real PNG")
        monkeypatch.setitem(sys.modules, "matplotlib", None)  # absent for the plot function too
        note = bench_report.write_plot(_p5_runs(), output, {"p5.48xlarge": 99.0})
        assert note.startswith("matplotlib is not installed") and "\n" not in note and not output.exists()
        return
    assert "1 floor line(s)" in bench_report.write_plot(_p5_runs(), output, {"p5.48xlarge": 99.0})
    assert output.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
