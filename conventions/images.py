"""Container image references, and where an air-gapped site keeps its copy of each (the mirror and its lock file).

An air-gapped site pulls every image from its own registry (`image.airGap.siteRegistry`). `make mirror` copies
each upstream image there (`tools/mirror.py`) and records the copy's digest in a lock file; the stack then
references the copy *by digest*. The site path of an upstream image is fixed by `site_repository`, so the mirror,
the lock and the stack agree on it without a table.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

DEFAULT_REGISTRY = "docker.io"
DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
LOCK_VERSION = 1
PLATFORM = re.compile(r"^[a-z0-9]+/[a-z0-9_]+(/[a-z0-9]+)?$")

# The grammar of github.com/distribution/reference v0.6.0 (the version tools/cluster_test/gomod/kubernetes/go.mod
# pins), regexp.go:44-129, and its length limit (reference.go:39 `RepositoryNameTotalLengthMax`).
_ALPHANUMERIC = r"[a-z0-9]+"
_SEPARATOR = r"(?:[._]|__|[-]+)"
_DOMAIN_NAME_COMPONENT = r"(?:[a-zA-Z0-9]|[a-zA-Z0-9][a-zA-Z0-9-]*[a-zA-Z0-9])"
_HOST = rf"(?:{_DOMAIN_NAME_COMPONENT}(?:\.{_DOMAIN_NAME_COMPONENT})*|\[(?:[a-fA-F0-9:]+)\])"
DOMAIN_AND_PORT = re.compile(rf"^{_HOST}(?::[0-9]+)?$")
"""A registry `host[:port]` (regexp.go:110 `domainAndPort`): no scheme, no path."""
_PATH_COMPONENT = rf"{_ALPHANUMERIC}(?:{_SEPARATOR}{_ALPHANUMERIC})*"
REPOSITORY_PATH = re.compile(rf"^{_PATH_COMPONENT}(?:/{_PATH_COMPONENT})*$")
"""A repository path under a registry (regexp.go:129 `remoteName`): lower-case components separated by '/'."""
REPOSITORY_NAME_MAX = 255
REFERENCE_GRAMMAR = "github.com/distribution/reference v0.6.0 regexp.go"


@dataclass(frozen=True)
class ImageRef:
    """A parsed reference `[registry/]path[:tag][@sha256:...]`, with Docker's defaults made explicit."""

    registry: str
    path: str
    tag: str | None
    digest: str | None

    @property
    def repository(self) -> str:
        return f"{self.registry}/{self.path}"

    def __str__(self) -> str:
        return self.repository + (f":{self.tag}" if self.tag else "") + (f"@{self.digest}" if self.digest else "")


def parse(reference: str) -> ImageRef:
    """Docker's normalisation (distribution/reference `ParseNormalizedNamed`): the first component is a registry
    only when it has a `.` or `:` or is `localhost`; otherwise the image is on Docker Hub, under `library/` when
    it has one component."""
    if not reference or any(c.isspace() for c in reference):
        raise ValueError(f"not an image reference: {reference!r}")
    name, _, digest = reference.partition("@")
    if digest and not DIGEST.match(digest):
        raise ValueError(f"{reference!r}: the digest must be sha256:<64 hex>")
    tag = None
    last = name.rsplit("/", 1)[-1]
    if ":" in last:
        tag = last.split(":", 1)[1]
        name = name[: len(name) - len(last)] + last.split(":", 1)[0]
    first, _, rest = name.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        registry, path = first, rest
    else:
        registry, path = DEFAULT_REGISTRY, name if "/" in name else f"library/{name}"
    return ImageRef(registry, path, tag or None, digest or None)


def normalized(reference: str) -> str:
    """The reference with registry (and `library/`) spelled out: `easydl/x:master` → `docker.io/easydl/x:master`."""
    return str(parse(reference))


def site_repository(source: str, site_registry: str, prefix: str) -> str:
    """Where the site keeps its copy of `source`: `<siteRegistry>/<prefix>/<source registry>/<source path>`.
    The source registry stays in the path so two upstreams' `foo/bar` never collide (a `:port` becomes `-port`:
    a repository path component may not contain `:`)."""
    ref = parse(source)
    parts = [site_registry.rstrip("/")] + ([prefix.strip("/")] if prefix.strip("/") else [])
    return "/".join(parts + [ref.registry.replace(":", "-"), ref.path])


def upstream_of(site_reference: str, site_registry: str, prefix: str) -> str | None:
    """The upstream image a site copy by tag names (`site_repository` read backwards; a `-port` is not undone, so
    only registries without a port come back exactly); None when it is not on the site's mirror path."""
    head = "/".join([site_registry.rstrip("/")] + ([prefix.strip("/")] if prefix.strip("/") else [])) + "/"
    if not site_reference.startswith(head):
        return None
    return normalized(site_reference[len(head):])


def site_tag(source: str) -> str:
    """The tag the copy gets: the source's tag, or `sha256-<hex>` for a digest-only source (a registry needs a
    tag to keep an image from garbage collection; cosign names its artefacts the same way)."""
    ref = parse(source)
    if ref.tag:
        return ref.tag
    if ref.digest:
        return ref.digest.replace(":", "-")
    return "latest"


def on_registry(image: str, site_registry: str) -> bool:
    """Whether `image` is pulled from `site_registry` (a host[:port], optionally with a path)."""
    prefix = site_registry.rstrip("/")
    return image.startswith(prefix) and len(image) > len(prefix) and image[len(prefix)] in "/@:"


# --- the lock file ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Lock:
    """`stacks/mirror/<stack>.lock.json`: each upstream image → its site copy by digest."""

    site_registry: str
    images: dict[str, str]
    """Normalised source reference → `<site repository>@sha256:<digest>`."""
    platforms: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """Normalised source reference → the platforms (`os/arch[/variant]`) its copy carries, as `make mirror` read
    them from the manifest list (or the single image's config); an image missing here is of unknown platforms."""

    def to_json(self) -> str:
        data: dict[str, Any] = {"version": LOCK_VERSION, "siteRegistry": self.site_registry,
                                "images": dict(sorted(self.images.items()))}
        if self.platforms:
            data["platforms"] = {source: list(found) for source, found in sorted(self.platforms.items())}
        return json.dumps(data, indent=2) + "\n"

    def source_of(self, site_reference: str) -> str | None:
        """The upstream image a site copy (by digest) was mirrored from."""
        if "@" not in site_reference:
            return None
        repository, digest = site_reference.split("@", 1)
        for source, pinned in self.images.items():
            # A chart may compose `repository:tag@digest`: the digest and the repository decide.
            if pinned.split("@", 1)[1] == digest and repository.startswith(pinned.split("@", 1)[0]):
                return source
        return None


class LockError(ValueError):
    pass


def read_lock(path: Path) -> Lock:
    """The lock file, validated (every entry by digest, on the lock's site registry); LockError names the key."""
    try:
        data: Any = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise LockError(f"{path}: not JSON ({error})") from error
    if not isinstance(data, dict) or data.get("version") != LOCK_VERSION:
        raise LockError(f"{path}: expected an object with \"version\": {LOCK_VERSION}")
    site = data.get("siteRegistry")
    images = data.get("images")
    if not isinstance(site, str) or not site:
        raise LockError(f"{path}: siteRegistry: expected the site registry's host[:port], got {site!r}")
    if not isinstance(images, dict):
        raise LockError(f"{path}: images: expected an object source → site reference by digest, got {images!r}")
    for source, pinned in images.items():
        if not (isinstance(pinned, str) and "@" in pinned and DIGEST.match(pinned.split("@", 1)[1])
                and on_registry(pinned, site)):
            raise LockError(f"{path}: images.{source}: expected '{site}/...@sha256:<64 hex>', got {pinned!r}")
    platforms = data.get("platforms") or {}
    if not isinstance(platforms, dict) or not all(
            isinstance(found, list) and all(isinstance(p, str) and PLATFORM.match(p) for p in found)
            for found in platforms.values()):
        raise LockError(f"{path}: platforms: expected an object source → ['os/arch[/variant]', ...], got "
                        f"{platforms!r}")
    return Lock(site, {normalized(source): pinned for source, pinned in images.items()},
                {normalized(source): tuple(found) for source, found in platforms.items()})
