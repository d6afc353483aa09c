"""What a built training image must show, checked on the image itself through a Docker Engine.

Each check returns a list of problems (empty when the image holds): tests/engine runs them on the image built from
the committed Dockerfile and on copies with a planted defect, which they must catch.

- `user_problems`: started as the pod spec starts it, the process is uid/gid 10001, the root file system is
  read-only, and the pod's emptyDir mounts (/tmp, /dev/shm) are writable.
- `label_problems`: the OCI labels equal the build args that produced them.
- `added_bytes` / `size_problems`: what the image adds over its base (the layers above the base's), against the
  budget of tools.image_size.
- `leak_problems`: no secret (e.g. the CA bundle passed as a BuildKit secret) in the history or in any file of a
  layer the build added.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

from components.training_pod import RUN_AS_USER
from tools.engine import Engine

# Labels the Dockerfile sets from build args: label -> build arg.
LABEL_ARGS: dict[str, str] = {
    "org.opencontainers.image.source": "SOURCE_URL",
    "org.opencontainers.image.revision": "VCS_REVISION",
    "org.opencontainers.image.version": "TRAINER_VERSION",
    "org.opencontainers.image.base.name": "BASE_IMAGE",
}
MAX_SCANNED_FILE = 256 * 1024 * 1024


def inspect(engine: Engine, image: str) -> dict:
    return json.loads(engine.docker("image", "inspect", image).stdout)[0]


def user_problems(engine: Engine, image: str, run_flags: Sequence[str], writable: Iterable[str] = ("/tmp", "/dev/shm"),
                  uid: int = RUN_AS_USER) -> list[str]:
    probe = ("import os, sys\n"
             "print(os.getuid(), os.getgid())\n"
             "for path in ['/', *sys.argv[1:]]:\n"
             "    try:\n"
             "        with open(os.path.join(path, '.gtp-write-probe'), 'w') as f: f.write('x')\n"
             "        print(path, 'writable')\n"
             "    except OSError as e:\n"
             "        print(path, 'refused', e.errno)\n")
    done = engine.docker("run", "--rm", *run_flags, "--entrypoint", "python", image, "-c", probe, *writable,
                         check=False)
    if done.returncode != 0:
        return [f"the probe did not run in {image}: {done.stderr.decode(errors='replace')[-600:]}"]
    lines = done.stdout.decode().splitlines()
    problems = []
    ids = lines[0].split()
    if ids != [str(uid), str(uid)]:
        problems.append(f"runs as uid/gid {'/'.join(ids)}, not {uid}/{uid} (the image's USER)")
    verdicts = dict(line.split(" ", 1) for line in lines[1:])
    if verdicts.get("/", "").startswith("writable"):
        problems.append("the root file system is writable (the pod runs it read-only)")
    for path in writable:
        if not verdicts.get(path, "").startswith("writable"):
            problems.append(f"{path} is not writable as uid {uid}: {verdicts.get(path)}")
    return problems


def label_problems(engine: Engine, image: str, build_args: Mapping[str, str]) -> list[str]:
    labels = inspect(engine, image)["Config"].get("Labels") or {}
    problems = []
    for label, arg in LABEL_ARGS.items():
        if label not in labels:
            problems.append(f"label {label} is missing")
        elif labels[label] != build_args.get(arg):
            problems.append(f"label {label}={labels[label]!r} but build arg {arg}={build_args.get(arg)!r}")
    return problems


def _layer_dirs(details: dict) -> list[str]:
    data = details.get("GraphDriver", {}).get("Data") or {}
    lower = [part for part in (data.get("LowerDir") or "").split(":") if part]
    return [data["UpperDir"], *lower] if data.get("UpperDir") else lower


def added_layer_dirs(engine: Engine, image: str, base: str) -> list[Path]:
    """The overlay2 `diff` folders of the layers `image` has above `base` (the engine's own storage)."""
    base_dirs = set(_layer_dirs(inspect(engine, base)))
    return [Path(folder) for folder in _layer_dirs(inspect(engine, image)) if folder not in base_dirs]


def added_bytes(engine: Engine, image: str, base: str) -> int:
    """Bytes the image adds over its base: its size minus the base's (the engine counts each layer once)."""
    return int(inspect(engine, image)["Size"]) - int(inspect(engine, base)["Size"])


def size_problems(engine: Engine, image: str, base: str, budget_mb: float) -> list[str]:
    added = added_bytes(engine, image, base)
    if added > budget_mb * 1000 * 1000:
        return [f"the image adds {added / 1e6:.1f} MB over its base, over the {budget_mb:g} MB budget"]
    return []


def leak_problems(engine: Engine, image: str, base: str, secrets: Mapping[str, bytes]) -> list[str]:
    """Each secret (name -> a distinctive piece of it) must appear neither in `docker history` nor in a file of a
    layer the build added."""
    problems = []
    history = engine.docker("history", "--no-trunc", "--format", "{{.CreatedBy}}", image).stdout
    for name, needle in secrets.items():
        if needle in history:
            problems.append(f"{name} appears in the image history")
    for layer in added_layer_dirs(engine, image, base):
        for directory, _dirs, files in os.walk(layer):
            for filename in files:
                path = Path(directory) / filename
                if path.is_symlink() or not path.is_file() or path.stat().st_size > MAX_SCANNED_FILE:
                    continue
                data = path.read_bytes()
                for name, needle in secrets.items():
                    if needle in data:
                        problems.append(f"{name} is in a layer: /{path.relative_to(layer)}")
    return problems


def distinctive_certificates(bundle: Path, known: bytes) -> dict[str, bytes]:
    """Certificates of `bundle` that `known` (e.g. the base's own CA bundle) lacks, each as a distinctive line of
    its base64 body: what a leaked copy of the bundle would carry."""
    found: dict[str, bytes] = {}
    for index, block in enumerate(bundle.read_bytes().split(b"-----BEGIN CERTIFICATE-----")[1:]):
        body = [line.strip() for line in block.split(b"-----END CERTIFICATE-----")[0].splitlines() if line.strip()]
        if len(body) > 3 and body[2] not in known:
            found[f"CA bundle certificate #{index}"] = body[2]
    return found
