"""verify/simulate/queries.py without a Prometheus: the relabel port, the scrape's label merge, the selectors, KEDA's
and the HPA's arithmetic, and the plan-time `queries` check on the prod stack's rendered cluster (pass and fail)."""

from __future__ import annotations

import copy
import dataclasses

import pytest

from tests.conftest import plan_variant
from verify.render import ClusterObject, render_cluster
from verify.simulate import queries

_OBJECTS: list[ClusterObject] = []


def prod_objects() -> list[ClusterObject]:
    if not _OBJECTS:
        _OBJECTS.extend(render_cluster(plan_variant("prod-keda")))
    return _OBJECTS


# ---------------------------------------------------------------- relabel actions (Prometheus 3.6 semantics)

def test_replace_with_groups_and_the_default_regex() -> None:
    rules = [{"source_labels": ["__address__", "port"], "regex": r"(.+?)(?::\d+)?;(\d+)", "replacement": "$1:$2",
              "target_label": "__address__"},
             {"source_labels": ["ns"], "target_label": "namespace"}]
    out = queries.relabel({"__address__": "10.0.0.1:80", "port": "9400", "ns": "gpu"}, rules)
    assert out == {"__address__": "10.0.0.1:9400", "port": "9400", "ns": "gpu", "namespace": "gpu"}


def test_replace_without_a_match_changes_nothing_and_an_empty_result_deletes() -> None:
    assert queries.relabel({"a": "x"}, [{"source_labels": ["a"], "regex": "y", "target_label": "b"}]) == {"a": "x"}
    assert queries.relabel({"a": "x", "b": "1"}, [{"source_labels": ["missing"], "target_label": "b"}]) == {"a": "x"}


def test_go_template_expansion_treats_1x_as_a_group_name() -> None:
    # Go's Expand reads the longest name: `$1x` is the (missing) group `1x`, `${1}x` is group 1 then `x`.
    out = queries.relabel({"a": "v"}, [{"source_labels": ["a"], "regex": "(v)", "replacement": "$1x",
                                        "target_label": "b"},
                                       {"source_labels": ["a"], "regex": "(v)", "replacement": "${1}x",
                                        "target_label": "c"}])
    assert "b" not in out and out["c"] == "vx"


def test_keep_and_drop_are_anchored_and_read_yaml_booleans_as_text() -> None:
    keep = [{"action": "keep", "source_labels": ["s"], "regex": True}]
    assert queries.relabel({"s": "true"}, keep) == {"s": "true"}
    assert queries.relabel({"s": "true-ish"}, keep) is None  # anchored: ^(?s:true)$
    assert queries.relabel({}, keep) is None
    assert queries.relabel({"s": "true"}, [{"action": "drop", "source_labels": ["s"], "regex": "tru"}]) == {"s": "true"}


def test_labelmap_labeldrop_labelkeep() -> None:
    labels = {"__meta_kubernetes_service_label_app": "dcgm", "__meta_x": "1", "job": "j"}
    mapped = queries.relabel(labels, [{"action": "labelmap", "regex": "__meta_kubernetes_service_label_(.+)"}])
    assert mapped["app"] == "dcgm"
    assert queries.relabel(labels, [{"action": "labeldrop", "regex": "__meta_.*"}]) == {"job": "j"}
    assert queries.relabel(labels, [{"action": "labelkeep", "regex": "job"}]) == {"job": "j"}


def test_hashmod_lowercase_uppercase_keepequal_dropequal() -> None:
    out = queries.relabel({"a": "Foo"}, [{"action": "hashmod", "source_labels": ["a"], "modulus": 10,
                                          "target_label": "h"},
                                         {"action": "lowercase", "source_labels": ["a"], "target_label": "lo"},
                                         {"action": "uppercase", "source_labels": ["a"], "target_label": "up"}])
    # md5("Foo") = 1356c67d7ad1638d816bfb822dd2c25d; last 8 bytes 0x816bfb822dd2c25d % 10 (Prometheus' hashmod)
    assert out["h"] == str(0x816BFB822DD2C25D % 10) and out["lo"] == "foo" and out["up"] == "FOO"
    assert queries.relabel({"a": "x", "b": "x"}, [{"action": "keepequal", "source_labels": ["a"], "target_label": "b"}])
    assert queries.relabel({"a": "x", "b": "x"}, [{"action": "dropequal", "source_labels": ["a"],
                                                   "target_label": "b"}]) is None


def test_an_unknown_action_is_an_error_naming_it() -> None:
    with pytest.raises(queries.RelabelError, match="'rename'.*replace, keep"):
        queries.relabel({}, [{"action": "rename"}])


# ---------------------------------------------------------------- the scrape's label merge

def test_honor_labels_keeps_the_exposed_value_else_it_is_exported() -> None:
    target = {"namespace": "nvidia-device-plugin", "job": "j", "__address__": "a:1"}
    exposed = {"__name__": "m", "namespace": "training", "pod": "w-0"}
    honored = queries.scraped_labels(target, exposed, honor_labels=True)
    assert honored["namespace"] == "training" and "exported_namespace" not in honored and "__address__" not in honored
    renamed = queries.scraped_labels(target, exposed, honor_labels=False)
    assert renamed["namespace"] == "nvidia-device-plugin" and renamed["exported_namespace"] == "training"
    assert renamed["pod"] == "w-0"


# ---------------------------------------------------------------- selectors, KEDA and HPA arithmetic

def test_selectors_read_every_matcher_kind() -> None:
    (selector,) = queries.selectors('avg(m{a="1", b!="2",c=~"x-[0-9]+",d!~"y"})')
    assert [str(m) for m in selector] == ['__name__="m"', 'a="1"', 'b!="2"', 'c=~"x-[0-9]+"', 'd!~"y"']
    assert selector[3].matches({"c": "x-12"}) and not selector[3].matches({"c": "ax-12"})
    with pytest.raises(ValueError, match="can't read the label matchers"):
        queries.selectors("m{a=1}")


def test_keda_reads_an_empty_result_as_zero_and_rejects_several_elements() -> None:
    assert queries.keda_value({"data": {"result": []}}) == 0
    with pytest.raises(ValueError, match="result is empty"):
        queries.keda_value({"data": {"result": []}}, ignore_null_values=False)
    with pytest.raises(ValueError, match="multiple elements"):
        queries.keda_value({"data": {"result": [{"value": [0, "1"]}, {"value": [0, "2"]}]}})


@pytest.mark.parametrize(("metric_type", "value", "current", "expected"), [
    ("Value", 95, 3, 4),     # ceil(3 × 95/85) = 4
    ("Value", 90, 3, 3),     # 90/85 within the 10 % tolerance: unchanged
    ("Value", 40, 3, 2),     # ceil(3 × 40/85) = 2
    ("Value", 0, 3, 2),      # clamped to minReplicaCount
    ("Value", 300, 3, 4),    # clamped to maxReplicaCount
    ("AverageValue", 95, 3, 2),  # ceil(95/85) = 2: an average as AverageValue ignores the replica count
])
def test_hpa_desired_replicas(metric_type: str, value: float, current: int, expected: int) -> None:
    assert queries.hpa_desired_replicas(metric_type=metric_type, value=value, threshold=85, current=current,
                                        ready=current, minimum=2, maximum=4) == expected


def test_disabled_scale_down_keeps_the_current_count_but_still_scales_out() -> None:
    common = {"metric_type": "Value", "threshold": 85, "current": 3, "ready": 3, "minimum": 2, "maximum": 4,
              "scale_down_disabled": True}
    assert queries.hpa_desired_replicas(value=20, **common) == 3
    assert queries.hpa_desired_replicas(value=95, **common) == 4


def test_prod_scaledobject_never_scales_in() -> None:
    (trigger,), _ = queries.triggers(prod_objects())
    assert trigger.scale_down_disabled


def test_activation_is_strictly_above_the_threshold() -> None:
    assert queries.is_active(0.1, 0) and not queries.is_active(0, 0) and not queries.is_active(5, 5)


# ---------------------------------------------------------------- the plan-time check on the prod stack

def test_the_chart_job_keeping_dcgm_exporter_is_the_honor_labels_endpoints_job() -> None:
    objects = prod_objects()
    jobs = queries.scraping_jobs(queries.prometheus_config(objects), queries.dcgm_exporter(objects),
                                 queries.exporter_pods(1))
    assert [(job["job_name"], job["honor_labels"], target["__address__"]) for job, _, target in jobs] == [
        ("kubernetes-service-endpoints", True, "10.0.1.17:9400")]


def test_prod_queries_are_verified() -> None:
    (result,) = queries.check(prod_objects())
    assert (result.passed, result.total, result.findings) == (1, 1, [])
    assert "verified" in result.details[0]


def _with_query(objects: list[ClusterObject], query: str) -> list[ClusterObject]:
    changed = []
    for item in objects:
        if item.kind == "ScaledObject":
            obj = copy.deepcopy(item.obj)
            obj["spec"]["triggers"][0]["metadata"]["query"] = query
            item = dataclasses.replace(item, obj=obj)
        changed.append(item)
    return changed


@pytest.mark.parametrize(("query", "rule"), [
    ('avg(DCGM_FI_DEV_GPU_UTIL{exported_namespace="training-prod",exported_pod=~"gpt-pretrain-worker-[0-9]+"})',
     "misses the GPU series"),  # old failure #5
    ('avg(DCGM_FI_DEV_GPU_UTIL{pod=~"gpt-pretrain-worker-[0-9]+"})', "also selects"),  # any namespace
    ('avg(DCGM_FI_DEV_GPU_UTIL{namespace="training-prod",pod=~"gpt-pretrain-.*"})',
     "also selects"),  # job gpt-pretrain-v2
    ('avg(DCGM_FI_PROF_SM_ACTIVE{namespace="training-prod",pod=~"gpt-pretrain-worker-[0-9]+"})', "not enabled"),
])
def test_a_wrong_query_is_a_finding(query: str, rule: str) -> None:
    (result,) = queries.check(_with_query(prod_objects(), query))
    assert result.passed == 0 and result.total == 1 and rule in result.findings[0].rule


def test_without_honor_labels_the_current_query_would_miss() -> None:
    objects = []
    for item in prod_objects():
        if item.kind == "ConfigMap" and "prometheus.yml" in (item.obj.get("data") or {}):
            obj = copy.deepcopy(item.obj)
            obj["data"]["prometheus.yml"] = obj["data"]["prometheus.yml"].replace("honor_labels: true",
                                                                                  "honor_labels: false")
            item = dataclasses.replace(item, obj=obj)
        objects.append(item)
    (result,) = queries.check(objects)
    assert result.passed == 0 and "honor_labels False" in result.findings[0].rule


def test_without_the_scrape_annotation_no_job_keeps_dcgm_exporter() -> None:
    objects = []
    for item in prod_objects():
        if item.kind == "Service" and item.name == "dcgm-exporter":
            obj = copy.deepcopy(item.obj)
            del obj["metadata"]["annotations"]["prometheus.io/scrape"]
            item = dataclasses.replace(item, obj=obj)
        objects.append(item)
    (result,) = queries.check(objects)
    assert result.passed == 0 and "no scrape job" in result.findings[0].rule


def test_a_queue_triggered_scaledjob_has_nothing_to_verify() -> None:
    scaled_job = ClusterObject("stack", {"apiVersion": "keda.sh/v1alpha1", "kind": "ScaledJob",
                                         "metadata": {"name": "mnist", "namespace": "training-dev"},
                                         "spec": {"triggers": [{"type": "aws-sqs-queue", "metadata": {}}]}})
    (result,) = queries.check([scaled_job])
    assert (result.passed, result.total) == (0, 0) and "aws-sqs-queue" in result.details[0]
    assert queries.check([]) == []
