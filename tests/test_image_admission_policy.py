"""components/image_admission_policy.py: the cluster refuses a training pod whose image is neither the stack's own
build nor a signed digest (the production image rule, enforced where the pods are created)."""

from __future__ import annotations

import re
from itertools import pairwise

import pytest

from components.image_admission_policy import (
    IMAGES_EXPRESSION,
    MESSAGE_EXPRESSION,
    OLD_IMAGES_EXPRESSION,
    VALIDATION_EXPRESSION,
    allowed_images_expression,
    binding_spec,
    policy_spec,
)

OWN = "210987654321.dkr.ecr.us-east-1.amazonaws.com/gtp-prod-trainer@sha256:" + "a" * 64
SIGNED = "registry.example.com/team/train@sha256:" + "1" * 64

TOKEN = re.compile(r"\s+|'(?:[^'\\]|\\.)*'|[A-Za-z_][A-Za-z0-9_]*|\|\||&&|==|!=|[-+!?:.,()\[\]]")
IDENTIFIERS = {"object", "oldObject", "null", "variables", "images", "oldImages", "allowed", "spec", "containers",
               "initContainers", "ephemeralContainers", "image", "c", "has", "all", "filter", "map", "join", "in"}


def cel_shape(expression: str) -> list[str]:
    """A CEL expression's tokens, checking what a parser would refuse first: an unknown character or unterminated
    string, unbalanced brackets, a name outside the ones a Pod policy uses, an operator with no operand."""
    tokens, position = [], 0
    while position < len(expression):
        match = TOKEN.match(expression, position)
        assert match, f"unexpected character at {position}: {expression[position:position + 20]!r}"
        position = match.end()
        if not match.group().isspace():
            tokens.append(match.group())
    depth: list[str] = []
    pairs = {")": "(", "]": "["}
    for token in tokens:
        if token in "([":
            depth.append(token)
        elif token in pairs:
            assert depth and depth.pop() == pairs[token], f"unbalanced {token!r} in {expression!r}"
        elif token[0].isalpha() or token[0] == "_":
            assert token in IDENTIFIERS, f"unknown name {token!r} in {expression!r}"
    assert not depth, f"unclosed {depth} in {expression!r}"
    for before, after in pairwise(tokens):
        assert not (before in {"&&", "||", "+", "?", ":", ","} and after in {"&&", "||", ")", "]", ",", ":"}), \
            f"{before!r} without an operand before {after!r} in {expression!r}"
    return tokens


def test_the_expressions_have_the_shape_of_cel() -> None:
    for expression in (VALIDATION_EXPRESSION, MESSAGE_EXPRESSION, IMAGES_EXPRESSION, OLD_IMAGES_EXPRESSION,
                       allowed_images_expression([OWN, SIGNED])):
        cel_shape(expression)
    with pytest.raises(AssertionError, match="unbalanced"):
        cel_shape("object.spec.containers.all(c, c.image in variables.allowed))")


def test_the_allowed_list_is_a_cel_list_of_exactly_the_images_quoted() -> None:
    assert allowed_images_expression([OWN, SIGNED, OWN]) == f"['{OWN}', '{SIGNED}']"
    assert allowed_images_expression(["a'b\\c"]) == "['a\\'b\\\\c']"
    with pytest.raises(ValueError, match="at least the stack's own build"):
        allowed_images_expression([])


def test_every_container_kind_of_a_pod_is_checked() -> None:
    images, old, _ = policy_spec("training-prod", "['x']")["variables"]
    for field in ("containers", "initContainers", "ephemeralContainers"):
        assert f"object.spec.{field}" in images["expression"]
        assert f"oldObject.spec.{field}" in old["expression"]
    # an UPDATE is checked only for the images it introduces
    assert VALIDATION_EXPRESSION == "variables.images.all(c, c in variables.allowed || c in variables.oldImages)"


def test_the_policy_matches_pods_of_the_training_namespace_and_the_binding_denies() -> None:
    spec = policy_spec("training-prod", allowed_images_expression([OWN]))
    assert spec["failurePolicy"] == "Fail"
    assert spec["matchConstraints"]["namespaceSelector"] == {
        "matchLabels": {"kubernetes.io/metadata.name": "training-prod"}}
    (rule,) = spec["matchConstraints"]["resourceRules"]
    assert rule == {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"],
                    "resources": ["pods", "pods/ephemeralcontainers"]}
    assert [v["name"] for v in spec["variables"]] == ["images", "oldImages", "allowed"]  # defined before use
    (validation,) = spec["validations"]
    assert validation["expression"] == VALIDATION_EXPRESSION
    assert validation["reason"] == "Forbidden"
    assert binding_spec("gtp-prod-signed-images") == {"policyName": "gtp-prod-signed-images",
                                                      "validationActions": ["Deny"]}
