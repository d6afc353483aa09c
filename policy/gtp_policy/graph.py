"""Who depends on whom: the stack-wide view stack rules need (dependsOn, parent chain, provider)."""
from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Mapping, Sequence

from .model import Record


class StackIndex:
    """Indexes records by URN and answers dependency questions the way the Pulumi engine orders operations.

    Depending on a component resource means depending on all of its descendants (the engine waits for the
    children), so `dependsOn` edges to a component expand to its subtree. The parent chain is followed
    upwards only (a parent's other children are siblings, not dependencies).
    """

    def __init__(self, records: Sequence[Record]):
        self.records = list(records)
        self.by_urn: dict[str, Record] = {}
        self.children: dict[str, list[Record]] = defaultdict(list)
        for record in self.records:
            urn = record.get("urn")
            if urn:
                self.by_urn[urn] = record
        for record in self.records:
            parent = record.get("parent")
            if parent:
                self.children[parent].append(record)

    def of_type(self, *types: str) -> list[Record]:
        return [r for r in self.records if r.get("type") in types]

    def get(self, urn: str | None) -> Record | None:
        """A record by URN or by provider reference (`<urn>::<id>`)."""
        if not urn:
            return None
        if urn in self.by_urn:
            return self.by_urn[urn]
        head, sep, _ = urn.rpartition("::")
        if sep and head in self.by_urn:
            return self.by_urn[head]
        return None

    def provider_of(self, record: Record) -> Record | None:
        return self.get(record.get("provider"))

    def descendants(self, urn: str) -> Iterator[Record]:
        stack = list(self.children.get(urn, ()))
        while stack:
            child = stack.pop()
            yield child
            stack.extend(self.children.get(child.get("urn"), ()))

    def direct_dependencies(self, record: Record) -> list[Record]:
        """Records named in `dependsOn` (and `propertyDependencies`, when the plan records them), no expansion."""
        urns = list(record.get("dependsOn") or [])
        for deps in (record.get("propertyDependencies") or {}).values():
            urns.extend(deps or [])
        found = []
        for urn in urns:
            dep = self.get(urn)
            if dep is not None and dep not in found:
                found.append(dep)
        return found

    def upstream(self, record: Record, include_provider: bool = True) -> list[Record]:
        """Everything `record` transitively waits for: dependsOn (components expanded), parents, providers."""
        seen: dict[str, Record] = {}
        todo = [record]
        while todo:
            current = todo.pop()
            edges: list[Record] = []
            for dep in self.direct_dependencies(current):
                edges.append(dep)
                if not dep.get("custom", True):
                    edges.extend(self.descendants(dep["urn"]))
            parent = self.get(current.get("parent"))
            if parent is not None:
                edges.append(parent)
            if include_provider:
                provider = self.provider_of(current)
                if provider is not None:
                    edges.append(provider)
            for edge in edges:
                urn = edge.get("urn")
                if urn and urn not in seen and urn != record.get("urn"):
                    seen[urn] = edge
                    todo.append(edge)
        return list(seen.values())

    def depends_on_any(self, record: Record, candidates: Iterable[Record]) -> bool:
        wanted = {c.get("urn") for c in candidates}
        return any(r.get("urn") in wanted for r in self.upstream(record))


def by_type(records: Iterable[Record], types: Iterable[str]) -> list[Record]:
    wanted = set(types)
    return [r for r in records if r.get("type") in wanted]


def inputs(record: Record) -> Mapping:
    value = record.get("inputs")
    return value if isinstance(value, Mapping) else {}
