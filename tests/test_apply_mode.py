"""The program as an apply runs it: every output known, so every `apply` runs and the Pulumi SDK type-checks the
inputs a preview only sees as unknown (e.g. a list where the provider's schema has a string). The offline plan
itself mirrors `pulumi preview`, which can't catch those.

edge is left out: its image build refuses to start on the unpinned Jetson base (a config-level refusal, tested in
tests/test_placeholders.py and the image tests); its Kubernetes side is the same code dev and prod run here.
"""

from __future__ import annotations

import pytest

from verify import plan as gtp_plan

pytestmark = pytest.mark.program


@pytest.mark.parametrize("stack", ["dev", "prod", "edge-swarm"])
def test_every_resource_registers_with_known_outputs(stack: str) -> None:
    preview = gtp_plan.run(stack)
    applied = gtp_plan.run(stack, known_outputs=True)
    assert sorted(r.urn for r in applied.resources) == sorted(r.urn for r in preview.resources)


def test_a_list_where_the_provider_wants_a_string_fails_only_with_known_outputs() -> None:
    """The check has teeth: the FSx bug this mode found (subnet_ids as a one-element list) fails here."""
    import components.shared_storage as storage

    class WithList(storage.aws.fsx.LustreFileSystem):
        def __init__(self, resource_name, *args, subnet_ids, **kwargs):
            super().__init__(resource_name, *args, subnet_ids=subnet_ids.apply(lambda one: [one]), **kwargs)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(storage.aws.fsx, "LustreFileSystem", WithList)
        assert gtp_plan.run("prod").by_type("aws:fsx/lustreFileSystem:LustreFileSystem")  # a preview passes
        with pytest.raises(Exception, match="Expected 'list' got"):
            gtp_plan.run("prod", known_outputs=True)
