"""`make up-test`'s harness without the CLI or a cluster: the built engine and provider agree with the SDKs the
program pins, the test stacks derive from their sources as documented, the mock-vs-real kinds recognise what they
say and nothing else, the planted mistakes are what the checks must catch, and the change comparison. The real run
(tools/up_test/run.py) is `make up-test`."""

from __future__ import annotations

import copy
import json
import re
from importlib import metadata
from pathlib import Path

import pulumi_kubernetes
import pytest
import yaml

from catalog import versions
from policy.gtp_policy import rules_kubernetes
from policy.gtp_policy.model import Facts
from stages.config import parse_stack_config
from tools.cluster_test import build
from tools.up_test import differences, pulumi_home, run, step
from tools.up_test.differences import ABSENT, Difference
from tools.up_test.stacks import STACKS, TEST_DIGEST, derive, stack_file_text, with_change
from verify.plan import stack_config as read_stack
from verify.plan_diff import flatten

ROOT = Path(__file__).resolve().parents[2]


def _requirement(name: str) -> str:
    found = re.search(rf"^{re.escape(name)}==(\S+)", (ROOT / "requirements.txt").read_text(), re.M)
    assert found, f"requirements.txt must pin {name}"
    return found.group(1)


def _version(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.lstrip("v").split("."))


# --- the built engine and plugins against the SDK pins ------------------------------------------------------------


def test_the_built_provider_is_the_version_the_sdk_requests():
    # The engine loads a plugin whose version is at least the SDK's (sdk/go/common/workspace/plugins.go
    # LegacySelectCompatiblePlugin at v3.274.0); the SDK requests the version in its pulumi-plugin.json.
    plugin = json.loads((Path(pulumi_kubernetes.__file__).parent / "pulumi-plugin.json").read_text())
    assert plugin["version"] == _requirement("pulumi-kubernetes") == versions.PULUMI_KUBERNETES_PROVIDER
    provider = next(b for b in build.BINARIES if b.name == "pulumi-resource-kubernetes")
    assert f"version.Version={versions.PULUMI_KUBERNETES_PROVIDER}" in provider.ldflags
    assert pulumi_home.plugin_folder(Path("/h")).name == f"resource-kubernetes-v{plugin['version']}"


def test_the_provider_module_is_the_tag_of_the_sdk_version():
    # provider/v4 is served only at a pseudo-version; its sdk/v4 replace is the tag itself.
    go_mod = (build.GOMOD / "pulumi-kubernetes" / "go.mod").read_text()
    assert f"github.com/pulumi/pulumi-kubernetes/provider/v4 {versions.PULUMI_KUBERNETES_PROVIDER_MODULE}" in go_mod
    assert re.search(r"sdk/v4 => github.com/pulumi/pulumi-kubernetes/sdk/v4 v" +
                     re.escape(versions.PULUMI_KUBERNETES_PROVIDER) + r"$", go_mod, re.M)


def test_the_cli_serves_the_python_sdk_it_runs():
    # The CLI must be the SDK's major version and not older than it (the SDK's automation API refuses an older CLI:
    # pulumi/automation/_cmd.py, its minimum version).
    sdk = _requirement("pulumi")
    assert metadata.version("pulumi") == sdk
    cli = versions.PULUMI_CLI_VERSION
    assert _version(cli)[0] == _version(sdk)[0] and _version(cli) >= _version(sdk)
    binary = next(b for b in build.BINARIES if b.name == "pulumi")
    assert f"Version={cli}" in binary.ldflags


def test_checksums_name_each_installed_binary(tmp_path):
    (tmp_path / "a").write_bytes(b"x")
    link = tmp_path / "link"
    link.symlink_to(tmp_path / "a")
    assert pulumi_home.checksums({"a": link}) == {
        "a": "2d711642b726b04401627ca9fbac32f5c8530fb1903cc4db02258717921a4881"}


def test_the_policy_runner_runs_the_pack_with_the_given_python(tmp_path):
    runner = pulumi_home.policy_runner(tmp_path / "home", ROOT / "policy", Path("/venv/bin/python"))
    text = runner.read_text()
    assert runner.stat().st_mode & 0o111
    assert text.splitlines()[-1] == f'exec /venv/bin/python -u -m pulumi.policy "$1" {ROOT / "policy"}'
    assert (runner.parent / "PulumiPolicy.yaml").resolve() == (ROOT / "policy" / "PulumiPolicy.yaml").resolve()


def test_the_environment_keeps_the_cli_off_the_network(tmp_path):
    env = pulumi_home.environment(tmp_path / "home", tmp_path / "state")
    assert env["PULUMI_BACKEND_URL"] == f"file://{tmp_path / 'state'}"
    assert env["PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION"] == "true"
    assert env["PATH"].split(":")[0] == str(tmp_path / "home" / "bin")


# --- the test stacks ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(STACKS))
def test_a_test_stack_is_its_source_with_only_the_listed_differences(name, tmp_path):
    test = STACKS[name]
    source = yaml.safe_load((ROOT / "stacks" / f"Pulumi.{test.source}.yaml").read_text())["config"]
    derived = derive(test)
    changed = {key for key in set(source) | set(derived) if source.get(key) != derived.get(key)}
    listed = {f"gtp:{path.split('.')[0]}" for path in test.differences}
    assert changed <= listed, f"{sorted(changed - listed)} differ from {test.source} without a reason listed"
    assert not any(f"gtp:{key}" in derived for key in test.secrets), "secrets are set by the harness"
    assert derived["gtp:image"]["reference"].endswith(TEST_DIGEST)
    # The stack file is one the program accepts, with the secrets the harness sets, before and after the change.
    configs = [derived]
    for change in test.changes:
        configs.append(with_change(configs[-1], change))
    for config in configs:
        path = tmp_path / f"Pulumi.{name}.yaml"
        path.write_text(stack_file_text(config, "v1:salt", secrets=dict.fromkeys(test.secrets, "v1:x")))
        _, engine_config, secrets = read_stack(ROOT, name, path)
        raw = {k.split(":", 1)[1]: json.loads(v) if isinstance(v, str) and v[:1] in "{[" else v
               for k, v in engine_config.items() if k.startswith("gtp:")}
        assert sorted(secrets) == sorted(f"gtp:{key}" for key in test.secrets)
        parse_stack_config(raw, stack=name, secret_keys=[key.split(":", 1)[1] for key in secrets])


@pytest.mark.parametrize("name", sorted(STACKS))
def test_each_change_changes_one_value(name):
    test = STACKS[name]
    assert test.changes, "a test stack has a change to preview"
    config = derive(test)
    for path, value in test.changes:
        snapshot = copy.deepcopy(config)
        changed = with_change(config, (path, value))
        assert config == snapshot, "with_change leaves its argument as it was"
        before, after = flatten(config), flatten(changed)
        assert {key for key in {*before, *after} if before.get(key) != after.get(key)} == {f"gtp:{path}"}, path
        assert after[f"gtp:{path}"] == value
        config = changed


# --- the planted mistakes ----------------------------------------------------------------------------------------


def test_the_planted_changing_input_changes_on_every_run():
    props = {"metadata": {"name": "ns", "annotations": {"a": "b"}}}
    first = step.planted("changing-input", "kubernetes:core/v1:Namespace", props)
    second = step.planted("changing-input", "kubernetes:core/v1:Namespace", props)
    assert first and second
    assert first["metadata"]["annotations"]["a"] == "b"
    assert first["metadata"]["annotations"][step.PLANTED_ANNOTATION] != \
        second["metadata"]["annotations"][step.PLANTED_ANNOTATION]
    assert props == {"metadata": {"name": "ns", "annotations": {"a": "b"}}}, "the inputs given are not changed"
    assert step.planted("changing-input", "kubernetes:core/v1:ConfigMap", props) is None


def test_the_planted_policy_violation_is_one_the_pack_refuses():
    props = {"metadata": {"namespace": "gpu-readiness"},
             "spec": {"template": {"spec": {"containers": [{"name": "check", "image": "x"}]}}}}
    changed = step.planted("policy-violation", "kubernetes:batch/v1:Job", props)
    assert changed is not None
    record = {"type": "kubernetes:batch/v1:Job", "inputs": changed}
    facts = Facts(stack="uptest-edge", ephemeral=False, production=False)
    findings = list(rules_kubernetes.k8s_no_host_namespaces(record, facts))
    assert [finding.field for finding in findings] == ["spec.template.spec.hostNetwork"]
    assert not list(rules_kubernetes.k8s_no_host_namespaces({"type": "kubernetes:batch/v1:Job", "inputs": props},
                                                            facts))


def test_an_unknown_plant_is_refused():
    with pytest.raises(ValueError, match="unknown plant 'typo'"):
        step.planted("typo", "kubernetes:core/v1:Namespace", {})


# --- mock vs real ------------------------------------------------------------------------------------------------

STACK_URN = "urn:pulumi:s::gtp::pulumi:pulumi:Stack::gtp-s"
PROVIDER = "urn:pulumi:s::gtp::gtp:cluster:ClusterAccess$pulumi:providers:kubernetes::k8s"
COMPONENT = "urn:pulumi:s::gtp::gtp:workload:TrainingOperators::operators"
CONFIG_FILE = "urn:pulumi:s::gtp::gtp:workload:TrainingOperators$kubernetes:yaml/v2:ConfigFile::dlrover"
JOB = "urn:pulumi:s::gtp::gtp:x:Gate$kubernetes:batch/v1:Job::gate"


def _mock(urn, type_, inputs, *, custom=True, parent=STACK_URN, depends_on=()):
    return {"urn": urn, "type": type_, "custom": custom, "parent": parent, "provider": PROVIDER if custom else None,
            "dependsOn": list(depends_on), "options": {"protect": False, "retainOnDelete": False,
                                                       "ignoreChanges": []}, "inputs": inputs}


def _real(urn, type_, inputs, *, custom=True, parent=STACK_URN, dependencies=()):
    out = {"urn": urn, "type": type_, "custom": custom, "parent": parent, "inputs": inputs,
           "dependencies": list(dependencies)}
    if custom:
        out["provider"] = f"{PROVIDER}::0b2f"
    return out


def _kinds(plan_resources, state_resources):
    found = differences.compare({"resources": plan_resources}, {"deployment": {"resources": state_resources}})
    return {(d.urn, d.what): d.kind for d in found}


def test_each_kind_recognises_its_own_difference():
    plan = [_mock(COMPONENT, "gtp:workload:TrainingOperators", {"namespace": "x"}, custom=False),
            _mock(JOB, "kubernetes:batch/v1:Job", {"metadata": {"namespace": "n"}, "suspend": False,
                                                   "spec": {"image": "<computed>"}, "token": "[secret]"})]
    default = "urn:pulumi:s::gtp::pulumi:providers:pulumi::default"
    state = [_real(STACK_URN, "pulumi:pulumi:Stack", {}, custom=False, parent=""),
             _real(default, "pulumi:providers:pulumi", {}, custom=True),
             _real(COMPONENT, "gtp:workload:TrainingOperators", {}, custom=False),
             _real(JOB, "kubernetes:batch/v1:Job",
                   {"metadata": {"namespace": "n", "name": "gate-1a2b",
                                 "annotations": {differences.AUTONAME_ANNOTATION: "true"}},
                    "backoffLimit": 6, "spec": {"image": "r@sha256:1"},
                    "token": {differences.SECRET_SIGNATURE: "1b47061264138c4ac30d75fd1eb44270", "ciphertext": "z"},
                    "__defaults": ["metadata.name"]},
                   dependencies=[COMPONENT])]
    assert _kinds(plan, state) == {
        (STACK_URN, "resource"): "engine resource",
        (default, "resource"): "engine resource",
        (COMPONENT, "inputs.namespace"): "component inputs",
        (JOB, "inputs.metadata.name"): "auto-name",
        (JOB, f"inputs.metadata.annotations.{differences.AUTONAME_ANNOTATION}"): "auto-name",
        (JOB, "inputs.backoffLimit"): "provider default",
        (JOB, "inputs.suspend"): "zero value dropped",
        (JOB, "inputs.spec.image"): "known after apply",
        (JOB, "dependency"): "implicit dependency",
    }


@pytest.mark.parametrize(("mock_inputs", "real_inputs", "what"), [
    ({"image": "a@sha256:1"}, {"image": "a@sha256:2"}, "inputs.image"),  # a value the engine got differently
    ({"replicas": 2}, {}, "inputs.replicas"),  # a value the provider dropped that is not a zero value
    ({"secret": "plain"}, {"secret": {differences.SECRET_SIGNATURE: "x"}}, "inputs.secret"),  # secret only for real
])
def test_a_value_the_engine_sent_differently_is_unexplained(mock_inputs, real_inputs, what):
    kinds = _kinds([_mock(JOB, "kubernetes:batch/v1:Job", mock_inputs)],
                   [_real(JOB, "kubernetes:batch/v1:Job", real_inputs)])
    assert kinds == {(JOB, what): differences.UNEXPLAINED}


def test_structure_the_mocks_got_wrong_is_unexplained():
    mock = _mock(JOB, "kubernetes:batch/v1:Job", {}, depends_on=[COMPONENT])
    mock["options"]["protect"] = True
    real = _real(JOB, "kubernetes:batch/v1:Job", {}, parent=COMPONENT)
    real["provider"] = "urn:pulumi:s::gtp::pulumi:providers:kubernetes::default_4_25_0::1"
    assert _kinds([mock], [real]) == {
        (JOB, "parent"): differences.UNEXPLAINED,
        (JOB, "provider"): differences.UNEXPLAINED,
        (JOB, "dependency"): differences.UNEXPLAINED,  # depends_on the engine did not get
        (JOB, "options.protect"): differences.UNEXPLAINED,
    }
    only_mock = _kinds([_mock(JOB, "kubernetes:batch/v1:Job", {})], [])
    assert only_mock == {(JOB, "resource"): differences.UNEXPLAINED}


def test_a_known_provider_behaviour_is_named_for_its_type_only():
    release = "urn:pulumi:s::gtp::gtp:x:Y$kubernetes:helm.sh/v3:Release::r"
    kinds = _kinds([_mock(release, "kubernetes:helm.sh/v3:Release", {"compat": "true"}),
                    _mock(JOB, "kubernetes:batch/v1:Job", {"compat": "true"})],
                   [_real(release, "kubernetes:helm.sh/v3:Release", {}), _real(JOB, "kubernetes:batch/v1:Job", {})])
    assert kinds[(release, "inputs.compat")] == differences.PROVIDER_SPECIFIC
    assert kinds[(JOB, "inputs.compat")] == differences.UNEXPLAINED


def test_the_summary_lists_each_kind_with_why():
    found = [Difference(JOB, "inputs.x", ABSENT, 1, "provider default"),
             Difference(JOB, "inputs.y", 1, 2, differences.UNEXPLAINED)]
    out = differences.summary(found)
    assert out["provider default"]["why"] == differences.KINDS["provider default"][0]
    assert out["provider default"]["differences"] == [f"{JOB}: inputs.x: (absent) (mock) vs 1 (real) "
                                                      "[provider default]"]
    assert "no known kind" in out[differences.UNEXPLAINED]["why"]


# --- the change: plan-diff's prediction against the real preview --------------------------------------------------


def _plan(*resources):
    return {"resources": list(resources)}


def test_the_change_comparison_agrees_only_on_the_same_steps():
    base = _plan(_mock(JOB, "kubernetes:batch/v1:Job", {"spec": {"parallelism": 1}}),
                 _mock(COMPONENT, "gtp:workload:TrainingOperators", {}, custom=False))
    head = _plan(_mock(JOB, "kubernetes:batch/v1:Job", {"spec": {"parallelism": 2}}),
                 _mock(COMPONENT, "gtp:workload:TrainingOperators", {}, custom=False))
    same = [{"urn": COMPONENT, "op": "same"}]
    assert run.compare_change(base, head, [*same, {"urn": JOB, "op": "update"}])["agree"]
    disagree = run.compare_change(base, head, [*same, {"urn": JOB, "op": "replace"},
                                               {"urn": JOB, "op": "create-replacement"}])
    assert not disagree["agree"] and disagree["real"] == {JOB: "replace"} and disagree["predicted"] == {
        JOB: "update"}
    assert not run.compare_change(base, head, same)["agree"]


def test_a_config_files_objects_are_compared_as_the_provider_registers_them(tmp_path, monkeypatch):
    """The mock side holds each ConfigFile's objects (verify/render.py `config_file_children`): an object of the
    real state the file does not hold is unexplained, and one it holds is compared field by field."""
    manifest = "vendor/operators/dlrover-v0.6.1.yaml"
    plan = [_mock(CONFIG_FILE, "kubernetes:yaml/v2:ConfigFile", {"file": manifest}, custom=False,
                  parent=COMPONENT)]
    plan[0]["provider"] = PROVIDER
    from verify.render import config_file_children

    children = config_file_children(plan[0])
    assert children, f"{manifest} holds objects"
    state = [_real(CONFIG_FILE, "kubernetes:yaml/v2:ConfigFile", {}, custom=False, parent=COMPONENT)]
    state += [_real(child["urn"], child["type"], child["inputs"], parent=CONFIG_FILE) for child in children]
    stray = CONFIG_FILE.replace("::dlrover", "$kubernetes:core/v1:ConfigMap::dlrover:dlrover/stray")
    state.append(_real(stray, "kubernetes:core/v1:ConfigMap", {}, parent=CONFIG_FILE))
    changed = dict(state[1]["inputs"], apiVersion="changed/v9")
    state[1] = {**state[1], "inputs": changed}
    kinds = _kinds(plan, state)
    assert kinds == {(stray, "resource"): differences.UNEXPLAINED,
                     (children[0]["urn"], "inputs.apiVersion"): differences.UNEXPLAINED,
                     (CONFIG_FILE, "provider"): "component provider",
                     (CONFIG_FILE, "inputs.file"): "component inputs"}


def test_a_replacement_whose_old_one_goes_first_is_told_apart():
    def job(image, name=None):
        metadata = {"namespace": "t", **({"name": name} if name else {})}
        return _mock(JOB, "kubernetes:batch/v1:Job", {"metadata": metadata,
                                                      "spec": {"template": {"spec": {"image": image}}}})

    first = [{"urn": JOB, "op": "delete-replaced"}, {"urn": JOB, "op": "replace"},
             {"urn": JOB, "op": "create-replacement"}]
    after = [{"urn": JOB, "op": "create-replacement"}, {"urn": JOB, "op": "replace"},
             {"urn": JOB, "op": "delete-replaced"}]
    named = run.compare_change(_plan(job("a", "fixed")), _plan(job("b", "fixed")), first)
    assert named["agree"] and named["real"] == {JOB: run.REPLACE_DELETE_FIRST}
    assert not run.compare_change(_plan(job("a", "fixed")), _plan(job("b", "fixed")), after)["agree"]
    assert run.compare_change(_plan(job("a")), _plan(job("b")), after)["agree"]
    assert not run.compare_change(_plan(job("a")), _plan(job("b")), first)["agree"]


# --- the harness's own refusals --------------------------------------------------------------------------------


def test_a_step_that_must_fail_fails_for_its_reason():
    test = run.UpTest(STACKS["uptest-edge"], log=lambda line: None)
    caught = {"ok": False, "error": "error: no changes were expected for update but changes were proposed"}
    assert test.refuse(caught, "the planted up", needle="no changes were expected") is caught
    with pytest.raises(run.StepFailed, match="passed: the check does not catch what was planted"):
        test.refuse({"ok": True}, "the planted up", needle="no changes were expected")
    with pytest.raises(run.StepFailed, match="but not naming 'k8s-no-host-namespaces'"):
        test.refuse({"ok": False, "error": "provider crashed"}, "the planted preview", needle="k8s-no-host-namespaces")
    with pytest.raises(run.StepFailed, match="the second up failed:\nboom"):
        test.require({"ok": False, "error": "boom"}, "the second up")


def test_the_site_storage_classes_are_those_the_claims_name_and_the_stack_does_not_create():
    from verify.render import ClusterObject

    def claim(name, storage_class):
        return ClusterObject("stack", {"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                                       "metadata": {"name": name, "namespace": "t"},
                                       "spec": {"storageClassName": storage_class}})

    own = ClusterObject("stack", {"apiVersion": "storage.k8s.io/v1", "kind": "StorageClass",
                                  "metadata": {"name": "gtp-efs"}, "provisioner": "efs.csi.aws.com"})
    found = run.site_storage_classes([own, claim("a", "nfs-client"), claim("b", "gtp-efs"), claim("c", None)])
    assert [item.obj["metadata"]["name"] for item in found] == ["nfs-client"]
    assert found[0].kind == "StorageClass" and found[0].obj["volumeBindingMode"] == "Immediate"
    assert run.site_storage_classes([own, claim("b", "gtp-efs")]) == []


def test_a_site_object_the_cluster_refuses_stops_the_run():
    class Refusing:
        def apply(self, obj):
            return "spec.handler: Required value"

    with pytest.raises(RuntimeError, match="the site's RuntimeClass nvidia refused: spec.handler: Required value"):
        run.UpTest._apply(Refusing(), {"kind": "RuntimeClass", "metadata": {"name": "nvidia"}})


def test_a_failing_go_command_of_the_build_names_itself(tmp_path):
    with pytest.raises(RuntimeError, match=r"go no-such-command \(in .*\) failed"):
        build._go("no-such-command", cwd=tmp_path)
