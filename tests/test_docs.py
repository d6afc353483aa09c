"""The README's config reference is generated from the config models and must stay in step with them."""

from tools.config_reference import render
from tests.conftest import ROOT


def test_readme_contains_the_current_config_reference() -> None:
    assert render() in (ROOT / "README.md").read_text(), "run `python -m tools.config_reference` and update README.md"
