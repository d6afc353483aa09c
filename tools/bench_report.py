"""Compare benchmark runs written by ``python -m trainer.bench``.

    python -m tools.bench_report DIR|s3://bucket/prefix [--plot busbw.png]

Reads every ``*.json`` under DIR (recursively) or under the S3 prefix, one file per run, and prints two tables:
runs × key metrics, and all-reduce bus bandwidth per message size (one column per run). With ``--plot`` it also
writes busbw vs message size (log x) as a PNG, with a dashed line at each plotted instance type's busbw floor, when
matplotlib is installed (requirements-plot.txt; `make bench-report PLOT=busbw.png` installs it); without it the plot
is skipped with a note. Files that are not JSON objects of ``"kind": "bench"`` are listed as skipped; missing optional
keys print as ``-``.

Checks (exit 3 with one ``FAIL:`` line per problem on stderr, after the tables): a run that requested EFA
(``network.requested == "efa"``) must have used it (``network.used``, which ``trainer.bench --nccl-log`` reads from
NCCL's INFO log); a run whose ``instance_type`` has a bus-bandwidth floor must reach it with its peak busbw. Floors
default to DEFAULT_BUSBW_FLOORS_GBPS; ``--busbw-floor TYPE=GBPS`` overrides or adds one, ``--no-busbw-floors`` drops
the defaults.

Bus bandwidth (``busbw``) is the figure to compare across world sizes: nccl-tests' algorithm bandwidth scaled by
2(n-1)/n for all-reduce, so it approaches the link speed independently of the rank count.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import boto3

MISSING = "-"

# Floors on the peak all-reduce busbw (GB/s) of a multi-node run, at about 80% of a published 2-node nccl-tests
# all_reduce_perf result over EFA, so a healthy run passes and a socket fallback (a few GB/s) does not:
# - p5.48xlarge (3200 Gbps EFA): ~124 GB/s average busbw expected by the maintainers of aws/aws-k8s-tester
#   (pull request #503, "Update mult node nccl test", 2024-11) -> 99.
# - p4d.24xlarge (400 Gbps EFA): 57.2 GB/s busbw at 1 GiB on 2 nodes in NVIDIA/nccl issue #527
#   ("Slow bus bandwidth w/ nccl 2.9.9 on EC2 instances", 2022-07) -> 45.
DEFAULT_BUSBW_FLOORS_GBPS: dict[str, float] = {"p5.48xlarge": 99.0, "p4d.24xlarge": 45.0}


@dataclass(frozen=True)
class BenchRun:
    name: str
    """Where the run came from: file path relative to the source, or the S3 key relative to the prefix."""
    world_size: int | None = None
    backend: str | None = None
    device: str | None = None
    started_at: str | None = None
    git_sha: str | None = None
    model: str | None = None
    tokens_per_s: float | None = None
    mfu: float | None = None
    step_time_ms: float | None = None
    busbw_gbps_by_size: dict[int, float] = field(default_factory=dict)
    instance_type: str | None = None
    net_requested: str | None = None
    """"efa" when the run asked for EFA (FI_PROVIDER=efa), else None."""
    net_used: str | None = None
    """What NCCL used according to its INFO log: efa, ofi, socket, ib, unknown; None when not recorded."""


@dataclass
class LoadResult:
    runs: list[BenchRun] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    """One line per ignored file, with the reason."""


def _number(value: Any) -> float | None:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value)


def parse_run(name: str, document: Any) -> BenchRun:
    """A run from one decoded JSON document. Raises ValueError when it is not a bench result at all."""
    if not isinstance(document, Mapping):
        raise ValueError(f"expected a JSON object, got {type(document).__name__}")
    if document.get("kind") != "bench":
        raise ValueError(f"kind is {document.get('kind')!r}, not 'bench'")
    training = document.get("training") if isinstance(document.get("training"), Mapping) else {}
    busbw: dict[int, float] = {}
    for entry in document.get("allreduce") or []:
        if not isinstance(entry, Mapping):
            continue
        size, value = entry.get("size_bytes"), _number(entry.get("busbw_gbps"))
        if isinstance(size, int) and not isinstance(size, bool) and value is not None:
            busbw[size] = value
    world_size = document.get("world_size")
    network = document.get("network") if isinstance(document.get("network"), Mapping) else {}

    def text(value: Any) -> str | None:
        return value if isinstance(value, str) and value else None

    return BenchRun(
        name=name,
        world_size=world_size if isinstance(world_size, int) and not isinstance(world_size, bool) else None,
        backend=document.get("backend"),
        device=document.get("device"),
        started_at=document.get("started_at"),
        git_sha=document.get("git_sha"),
        model=training.get("model"),
        tokens_per_s=_number(training.get("tokens_per_s")),
        mfu=_number(training.get("mfu")),
        step_time_ms=_number(training.get("step_time_ms")),
        busbw_gbps_by_size=busbw,
        instance_type=text(document.get("instance_type")),
        net_requested=text(network.get("requested")),
        net_used=text(network.get("used")),
    )


def parse_documents(named_texts: Sequence[tuple[str, str]]) -> LoadResult:
    result = LoadResult()
    for name, text in sorted(named_texts):
        try:
            result.runs.append(parse_run(name, json.loads(text)))
        except json.JSONDecodeError as exc:
            result.skipped.append(f"{name}: not JSON ({exc.msg} at line {exc.lineno})")
        except ValueError as exc:
            result.skipped.append(f"{name}: {exc}")
    result.runs.sort(key=lambda run: (run.started_at or "", run.name))
    return result


def read_directory(directory: Path) -> list[tuple[str, str]]:
    if not directory.is_dir():
        raise FileNotFoundError(f"no such directory: {directory}")
    return [
        (path.relative_to(directory).as_posix(), path.read_text(encoding="utf-8"))
        for path in sorted(directory.rglob("*.json"))
    ]


def split_s3_url(url: str) -> tuple[str, str]:
    """``s3://bucket/some/prefix`` → (``bucket``, ``some/prefix/``). Raises ValueError without a bucket."""
    if not url.startswith("s3://"):
        raise ValueError(f"not an s3:// URL: {url!r}")
    bucket, _, prefix = url[len("s3://"):].partition("/")
    if not bucket:
        raise ValueError(f"no bucket in {url!r}")
    if prefix and not prefix.endswith("/"):
        prefix += "/"  # "results/run1" must not match "results/run10/…"
    return bucket, prefix


def read_s3(session: boto3.Session, url: str) -> list[tuple[str, str]]:
    bucket, prefix = split_s3_url(url)
    s3 = session.client("s3")
    documents = []
    for page in s3.get_paginator("list_objects_v2").paginate(Bucket=bucket, Prefix=prefix):
        for item in page.get("Contents", []):
            key = item["Key"]
            if key.endswith(".json"):
                body = s3.get_object(Bucket=bucket, Key=key)["Body"].read().decode("utf-8")
                documents.append((key[len(prefix):], body))
    return documents


def load(source: str, session_factory: Callable[[], boto3.Session] | None = None) -> LoadResult:
    if source.startswith("s3://"):
        if session_factory is None:
            import boto3

            session_factory = boto3.Session
        return parse_documents(read_s3(session_factory(), source))
    return parse_documents(read_directory(Path(source)))


# --- formatting --------------------------------------------------------------------------------------------------


def format_size(size_bytes: int) -> str:
    for unit, factor in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if size_bytes >= factor and size_bytes % factor == 0:
            return f"{size_bytes // factor} {unit}"
    return f"{size_bytes} B"


def _fmt(value: float | int | str | None, spec: str = "") -> str:
    if value is None or value == "":
        return MISSING
    return format(value, spec) if spec else str(value)


def _table(header: Sequence[str], rows: Sequence[Sequence[str]], right_align_from: int) -> list[str]:
    widths = [max(len(row[column]) for row in [header, *rows]) for column in range(len(header))]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(
            cell.rjust(width) if column >= right_align_from else cell.ljust(width)
            for column, (cell, width) in enumerate(zip(cells, widths))
        ).rstrip()

    return [line(header), line(["-" * width for width in widths]), *(line(row) for row in rows)]


def peak_busbw(run: BenchRun) -> float | None:
    return max(run.busbw_gbps_by_size.values()) if run.busbw_gbps_by_size else None


def format_report(result: LoadResult) -> str:
    if not result.runs:
        lines = ["no benchmark runs found"]
    else:
        header = ["run", "started_at", "git", "world", "backend", "device", "model",
                  "tokens/s", "MFU", "step ms", "peak busbw GB/s"]
        rows = [
            [
                run.name, _fmt(run.started_at), _fmt(run.git_sha[:8] if run.git_sha else None),
                _fmt(run.world_size), _fmt(run.backend), _fmt(run.device), _fmt(run.model),
                _fmt(run.tokens_per_s, ",.0f"), _fmt(run.mfu, ".1%"), _fmt(run.step_time_ms, ".1f"),
                _fmt(peak_busbw(run), ".1f"),
            ]
            for run in result.runs
        ]
        lines = ["Runs", *_table(header, rows, right_align_from=7)]
        sizes = sorted({size for run in result.runs for size in run.busbw_gbps_by_size})
        if sizes:
            labels = [f"#{index}" for index in range(1, len(result.runs) + 1)]
            size_rows = [
                [format_size(size), *(_fmt(run.busbw_gbps_by_size.get(size), ".2f") for run in result.runs)]
                for size in sizes
            ]
            lines += ["", "All-reduce bus bandwidth (GB/s) by message size",
                      *_table(["size", *labels], size_rows, right_align_from=1)]
            lines += [f"  {label} = {run.name}" for label, run in zip(labels, result.runs)]
    if result.skipped:
        lines += ["", "Skipped files:", *(f"  {line}" for line in result.skipped)]
    return "\n".join(lines) + "\n"


def check_runs(runs: Sequence[BenchRun], floors: Mapping[str, float]) -> list[str]:
    """One line per failed check: EFA requested but not used, peak busbw under its instance type's floor."""
    problems = []
    for run in runs:
        if run.net_requested == "efa" and run.net_used != "efa":
            used = run.net_used or "not recorded (run trainer.bench with --nccl-log and NCCL_DEBUG=INFO)"
            problems.append(f"{run.name}: requested EFA but NCCL used {used}; the image lacks aws-ofi-nccl/libfabric, "
                            f"or the pods have no EFA devices")
        floor = floors.get(run.instance_type or "")
        if floor is not None:
            peak = peak_busbw(run)
            if peak is None or peak < floor:
                shown = "no all-reduce result" if peak is None else f"peak busbw {peak:.1f} GB/s"
                problems.append(f"{run.name}: {shown} is under the {run.instance_type} floor of {floor:g} GB/s")
    return problems


def parse_floor(text: str) -> tuple[str, float]:
    instance_type, separator, value = text.partition("=")
    try:
        gbps = float(value)
    except ValueError:
        gbps = -1.0
    if not separator or not instance_type or gbps < 0:
        raise argparse.ArgumentTypeError(f"expected TYPE=GBPS like p5.48xlarge=99, got {text!r}")
    return instance_type, gbps


def plot_floors(result: LoadResult, floors: Mapping[str, float]) -> dict[str, float]:
    """The busbw floors the plot draws: those of the instance types its runs ran on (instance type → GB/s)."""
    types = {run.instance_type for run in result.runs if run.busbw_gbps_by_size and run.instance_type}
    return {instance_type: floors[instance_type] for instance_type in sorted(types) if instance_type in floors}


def write_plot(result: LoadResult, output: Path, floors: Mapping[str, float] | None = None) -> str:
    """Writes the PNG (busbw per message size, one line per run, a dashed line per instance type's floor) and returns
    a one-line note; the note says how to get matplotlib when it is missing (`make bench-report PLOT=...` installs
    requirements-plot.txt)."""
    try:
        import matplotlib

        matplotlib.use("Agg")  # no display on CI machines
        import matplotlib.pyplot as plt
    except ImportError:
        return (f"matplotlib is not installed; skipped the plot ({output}). Install it with "
                "`.venv/bin/python -m pip install -r requirements-plot.txt` (`make bench-report PLOT=...` does).")
    figure, axes = plt.subplots(figsize=(8, 5))
    plotted = 0
    for run in result.runs:
        if run.busbw_gbps_by_size:
            sizes = sorted(run.busbw_gbps_by_size)
            label = f"{PurePosixPath(run.name).stem} ({_fmt(run.world_size)}× {_fmt(run.device)})"
            axes.plot(sizes, [run.busbw_gbps_by_size[size] for size in sizes], marker="o", label=label)
            plotted += 1
    drawn = plot_floors(result, floors or {})
    for instance_type, gbps in drawn.items():
        # check_runs fails a run whose peak busbw is under its instance type's floor: the line shows how far.
        axes.axhline(gbps, linestyle="--", linewidth=1, color="red", label=f"{instance_type} floor {gbps:g} GB/s")
    axes.set_xscale("log", base=2)
    axes.set_xlabel("message size (bytes)")
    axes.set_ylabel("all-reduce bus bandwidth (GB/s)")
    axes.grid(True, which="both", alpha=0.3)
    if plotted or drawn:
        axes.legend(fontsize="small")
    figure.tight_layout()
    figure.savefig(output, dpi=120)
    plt.close(figure)
    return f"wrote {output} ({plotted} run(s), {len(drawn)} floor line(s))"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.bench_report", description=__doc__.splitlines()[0])
    parser.add_argument("source", help="directory of result JSON files, or s3://bucket/prefix")
    parser.add_argument("--plot", type=Path, help="write busbw vs message size to this PNG (needs matplotlib)")
    parser.add_argument("--busbw-floor", type=parse_floor, action="append", default=[], metavar="TYPE=GBPS",
                        help="peak all-reduce busbw floor for runs on this instance type (repeatable; overrides the "
                             f"defaults {DEFAULT_BUSBW_FLOORS_GBPS})")
    parser.add_argument("--no-busbw-floors", action="store_true", help="drop the default floors")
    args = parser.parse_args(argv)
    floors = {} if args.no_busbw_floors else dict(DEFAULT_BUSBW_FLOORS_GBPS)
    floors.update(args.busbw_floor)
    try:
        result = load(args.source)
    except (FileNotFoundError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    sys.stdout.write(format_report(result))
    if args.plot:
        print(write_plot(result, args.plot, floors))
    problems = check_runs(result.runs, floors)
    for problem in problems:
        print(f"FAIL: {problem}", file=sys.stderr)
    if problems:
        return 3
    return 0 if result.runs else 1


if __name__ == "__main__":
    from tools.cli import run as run_cli

    sys.exit(run_cli(main))
