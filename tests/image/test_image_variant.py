"""The EFA variant of the image: built only for stacks with EFA groups, with the installer verified or refused."""

from __future__ import annotations

import pytest

from catalog import versions
from components import image_spec
from stack_config.derived import image_variant
from tests.conftest import ROOT
from tests.test_config import BASE, EXISTING, parse, with_

P5 = {"instanceTypes": ["p5.48xlarge"], "minSize": 0, "maxSize": 2, "availabilityZone": "us-west-2a"}


def test_no_efa_groups_build_the_default_variant():
    assert image_variant(parse(BASE)) == "default"
    assert image_variant(parse(EXISTING)) == "default"  # adopted nodes: EFA is never assumed


def test_an_efa_group_selects_the_efa_variant():
    assert image_variant(parse(with_(BASE, "gpuNodeGroups.big", P5))) == "efa"


def test_efa_switched_off_on_the_group_builds_the_default_variant():
    assert image_variant(parse(with_(BASE, "gpuNodeGroups.big", {**P5, "efa": False}))) == "default"


def test_efa_build_args_carry_the_pinned_installer_and_its_verification_pins():
    args = image_spec.build_args(net_variant="efa")
    assert args["NET_VARIANT"] == "efa" and args["EFA_INSTALLER_VERSION"] == versions.EFA_INSTALLER.version
    assert args["EFA_INSTALLER_GPG_FINGERPRINT"] == versions.EFA_INSTALLER.gpg_fingerprint
    assert args["EFA_INSTALLER_SHA256"] == (versions.EFA_INSTALLER.sha256 or "")
    assert "EFA_INSTALLER_VERSION" not in image_spec.build_args()
    with pytest.raises(ValueError, match="net_variant must be one of"):
        image_spec.build_args(net_variant="ib")


def test_the_installer_pins_have_the_form_the_build_checks():
    import dataclasses

    with pytest.raises(ValueError, match=r"gpg_fingerprint must be 40 upper-case hex digits without spaces \(as "
                                         r"`gpg --with-colons` prints it\), got '4E90 91BC"):
        dataclasses.replace(versions.EFA_INSTALLER, gpg_fingerprint="4E90 91BC BB97 A96B 26B1 5E59 A054 80B1 DD2D 3CCC")
    with pytest.raises(ValueError, match=r"sha256 must be 64 lower-case hex digits, got 'ABC'"):
        dataclasses.replace(versions.EFA_INSTALLER, sha256="ABC")


def test_variants_get_different_tags():
    context = ROOT / "images" / "trainer"
    def tag(variant: str) -> str:
        return image_spec.image_tag(context, image_spec.image_inputs(
            context, "linux/amd64", image_spec.build_args(net_variant=variant)))

    assert tag("default") != tag("efa")


def test_the_committed_prod_stack_is_not_refused_for_its_efa_installer():
    # Before: sha256 None refused every stack with EFA groups and image.build (prod): no way forward but the catalog.
    import stages.config
    from tests.conftest import plan_stack

    config = plan_stack("prod").config
    assert image_variant(config) == "efa" and config.image.build
    assert [p for p in stages.config.unpinned_build_inputs(config) if p.path == "image.build"] == []


def test_an_efa_installer_with_no_way_to_verify_it_is_refused_before_anything_is_registered(monkeypatch):
    # Without this, only the Dockerfile's efa-installer stage would fail, at `up`'s image build, after EKS and the p5
    # nodes existed.
    import dataclasses

    import stages.config
    from stack_config import ConfigError
    from verify import plan as gtp_plan

    unverifiable = dataclasses.replace(versions.EFA_INSTALLER, gpg_fingerprint=None, sha256=None)
    monkeypatch.setattr(versions, "EFA_INSTALLER", unverifiable)
    monkeypatch.setattr(stages.config, "under_mocks", lambda: False)
    monkeypatch.setattr(stages.config, "find_placeholders", lambda config: iter(()))
    partial = gtp_plan.Plan(project="gtp", stack="prod")
    with pytest.raises(ConfigError, match=r"image\.build: unpinned — image\.build is true and GPU group\(s\) a100, "
                                          r"h100 use EFA, so the image installs aws-efa-installer-[0-9.]+, which "
                                          r"catalog/versions\.py EFA_INSTALLER gives no way to verify \(neither "
                                          r"gpg_fingerprint nor sha256 is set\); pin the fingerprint of the key AWS "
                                          r"signs the installer with"):
        gtp_plan.run("prod", into=partial)
    assert partial.resources == []
    # Either pin is a way to verify it: no refusal.
    for pins in ({"gpg_fingerprint": "0" * 40}, {"sha256": "0" * 64}):
        monkeypatch.setattr(versions, "EFA_INSTALLER", dataclasses.replace(unverifiable, **pins))
        assert stages.config.unpinned_build_inputs(gtp_plan.run("prod").config) == [], pins


def test_the_offline_plan_warns_about_an_unverifiable_efa_installer(monkeypatch, capsys):
    import dataclasses

    from tests.conftest import plan_stack
    from verify import plan as gtp_plan

    monkeypatch.setattr(versions, "EFA_INSTALLER",
                        dataclasses.replace(versions.EFA_INSTALLER, gpg_fingerprint=None, sha256=None))
    gtp_plan.warn_placeholders(plan_stack("prod"))
    err = capsys.readouterr().err
    assert "warning: unpinned image.build: image.build is true and GPU group(s) a100, h100 use EFA" in err
