"""The README's config reference is generated from the config models and must stay in step with them."""

from tools.config_reference import render
from tests.conftest import ROOT


def test_readme_contains_the_current_config_reference() -> None:
    assert render() in (ROOT / "README.md").read_text(), "run `python -m tools.config_reference` and update README.md"


def test_readme_plan_diff_example_is_what_plan_diff_prints(tmp_path) -> None:
    """The "Reviewing a change" example is the real output for prod's A100 instance-type change."""
    import json
    import re

    import tools.plan as gtp_plan
    from tools.plan_diff import diff_plans
    from tests.conftest import plan_modified, plan_stack

    readme = (ROOT / "README.md").read_text()
    section = readme.split("## Reviewing a change", 1)[1].split("\n## ", 1)[0]
    example = re.search(r"```\n(.*?)\n```", section, re.S).group(1)
    base = json.loads(gtp_plan.render(plan_stack("prod"))[0])
    changed = plan_modified(tmp_path, "prod",
                            lambda config: config["gtp:gpuNodeGroups"]["a100"].update(instanceTypes=["p4de.24xlarge"]))
    assert diff_plans(base, json.loads(gtp_plan.render(changed)[0])) == example
    assert "+- aws:eks/nodeGroup:NodeGroup" in example


def test_readme_destroy_section_matches_the_cli() -> None:
    readme = (ROOT / "README.md").read_text()
    for flag in ("--yes", "--timeout-minutes"):
        assert flag in readme and flag in (ROOT / "tools" / "destroy.py").read_text()
    assert "named `bench-*`" in readme and "--show-secrets" in readme
