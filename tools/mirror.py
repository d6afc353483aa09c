"""`make mirror STACK=<stack>`: copy every image an air-gapped stack runs into its site registry and lock the digests.

    python -m tools.mirror --stack edge [--list] [--skopeo PATH] [--lock PATH] [--stack-file PATH] [--only REF ...]

1. The image list comes from the stack's plan: every container, init container and ephemeral container image of
   every object in the rendered cluster (`verify.render.render_cluster`: stack objects, vendored charts rendered by
   helm, vendored operator manifests), every image passed as a controller flag (`--<name>-image=<ref>`, e.g.
   DLRover's `--master-image`), and the training image's base (or the existing image a `build: false` stack runs).
   The training image the stack builds is pushed to the site registry by the stack itself. Planned offline, the
   stack already references site copies; those are mapped back to their sources (stages/air_gap.py).
2. Each is copied with `skopeo copy --all --preserve-digests docker://<source> docker://<site copy>` (every
   platform of a multi-platform image, manifests byte-identical, so the copy has the source's digest).
3. The copy's digest is the SHA-256 of its manifest as the site registry serves it (`skopeo inspect --raw`), and
   the lock file (default `stacks/mirror/<stack>.lock.json`) records source → `<site copy>@sha256:<digest>`,
   and the platforms the copy carries (`manifest_platforms`: a manifest list's entries, else the single image's
   config from `skopeo inspect --config`), which the simulation checks against each node group's
   `kubernetes.io/arch` (verify/simulate/platforms.py).

`--list` prints the images and the copy commands and copies nothing; `--verify` checks every lock entry against what
the site registry serves under the copy's tag (exit 1 naming each that differs). `--only REF` copies just those of
the stack's images (e.g. a newly built training image) and keeps the lock's other entries. `--stack-file` plans
another copy of the stack's file (tests/engine mirrors between two local registries that way). skopeo is a Debian
package (`apt-get install skopeo`); registry credentials come from skopeo's own auth file
(`skopeo login <site registry>`).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import subprocess
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from conventions.images import Lock, LockError, normalized, parse, read_lock, site_repository, site_tag
from verify.plan_record import COMPUTED, ROOT

POD_CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")
IMAGE_FLAG = re.compile(r"^--?[a-z0-9-]*image=(\S+)$")
"""A controller flag that names an image (`--master-image=<ref>`)."""

Runner = Callable[..., subprocess.CompletedProcess]


def _containers(node: Any) -> Iterator[Mapping[str, Any]]:
    if isinstance(node, Mapping):
        for key in POD_CONTAINER_LISTS:
            items = node.get(key)
            if isinstance(items, list):
                yield from (item for item in items if isinstance(item, Mapping))
        for value in node.values():
            yield from _containers(value)
    elif isinstance(node, list):
        for value in node:
            yield from _containers(value)


def images_in(objects: Iterable[Mapping[str, Any]]) -> set[str]:
    """Every image the objects run: container images and images passed as `--*-image=` flags (normalised)."""
    found: set[str] = set()
    for obj in objects:
        for container in _containers(obj):
            image = container.get("image")
            if isinstance(image, str) and image and image != COMPUTED:
                found.add(normalized(image))
            for arg in list(container.get("args") or []) + list(container.get("command") or []):
                match = IMAGE_FLAG.match(str(arg))
                if match:
                    found.add(normalized(match.group(1)))
    return found


def stack_images(objects: Iterable[Mapping[str, Any]], config: Any) -> list[str]:
    """The sources the stack needs, sorted: the cluster's images (site copies mapped back to their sources) plus
    the training image's base or existing image (`stages.air_gap.required_images` knows which)."""
    from stages.air_gap import required_images, site_images

    found = images_in(objects)
    back = {_key(site): source for source, site in site_images(config).refs.items()}
    sources = {back.get(_key(image), image) for image in found}
    training = set(required_images(config)) - _chart_and_operator_images()
    return sorted(sources | training)


def _key(image: str) -> tuple[str, str | None]:
    """A site copy as charts render it (`repo:tag@digest`) and as the lock has it (`repo@digest`) match."""
    ref = parse(image)
    return ref.repository, ref.digest or ref.tag


def _chart_and_operator_images() -> set[str]:
    from catalog.images import ARM64_VARIANTS, CHART_IMAGES, OPERATOR_IMAGES

    return ({normalized(slot.source) for slots in CHART_IMAGES.values() for slot in slots}
            | {normalized(image) for images in OPERATOR_IMAGES.values() for image in images}
            | {normalized(image) for image in ARM64_VARIANTS.values()})


def site_copy(source: str, site_registry: str, prefix: str) -> str:
    """The site reference a source is copied to (by tag: a registry keeps tagged images)."""
    return f"{site_repository(source, site_registry, prefix)}:{site_tag(source)}"


def _argv(skopeo: str | Sequence[str]) -> list[str]:
    """The skopeo binary with its global flags (e.g. `--registries-conf FILE`)."""
    return [skopeo] if isinstance(skopeo, str) else list(skopeo)


def copy_command(skopeo: str | Sequence[str], source: str, destination: str) -> list[str]:
    ref = parse(source)
    # containers/image's docker transport refuses a reference with both a tag and a digest: copy by digest.
    pulled = f"{ref.repository}@{ref.digest}" if ref.digest else str(ref)
    return [*_argv(skopeo), "copy", "--all", "--preserve-digests", f"docker://{pulled}", f"docker://{destination}"]


def inspect_command(skopeo: str | Sequence[str], destination: str) -> list[str]:
    return [*_argv(skopeo), "inspect", "--raw", f"docker://{destination}"]


def mirror(images: Sequence[str], site_registry: str, prefix: str, *, skopeo: str | Sequence[str] = "skopeo",
           run: Runner = subprocess.run, log: Callable[[str], None] = print) -> Lock:
    """Copy every image, then read back each copy's manifest digest; a failed copy stops with its stderr."""
    pinned: dict[str, str] = {}
    platforms: dict[str, tuple[str, ...]] = {}
    for source in images:
        destination = site_copy(source, site_registry, prefix)
        log(f"mirror: {source} -> {destination}")
        done = run(copy_command(skopeo, source, destination), capture_output=True)
        if done.returncode != 0:
            raise RuntimeError(f"skopeo copy {source} -> {destination} failed (exit {done.returncode}): "
                               f"{_text(done.stderr).strip()}")
        manifest = served_manifest(destination, skopeo=skopeo, run=run)
        digest = "sha256:" + hashlib.sha256(manifest).hexdigest()
        pinned[source] = f"{site_repository(source, site_registry, prefix)}@{digest}"
        found = manifest_platforms(
            manifest, lambda destination=destination: run(config_command(skopeo, destination), capture_output=True))
        if found:
            platforms[source] = found
    return Lock(site_registry, pinned, platforms)


def served_manifest(reference: str, *, skopeo: str | Sequence[str] = "skopeo", run: Runner = subprocess.run) -> bytes:
    """The manifest bytes a registry serves for `reference` (its digest is their SHA-256); RuntimeError if none."""
    raw = run(inspect_command(skopeo, reference), capture_output=True)
    if raw.returncode != 0 or not raw.stdout:
        raise RuntimeError(f"skopeo inspect {reference} failed (exit {raw.returncode}): {_text(raw.stderr).strip()}")
    return raw.stdout if isinstance(raw.stdout, bytes) else raw.stdout.encode()


def verify_lock(lock: Lock, prefix: str, *, skopeo: str | Sequence[str] = "skopeo",
                run: Runner = subprocess.run) -> list[str]:
    """Every lock entry against what the site registry serves under the copy's tag: one problem per entry whose
    digest differs (a re-pushed tag, a hand-edited lock) or that the site does not serve."""
    problems = []
    for source, pinned in sorted(lock.images.items()):
        tagged = site_copy(source, lock.site_registry, prefix)
        try:
            served = "sha256:" + hashlib.sha256(served_manifest(tagged, skopeo=skopeo, run=run)).hexdigest()
        except RuntimeError as error:
            problems.append(f"{source}: the site does not serve {tagged}: {error}")
            continue
        if served != pinned.split("@", 1)[1]:
            problems.append(f"{source}: the lock pins {pinned.split('@', 1)[1]}, the site serves {served} at {tagged}")
    return problems


def config_command(skopeo: str | Sequence[str], destination: str) -> list[str]:
    return [*_argv(skopeo), "inspect", "--config", f"docker://{destination}"]


def manifest_platforms(manifest: bytes, read_config: Callable[[], Any]) -> tuple[str, ...]:
    """The platforms an image carries: each entry of a manifest list / OCI index (`platform.os/architecture
    [/variant]`; attestation entries, `unknown/unknown`, skipped), or a single image's config (`os`,
    `architecture`, `variant`, read by `read_config`, a `skopeo inspect --config` run). () when neither says."""
    try:
        document = json.loads(manifest)
    except ValueError:
        return ()
    entries = document.get("manifests") if isinstance(document, dict) else None
    if entries:
        found = []
        for entry in entries:
            platform = entry.get("platform") or {}
            if platform.get("os") in (None, "unknown") or platform.get("architecture") in (None, "unknown"):
                continue
            found.append("/".join(str(part) for part in (platform["os"], platform["architecture"],
                                                          platform.get("variant")) if part))
        return tuple(sorted(set(found)))
    done = read_config()
    try:
        config = json.loads(done.stdout) if done.returncode == 0 and done.stdout else {}
    except ValueError:
        return ()
    if not isinstance(config, dict) or not config.get("os") or not config.get("architecture"):
        return ()
    return ("/".join(str(part) for part in (config["os"], config["architecture"], config.get("variant")) if part),)


def _text(value: Any) -> str:
    return value.decode(errors="replace") if isinstance(value, bytes) else str(value or "")


def plan_images(stack: str, stack_file: Path | None = None) -> tuple[Any, list[str]]:
    """(the stack's config, the images it needs), from a fresh plan of the stack and its rendered cluster."""
    from verify import plan as planner
    from verify.render import render_cluster

    plan = planner.run(stack, stack_file=stack_file) if stack_file else planner.run(stack)
    objects = [item.obj for item in render_cluster(plan)]
    return plan.config, stack_images(objects, plan.config)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tools.mirror", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--stack", required=True)
    parser.add_argument("--list", action="store_true", help="print the images and copy commands; copy nothing")
    parser.add_argument("--verify", action="store_true",
                        help="check the lock against what the site registry serves; copy nothing")
    parser.add_argument("--skopeo", default="skopeo", help="the skopeo binary (default: skopeo on PATH)")
    parser.add_argument("--lock", type=Path, help="lock file to write (default: the stack's image.airGap.lockFile)")
    parser.add_argument("--registries-conf", type=Path, metavar="FILE",
                        help="skopeo's containers-registries.conf (e.g. a site registry served over plain HTTP: "
                             "`[[registry]] location = \"host:port\"` with `insecure = true`)")
    parser.add_argument("--stack-file", type=Path, help="plan this file instead of stacks/Pulumi.<stack>.yaml")
    parser.add_argument("--only", action="append", default=[], metavar="REF",
                        help="copy only this image of the stack (repeatable); the lock keeps its other entries")
    args = parser.parse_args(argv)
    from stages.air_gap import lock_path

    if not args.list:
        from tools.cli import require

        require(args.skopeo)  # one line saying what to install (before the plan), not a FileNotFoundError later
    config, images = plan_images(args.stack, args.stack_file)
    if args.only:
        wanted = {normalized(ref) for ref in args.only}
        unknown = sorted(wanted - set(images))
        if unknown:
            print(f"mirror: --only {', '.join(unknown)}: not an image of stack '{args.stack}' (its images: "
                  f"{', '.join(images)})", file=sys.stderr)
            return 2
        images = [image for image in images if image in wanted]
    offline = config.image.air_gap
    if offline is None:
        print(f"mirror: stack '{args.stack}' has no image.airGap.siteRegistry: nothing to mirror into "
              '(docs/edge.md, "Air-gapped site")', file=sys.stderr)
        return 2
    skopeo = [args.skopeo, *(["--registries-conf", str(args.registries_conf)] if args.registries_conf else [])]
    if args.verify:
        path = args.lock or ROOT / lock_path(config)
        try:
            problems = verify_lock(read_lock(path), offline.prefix, skopeo=skopeo)
        except (OSError, LockError) as error:
            print(f"mirror: {error}", file=sys.stderr)
            return 2
        for problem in problems:
            print(f"mirror: {problem}", file=sys.stderr)
        print(f"mirror: {path}: " + ("every image is what the site serves" if not problems
                                     else f"{len(problems)} image(s) differ"))
        return 1 if problems else 0
    if args.list:
        for source in images:
            print(" ".join(copy_command(skopeo, source, site_copy(source, offline.site_registry,
                                                                       offline.prefix))))
        return 0
    try:
        lock = mirror(images, offline.site_registry, offline.prefix, skopeo=skopeo)
    except (RuntimeError, FileNotFoundError) as error:
        print(f"mirror: {error}", file=sys.stderr)
        return 1
    target = args.lock or ROOT / lock_path(config)
    if args.only and target.is_file():
        kept = read_lock(target)
        if kept.site_registry == lock.site_registry:
            lock = Lock(lock.site_registry, {**kept.images, **lock.images}, {**kept.platforms, **lock.platforms})
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(lock.to_json())
    print(f"mirror: {len(lock.images)} image(s) locked in {target}")
    return 0


if __name__ == "__main__":
    from tools.cli import run as run_cli

    sys.exit(run_cli(main))
