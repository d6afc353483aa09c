"""A minimal Kubernetes API client over the admin certificate: discovery and server-side apply per object (so each
object's acceptance or refusal is known by name), and list."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass
from typing import Any

from tools.cluster_test.control_plane import Cluster

FIELD_MANAGER = "gtp-cluster-test"


@dataclass(frozen=True)
class Resource:
    group_version: str
    plural: str
    namespaced: bool


class Api:
    def __init__(self, cluster: Cluster):
        self.base = f"https://127.0.0.1:{cluster.ports['apiserver']}"
        self.context = ssl.create_default_context(cafile=str(cluster.pki / "ca.crt"))
        self.context.load_cert_chain(str(cluster.pki / "admin.crt"), str(cluster.pki / "admin.key"))
        self.resources: dict[tuple[str, str], Resource] = {}

    def request(self, method: str, path: str, body: Any = None, content_type: str = "application/json",
                timeout: float = 30) -> Any:
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(self.base + path, data=data, method=method,
                                         headers={"Content-Type": content_type, "Accept": "application/json"})
        with urllib.request.urlopen(request, context=self.context, timeout=timeout) as answer:
            text = answer.read()
        return json.loads(text) if text else None

    def discover(self) -> None:
        """(apiVersion, kind) → resource, for every served version (call again after CRDs are established)."""
        versions = ["v1"]
        for group in self.request("GET", "/apis")["groups"]:
            versions += [v["groupVersion"] for v in group["versions"]]
        for group_version in versions:
            path = "/api/v1" if group_version == "v1" else f"/apis/{group_version}"
            try:
                listing = self.request("GET", path)
            except urllib.error.HTTPError:
                continue
            for resource in listing["resources"]:
                if "/" not in resource["name"]:
                    self.resources[(group_version, resource["kind"])] = Resource(
                        group_version, resource["name"], bool(resource["namespaced"]))

    def path(self, api_version: str, kind: str, namespace: str | None, name: str | None = None) -> str:
        resource = self.resources.get((api_version, kind))
        if resource is None:
            raise LookupError(f"the API serves no {kind} in {api_version} (is its CRD applied?)")
        root = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
        scope = f"/namespaces/{namespace}" if resource.namespaced and namespace else ""
        return f"{root}{scope}/{resource.plural}" + (f"/{urllib.parse.quote(name)}" if name else "")

    def apply(self, obj: dict[str, Any]) -> str | None:
        """Server-side apply one object; None when accepted, else the API's refusal message."""
        metadata = obj.get("metadata") or {}
        try:
            if not metadata.get("name"):
                # No name: Pulumi auto-names it at `up` (`<logical name>-<random>`); created with a generateName.
                obj = {**obj, "metadata": {**metadata, "generateName": metadata.get("generateName") or "auto-"}}
                self.request("POST", self.path(obj["apiVersion"], obj["kind"], metadata.get("namespace")), obj)
                return None
            path = self.path(obj["apiVersion"], obj["kind"], metadata.get("namespace"), metadata["name"])
            self.request("PATCH", f"{path}?fieldManager={FIELD_MANAGER}&force=true", obj,
                         content_type="application/apply-patch+yaml")
        except urllib.error.HTTPError as error:
            try:
                return str(json.loads(error.read()).get("message"))
            except ValueError:
                return f"HTTP {error.code}"
        except (LookupError, OSError) as error:
            return str(error)
        return None

    def items(self, api_version: str, kind: str) -> list[dict[str, Any]]:
        try:
            return self.request("GET", self.path(api_version, kind, None))["items"]
        except (LookupError, urllib.error.HTTPError):
            return []
