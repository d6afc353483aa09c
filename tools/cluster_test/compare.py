"""Hold the simulation to the real run: `simulation.json` against `cluster-run.json`, per check both make and per
object the real run saw. Every disagreement is one line naming the stack, the check and the object.

Per check:
- any check: the verdict (findings or none) must agree; a real finding must name an object the simulation also
  flags, and a simulation finding about an object the real run saw must be a real finding too; a real finding on an
  object the simulation only assumed (its `assumptions`: neither pass nor finding) says that assumption failed;
- `scheduled`: the node group each workload's pods really run on must be one the simulation says it fits
  (`<owner> ×N: fits a, b`), and "runs on no node group" must agree;
- `queued`: the flavor and ClusterQueue Kueue really admitted each job into must be the one the simulation chose;
- objects the real run did not cover (their controller is not run: `not_run`) are not compared;
- day two (`day_two`, no simulation check): each event's real outcome against what the job's kind declares.
"""

from __future__ import annotations

import re
from typing import Any

_FITS = re.compile(r"^(?P<owner>.+?)(?: ×\d+)?: fits (?P<groups>.+)$")
_NOWHERE = re.compile(r"^(?P<owner>.+?): runs on no node group")
_SIM_FLAVOR = re.compile(r"^(?P<owner>\S+ \S+): one Workload .* fits flavor (?P<flavor>\S+) of (?P<queue>\S+)$")
_REAL_FLAVOR = re.compile(r"admitted by Kueue into flavor (?P<flavor>\S+) of (?P<queue>\S+)$")


def _owner_matches(simulated: str, real: str) -> bool:
    """The simulation names a pod's owner with its replica type (`PyTorchJob ns/n Worker`): same object."""
    return simulated == real or simulated.startswith(real + " ")


def _sim_lines(check: dict[str, Any]) -> list[str]:
    return list(check.get("details") or [])


def disagreements(stack: str, simulation: dict[str, Any], real: dict[str, Any]) -> list[str]:
    problems: list[str] = []
    not_run = set(real.get("not_run") or [])
    for name, real_check in real["checks"].items():
        sim_check = simulation["checks"].get(name)
        if sim_check is None:
            continue
        where = f"{stack}: {name}"
        sim_findings = [f["subject"] for f in sim_check["findings"]]
        real_findings = {f["subject"]: f["rule"] for f in real_check["findings"]}
        assumed = {a["subject"]: a["assumes"] for a in sim_check.get("assumptions") or []}
        for subject, rule in sorted(real_findings.items()):
            if any(_owner_matches(s, subject) or subject in s for s in sim_findings):
                continue
            guess = next((what for s, what in assumed.items() if _owner_matches(s, subject) or subject in s), None)
            problems.append(f"{where}: {subject}: the real run fails it ({rule}); " + (
                f"the simulation assumed {guess}" if guess else "the simulation passes it"))
        for subject in sim_findings:
            seen = [who for who in real_check["objects"] if _owner_matches(subject, who) or who in subject]
            if seen and not any(who in real_findings for who in seen):
                problems.append(f"{where}: {subject}: the simulation fails it; the real run passes it")
        if name == "scheduled":
            problems += _scheduled(where, sim_check, real_check, not_run)
        if name == "queued":
            problems += _queued(where, sim_check, real_check)
    return problems


def _scheduled(where: str, sim_check: dict[str, Any], real_check: dict[str, Any], not_run: set[str]) -> list[str]:
    problems = []
    fits: dict[str, set[str]] = {}
    nowhere: set[str] = set()
    for line in _sim_lines(sim_check):
        if match := _FITS.match(line):
            fits.setdefault(match["owner"], set()).update(g.strip() for g in match["groups"].split(","))
        elif match := _NOWHERE.match(line):
            nowhere.add(match["owner"])
    for who, detail in sorted(real_check["objects"].items()):
        if who in not_run or not detail.startswith("runs on "):
            continue
        groups = {g.strip() for g in detail.removeprefix("runs on ").split(",")}
        simulated = {g for owner, gs in fits.items() if _owner_matches(owner, who) for g in gs}
        silent = any(_owner_matches(owner, who) for owner in nowhere)
        if detail == "runs on no node group":
            if simulated:
                problems.append(f"{where}: {who}: really runs on no node group; the simulation fits it on "
                                f"{', '.join(sorted(simulated))}")
        elif silent:
            problems.append(f"{where}: {who}: really runs on {', '.join(sorted(groups))}; the simulation says no "
                            "node group")
        elif simulated and not groups <= simulated:
            problems.append(f"{where}: {who}: really runs on {', '.join(sorted(groups))}; the simulation fits it "
                            f"only on {', '.join(sorted(simulated))}")
    return problems


def _queued(where: str, sim_check: dict[str, Any], real_check: dict[str, Any]) -> list[str]:
    problems = []
    chosen = {m["owner"]: (m["flavor"], m["queue"]) for line in _sim_lines(sim_check)
              if (m := _SIM_FLAVOR.match(line))}
    for who, detail in sorted(real_check["objects"].items()):
        match = _REAL_FLAVOR.search(detail)
        if match is None or who not in chosen:
            continue
        if (match["flavor"], match["queue"]) != chosen[who]:
            problems.append(f"{where}: {who}: Kueue admitted it into flavor {match['flavor']} of {match['queue']}; "
                            f"the simulation chose {chosen[who][0]} of {chosen[who][1]}")
    return problems


def image_policy_disagreements(stack: str, real: dict[str, Any]) -> list[str]:
    """A production stack's image policy must refuse, on the real API server, a training pod of an unlisted image
    (what `tools.submit` refuses client-side too)."""
    return [f"{stack}: {policy}: a training pod of an unlisted image was {answer}, not refused by the policy"
            for policy, answer in sorted((real.get("image_policy") or {}).items())
            if not (answer.startswith("refused") and "ValidatingAdmissionPolicy" in answer)]


def day_two_disagreements(stack: str, real: dict[str, Any]) -> list[str]:
    """Each day-two event's real outcome against what the job's kind declares (`workload_kinds` `template_update`,
    what plan-diff prints): a declared restart must be a real requeue, a job declared to keep running must not be
    requeued, and a change the API refused is a disagreement whatever was declared."""
    problems = []
    for event, jobs in sorted((real.get("day_two") or {}).items()):
        for who, entry in sorted(jobs.items()):
            declared, observed = entry["declared"], entry["observed"]
            expected = {"restart": "requeued", "keeps running": "kept running"}.get(declared)
            if observed.startswith("refused") or (expected is not None and observed != expected):
                problems.append(f"{stack}: day two, {event}: {who}: its kind declares {declared!r} (what plan-diff "
                                f"says); the real run: {observed}")
    return problems


def coverage(simulation: dict[str, Any], real: dict[str, Any]) -> dict[str, list[str]]:
    """Which simulation checks the real run also makes, and which stay the simulator's alone."""
    both = sorted(set(simulation["checks"]) & set(real["checks"]))
    return {"compared": both, "simulation only": sorted(set(simulation["checks"]) - set(real["checks"]))}
