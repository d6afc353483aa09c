"""Would the API server admit every expanded pod? Pod Security Admission, LimitRanger and ResourceQuota, as the
cluster's version runs them, over the pods of `verify.simulate.pods` at the largest scale the stack allows.

- Pod Security Standards: each pod against its namespace's `pod-security.kubernetes.io/enforce` label (and
  `enforce-version`), every control of the baseline and restricted profiles as k8s.io/pod-security-admission
  `policy/check_*.go` implements them at the cluster's minor version (v0.34 for Kubernetes 1.34; the checks carry
  their minimum versions, so a 1.33 cluster runs the 1.33 set). A namespace without the label is `privileged`
  (the API server's default PodSecurity configuration, which EKS and k3s keep), and no exemptions are configured.
- LimitRanger (plugin/pkg/admission/limitranger/admission.go): the LimitRange defaults fill the requests/limits a
  container doesn't set, then min / max / maxLimitRequestRatio are enforced per container and per pod.
- ResourceQuota (pkg/quota/v1/evaluator/core/pods.go): a quota on cpu or memory requires every container to set
  them; the pods of a namespace, created in object order at their largest count, must fit every `hard` value.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any

from verify.plan_record import Plan
from verify.render import ClusterObject
from verify.simulate.model import CheckResult, ExpandedPod, Finding

LEVELS = ("privileged", "baseline", "restricted")
PSA = "pod-security.kubernetes.io"

# ---------------------------------------------------------------------------------------------------------------
# Quantities (k8s.io/apimachinery/pkg/api/resource: a signed decimal, an exponent or one suffix)

_QUANTITY = re.compile(r"([+-]?(?:\d+\.?\d*|\.\d+))(?:(Ki|Mi|Gi|Ti|Pi|Ei|n|u|m|k|M|G|T|P|E)|[eE]([+-]?\d+))?")
_SUFFIX = {None: Fraction(1), "n": Fraction(1, 10**9), "u": Fraction(1, 10**6), "m": Fraction(1, 1000),
           "k": Fraction(10**3), "M": Fraction(10**6), "G": Fraction(10**9), "T": Fraction(10**12),
           "P": Fraction(10**15), "E": Fraction(10**18), "Ki": Fraction(2**10), "Mi": Fraction(2**20),
           "Gi": Fraction(2**30), "Ti": Fraction(2**40), "Pi": Fraction(2**50), "Ei": Fraction(2**60)}


def quantity(value: Any) -> Fraction:
    """A Kubernetes quantity (`500m`, `16Gi`, `1e3`, `2`) as an exact number; ValueError names what is allowed."""
    if isinstance(value, bool):
        raise ValueError(f"{value!r} is not a quantity")
    if isinstance(value, (int, float)):
        return Fraction(str(value))
    match = _QUANTITY.fullmatch(str(value).strip())
    if not match:
        raise ValueError(f"{value!r} is not a Kubernetes quantity: a number with at most one suffix "
                         f"(n, u, m, k, M, G, T, P, E, Ki, Mi, Gi, Ti, Pi, Ei) or an exponent (1e3)")
    number = Fraction(match.group(1))
    if match.group(3) is not None:
        return number * Fraction(10) ** int(match.group(3))
    return number * _SUFFIX[match.group(2)]


def _show(amount: Fraction, key: str = "") -> str:
    """`8`, `0.5`, or for byte amounts (memory, ephemeral-storage, hugepages) `32Gi` / `512Mi` when exact."""
    if any(word in key for word in ("memory", "storage", "hugepages")) and amount:
        for suffix in ("Ti", "Gi", "Mi", "Ki"):
            size = _SUFFIX[suffix]
            if amount % size == 0:
                return f"{amount // size}{suffix}"
    if amount.denominator == 1:
        return str(amount.numerator)
    return f"{float(amount):g}"


# ---------------------------------------------------------------------------------------------------------------
# Pod Security Standards — k8s.io/pod-security-admission policy/


def _containers(spec: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    """policy/visitor.go visitContainers: init containers, containers, ephemeral containers."""
    return [c for key in ("initContainers", "containers", "ephemeralContainers") for c in spec.get(key) or []
            if isinstance(c, Mapping)]


def _sc(node: Mapping[str, Any]) -> Mapping[str, Any]:
    return node.get("securityContext") or {}


def _names(containers: Iterable[Mapping[str, Any]]) -> str:
    names = [str(c.get("name")) for c in containers]
    return ("container " if len(names) == 1 else "containers ") + ", ".join(f'"{n}"' for n in names)


def _windows(spec: Mapping[str, Any]) -> bool:
    return (spec.get("os") or {}).get("name") == "windows"


def _user_namespace_relaxed(spec: Mapping[str, Any]) -> bool:
    """policy/helpers.go relaxPolicyForUserNamespacePod: only with the UserNamespacesPodSecurityStandards feature
    gate, alpha and off by default through 1.34 — so never on the clusters planned here."""
    return False


CheckFn = Callable[[Mapping[str, Any], Mapping[str, Any]], "str | None"]
"""(pod metadata, pod spec) → None when allowed, else the forbidden detail."""


def _host_process(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> str | None:
    # check_windowsHostProcess.go windowsHostProcess_1_0
    setters = []
    if (_sc(spec).get("windowsOptions") or {}).get("hostProcess") is True:
        setters.append("pod")
    bad = [c for c in _containers(spec) if (_sc(c).get("windowsOptions") or {}).get("hostProcess") is True]
    if bad:
        setters.append(_names(bad))
    return f"{' and '.join(setters)} must not set securityContext.windowsOptions.hostProcess=true" if setters else None


def _host_namespaces(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> str | None:
    # check_hostNamespaces.go hostNamespaces_1_0
    used = [f"{key}=true" for key in ("hostNetwork", "hostPID", "hostIPC") if spec.get(key) is True]
    return ", ".join(used) or None


def _privileged(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> str | None:
    # check_privileged.go privileged_1_0
    bad = [c for c in _containers(spec) if _sc(c).get("privileged") is True]
    return f"{_names(bad)} must not set securityContext.privileged=true" if bad else None


BASELINE_CAPABILITIES = frozenset({"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD",
                                   "NET_BIND_SERVICE", "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"})


def _capabilities_baseline(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> str | None:
    # check_capabilities_baseline.go capabilitiesBaseline_1_0 (capabilities_allowed_1_0)
    bad, extra = [], set()
    for c in _containers(spec):
        added = set((_sc(c).get("capabilities") or {}).get("add") or []) - BASELINE_CAPABILITIES
        if added:
            bad.append(c)
            extra |= added
    if bad:
        return f"{_names(bad)} must not include {', '.join(sorted(extra))} in securityContext.capabilities.add"
    return None


def _host_path(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> str | None:
    # check_hostPathVolumes.go hostPathVolumes_1_0
    bad = [str(v.get("name")) for v in spec.get("volumes") or [] if v.get("hostPath") is not None]
    return f"hostPath volumes {', '.join(bad)}" if bad else None


def _host_ports(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> str | None:
    # check_hostPorts.go hostPorts_1_0
    bad, ports = [], set()
    for c in _containers(spec):
        used = {int(p["hostPort"]) for p in c.get("ports") or [] if p.get("hostPort")}
        if used:
            bad.append(c)
            ports |= used
    return f"{_names(bad)} use hostPorts {', '.join(map(str, sorted(ports)))}" if bad else None


def _host_probes(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> str | None:
    # check_hostProbesAndhostLifecycle.go hostProbesAndHostLifecycleV1Dot34 (1.34+)
    bad, hosts = [], set()
    for c in _containers(spec):
        handlers = [c.get(p) for p in ("livenessProbe", "readinessProbe", "startupProbe")]
        handlers += [(c.get("lifecycle") or {}).get(h) for h in ("postStart", "preStop")]
        found = {str(action["host"]) for handler in handlers if isinstance(handler, Mapping)
                 for action in (handler.get("httpGet"), handler.get("tcpSocket"))
                 if isinstance(action, Mapping) and action.get("host")}
        if found:
            bad.append(c)
            hosts |= found
    return f"{_names(bad)} use probe or lifecycle hosts {', '.join(sorted(hosts))}" if bad else None


# The profile types both the AppArmor and the seccomp controls allow (check_appArmorProfile.go,
# check_seccompProfile_*.go).
SECCOMP_ALLOWED = APPARMOR_ALLOWED = frozenset({"RuntimeDefault", "Localhost"})


def _profiles_not_in(spec: Mapping[str, Any], field: str, allowed: frozenset[str]) -> tuple[list[str], set[str]]:
    """Who sets securityContext.<field>.type to a value outside `allowed` (the pod, then its containers named)."""
    setters, values = [], set()
    profile = _sc(spec).get(field)
    if isinstance(profile, Mapping) and profile.get("type") not in allowed:
        setters.append("pod")
        values.add(str(profile.get("type")))
    bad = []
    for c in _containers(spec):
        profile = _sc(c).get(field)
        if isinstance(profile, Mapping) and profile.get("type") not in allowed:
            bad.append(c)
            values.add(str(profile.get("type")))
    if bad:
        setters.append(_names(bad))
    return setters, values


def _apparmor(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> str | None:
    # check_appArmorProfile.go appArmorProfile_1_0
    setters, values = _profiles_not_in(spec, "appArmorProfile", APPARMOR_ALLOWED)
    prefix = "container.apparmor.security.beta.kubernetes.io/"
    annotations = sorted(f"{k}={v!r}" for k, v in (meta.get("annotations") or {}).items()
                         if k.startswith(prefix) and v and v != "runtime/default"
                         and not str(v).startswith("localhost/"))
    if annotations:
        setters.append("annotations")
        values |= set(annotations)
    return f"{' and '.join(setters)} must not set AppArmor profile type to {', '.join(sorted(values))}" \
        if setters else None


def _selinux(allowed_types: frozenset[str]) -> CheckFn:
    # check_seLinuxOptions.go seLinuxOptions1_0 / seLinuxOptions1_31
    def check(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> str | None:
        problems: set[str] = set()

        def bad(options: Any) -> bool:
            if not isinstance(options, Mapping):
                return False
            wrong = False
            if str(options.get("type") or "") not in allowed_types:
                problems.add(f"type {options.get('type')!r}")
                wrong = True
            for key in ("user", "role"):
                if options.get(key):
                    problems.add(f"{key} may not be set")
                    wrong = True
            return wrong

        setters = ["pod"] if bad(_sc(spec).get("seLinuxOptions")) else []
        containers = [c for c in _containers(spec) if bad(_sc(c).get("seLinuxOptions"))]
        if containers:
            setters.append(_names(containers))
        return f"{' and '.join(setters)} set forbidden securityContext.seLinuxOptions: " \
               f"{'; '.join(sorted(problems))}" if setters else None
    return check


SELINUX_TYPES_1_0 = frozenset({"", "container_t", "container_init_t", "container_kvm_t"})
SELINUX_TYPES_1_31 = SELINUX_TYPES_1_0 | {"container_engine_t"}


def _proc_mount(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> str | None:
    # check_procMount.go procMount_1_0
    if _user_namespace_relaxed(spec):
        return None
    bad = [c for c in _containers(spec) if _sc(c).get("procMount") not in (None, "Default")]
    if bad:
        kinds = sorted({str(_sc(c).get("procMount")) for c in bad})
        return f"{_names(bad)} must not set securityContext.procMount to {', '.join(kinds)}"
    return None


def _seccomp_annotations(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> str | None:
    # check_seccompProfile_baseline.go seccompProfileBaseline_1_0 (before 1.19: the alpha annotations)
    def valid(value: str) -> bool:
        return value in ("runtime/default", "docker/default") or value.startswith("localhost/")
    annotations = meta.get("annotations") or {}
    keys = ["seccomp.security.alpha.kubernetes.io/pod"] + [
        f"container.seccomp.security.alpha.kubernetes.io/{c.get('name')}" for c in _containers(spec)]
    bad = sorted(f"{k}={annotations[k]!r}" for k in keys if k in annotations and not valid(str(annotations[k])))
    return f"forbidden annotations {', '.join(bad)}" if bad else None




def _seccomp_baseline(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> str | None:
    # check_seccompProfile_baseline.go seccompProfileBaseline_1_19
    setters, values = _profiles_not_in(spec, "seccompProfile", SECCOMP_ALLOWED)
    return f"{' and '.join(setters)} must not set securityContext.seccompProfile.type to " \
           f"{', '.join(sorted(values))}" if setters else None


def _seccomp_restricted(skip_windows: bool) -> CheckFn:
    # check_seccompProfile_restricted.go seccompProfileRestricted_1_19 / _1_25 (Windows pods exempt from 1.25)
    def check(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> str | None:
        if skip_windows and _windows(spec):
            return None
        explicit = _seccomp_baseline(meta, spec)
        if explicit:
            return explicit
        profile = _sc(spec).get("seccompProfile")
        pod_set = isinstance(profile, Mapping) and profile.get("type") in SECCOMP_ALLOWED
        implicit = [c for c in _containers(spec) if not isinstance(_sc(c).get("seccompProfile"), Mapping)]
        if implicit and not pod_set:
            return f'pod or {_names(implicit)} must set securityContext.seccompProfile.type to "RuntimeDefault" ' \
                   f'or "Localhost"'
        return None
    return check


def _sysctls(allowed: frozenset[str]) -> CheckFn:
    # check_sysctls.go sysctlsV1Dot0 / V1Dot27 / V1Dot29 / V1Dot32
    def check(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> str | None:
        bad = [str(s.get("name")) for s in _sc(spec).get("sysctls") or [] if s.get("name") not in allowed]
        return ", ".join(bad) or None
    return check


SYSCTLS_1_0 = frozenset({"kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.tcp_syncookies",
                         "net.ipv4.ping_group_range", "net.ipv4.ip_unprivileged_port_start"})
SYSCTLS_1_27 = SYSCTLS_1_0 | {"net.ipv4.ip_local_reserved_ports"}
SYSCTLS_1_29 = SYSCTLS_1_27 | {"net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout",
                               "net.ipv4.tcp_keepalive_intvl", "net.ipv4.tcp_keepalive_probes"}
SYSCTLS_1_32 = SYSCTLS_1_29 | {"net.ipv4.tcp_rmem", "net.ipv4.tcp_wmem"}

RESTRICTED_VOLUME_SOURCES = frozenset({"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "image",
                                       "persistentVolumeClaim", "projected", "secret"})


def _restricted_volumes(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> str | None:
    # check_restrictedVolumes.go restrictedVolumes_1_0
    bad, types = [], set()
    for volume in spec.get("volumes") or []:
        sources = [key for key in volume if key != "name"]
        if any(key in RESTRICTED_VOLUME_SOURCES for key in sources):
            continue
        bad.append(str(volume.get("name")))
        types |= set(sources) or {"unknown"}
    return f"volumes {', '.join(bad)} use restricted volume types {', '.join(sorted(types))}" if bad else None


def _privilege_escalation(skip_windows: bool) -> CheckFn:
    # check_allowPrivilegeEscalation.go allowPrivilegeEscalation_1_8 / _1_25
    def check(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> str | None:
        if skip_windows and _windows(spec):
            return None
        bad = [c for c in _containers(spec) if _sc(c).get("allowPrivilegeEscalation") is not False]
        return f"{_names(bad)} must set securityContext.allowPrivilegeEscalation=false" if bad else None
    return check


def _run_as_non_root(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> str | None:
    # check_runAsNonRoot.go runAsNonRoot_1_0: the pod-level true covers containers that leave it unset
    if _user_namespace_relaxed(spec):
        return None
    setters = []
    pod_value = _sc(spec).get("runAsNonRoot")
    if pod_value is False:
        setters.append("pod")
    explicit = [c for c in _containers(spec) if _sc(c).get("runAsNonRoot") is False]
    if explicit:
        setters.append(_names(explicit))
    if setters:
        return f"{' and '.join(setters)} must not set securityContext.runAsNonRoot=false"
    implicit = [c for c in _containers(spec) if _sc(c).get("runAsNonRoot") is None]
    if implicit and pod_value is not True:
        return f"pod or {_names(implicit)} must set securityContext.runAsNonRoot=true"
    return None


def _run_as_user(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> str | None:
    # check_runAsUser.go runAsUser_1_23
    if _user_namespace_relaxed(spec):
        return None
    setters = ["pod"] if _sc(spec).get("runAsUser") == 0 else []
    bad = [c for c in _containers(spec) if _sc(c).get("runAsUser") == 0]
    if bad:
        setters.append(_names(bad))
    return f"{' and '.join(setters)} must not set runAsUser=0" if setters else None


def _capabilities_restricted(skip_windows: bool) -> CheckFn:
    # check_capabilities_restricted.go capabilitiesRestricted_1_22 / _1_25
    def check(meta: Mapping[str, Any], spec: Mapping[str, Any]) -> str | None:
        if skip_windows and _windows(spec):
            return None
        missing, adding, extra = [], [], set()
        for c in _containers(spec):
            capabilities = _sc(c).get("capabilities")
            if not isinstance(capabilities, Mapping):
                missing.append(c)
                continue
            if "ALL" not in (capabilities.get("drop") or []):
                missing.append(c)
            added = {str(a) for a in capabilities.get("add") or [] if a != "NET_BIND_SERVICE"}
            if added:
                adding.append(c)
                extra |= added
        details = []
        if missing:
            details.append(f'{_names(missing)} must set securityContext.capabilities.drop=["ALL"]')
        if adding:
            details.append(f"{_names(adding)} must not include {', '.join(sorted(extra))} in "
                           f"securityContext.capabilities.add")
        return "; ".join(details) or None
    return check


@dataclass(frozen=True)
class Control:
    """One check of policy/check_*.go: its ID, level, versioned implementations and what it overrides."""

    id: str
    level: str
    versions: tuple[tuple[tuple[int, int], CheckFn], ...]
    """(minimum version, implementation), ascending; the newest one not newer than the evaluated version runs."""
    fix: str
    overrides: tuple[str, ...] = ()
    """Baseline checks this restricted check replaces (policy/registry.go OverrideCheckIDs)."""

    def at(self, version: tuple[int, int]) -> CheckFn | None:
        chosen = None
        for minimum, implementation in self.versions:
            if minimum <= version:
                chosen = implementation
        return chosen


CONTROLS: tuple[Control, ...] = (
    Control("windowsHostProcess", "baseline", (((1, 0), _host_process),),
            "remove securityContext.windowsOptions.hostProcess"),
    Control("hostNamespaces", "baseline", (((1, 0), _host_namespaces),),
            "remove hostNetwork / hostPID / hostIPC"),
    Control("privileged", "baseline", (((1, 0), _privileged),), "remove securityContext.privileged=true"),
    Control("capabilities_baseline", "baseline", (((1, 0), _capabilities_baseline),),
            "add only capabilities of the baseline set (AUDIT_WRITE, CHOWN, ... NET_BIND_SERVICE, SYS_CHROOT)"),
    Control("hostPathVolumes", "baseline", (((1, 0), _host_path),), "replace the hostPath volumes"),
    Control("hostPorts", "baseline", (((1, 0), _host_ports),), "remove ports[].hostPort"),
    Control("hostProbesAndHostLifecycle", "baseline", (((1, 34), _host_probes),),
            "remove the host field of the probes / lifecycle handlers"),
    Control("appArmorProfile", "baseline", (((1, 0), _apparmor),),
            "use appArmorProfile.type RuntimeDefault or Localhost (or leave it unset)"),
    Control("seLinuxOptions", "baseline", (((1, 0), _selinux(SELINUX_TYPES_1_0)),
                                           ((1, 31), _selinux(SELINUX_TYPES_1_31))),
            "leave seLinuxOptions.user/role unset and use an allowed type (container_t, ...)"),
    Control("procMount", "baseline", (((1, 0), _proc_mount),), "leave securityContext.procMount unset or Default"),
    Control("seccompProfile_baseline", "baseline", (((1, 0), _seccomp_annotations), ((1, 19), _seccomp_baseline)),
            "use seccompProfile.type RuntimeDefault or Localhost (or leave it unset)"),
    Control("sysctls", "baseline", (((1, 0), _sysctls(SYSCTLS_1_0)), ((1, 27), _sysctls(SYSCTLS_1_27)),
                                    ((1, 29), _sysctls(SYSCTLS_1_29)), ((1, 32), _sysctls(SYSCTLS_1_32))),
            "set only the safe sysctls"),
    Control("restrictedVolumes", "restricted", (((1, 0), _restricted_volumes),),
            "use only configMap, csi, downwardAPI, emptyDir, ephemeral, image, persistentVolumeClaim, projected "
            "or secret volumes", overrides=("hostPathVolumes",)),
    Control("allowPrivilegeEscalation", "restricted", (((1, 8), _privilege_escalation(False)),
                                                       ((1, 25), _privilege_escalation(True))),
            "set securityContext.allowPrivilegeEscalation: false on every container"),
    Control("runAsNonRoot", "restricted", (((1, 0), _run_as_non_root),),
            "set securityContext.runAsNonRoot: true on the pod (or on every container)"),
    Control("runAsUser", "restricted", (((1, 23), _run_as_user),), "don't set runAsUser: 0"),
    Control("seccompProfile_restricted", "restricted", (((1, 19), _seccomp_restricted(False)),
                                                        ((1, 25), _seccomp_restricted(True))),
            "set securityContext.seccompProfile.type: RuntimeDefault on the pod (or on every container)",
            overrides=("seccompProfile_baseline",)),
    Control("capabilities_restricted", "restricted", (((1, 22), _capabilities_restricted(False)),
                                                      ((1, 25), _capabilities_restricted(True))),
            'set securityContext.capabilities.drop: ["ALL"] on every container (add at most NET_BIND_SERVICE)',
            overrides=("capabilities_baseline",)),
)
CONTROLS_BY_ID = {control.id: control for control in CONTROLS}


def pod_security(pod: Mapping[str, Any], level: str, version: tuple[int, int]) -> list[tuple[Control, str]]:
    """Every control `pod` fails at `level` and `version` (policy/checks.go + registry.go: a level runs its own
    checks and the lower levels', a restricted check replacing the baseline checks it overrides)."""
    if level == "privileged":
        return []
    wanted = LEVELS[1:LEVELS.index(level) + 1]
    active = {c.id: c for c in CONTROLS if c.level in wanted and c.at(version) is not None}
    for control in list(active.values()):
        for overridden in control.overrides:
            active.pop(overridden, None)
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    failures = []
    for control in CONTROLS:
        if control.id in active:
            detail = control.at(version)(meta, spec)  # type: ignore[misc]
            if detail:
                failures.append((control, detail))
    return failures


def parse_version(text: str, cluster: tuple[int, int]) -> tuple[int, int]:
    """api/helpers.go ParseVersion: `latest` or `v1.N`; a version newer than the server evaluates as latest."""
    if text == "latest":
        return cluster
    match = re.fullmatch(r"v1\.(\d+)", text)
    if not match:
        raise ValueError(f"{text!r} is not a Pod Security version: use 'latest' or 'v1.<minor>'")
    return min((1, int(match.group(1))), cluster)


@dataclass(frozen=True)
class NamespacePolicy:
    namespace: str
    level: str
    version: tuple[int, int]
    labelled: bool
    error: str | None = None


def namespace_policies(objects: list[ClusterObject], cluster: tuple[int, int]) -> dict[str, NamespacePolicy]:
    """Enforce level and version of every rendered Namespace (api/helpers.go PolicyToEvaluate: an unparsable
    label evaluates as restricted/latest, and PSA rejects the Namespace itself on create)."""
    policies: dict[str, NamespacePolicy] = {}
    for item in objects:
        if item.kind != "Namespace":
            continue
        labels = (item.obj.get("metadata") or {}).get("labels") or {}
        level_label, version_label = labels.get(f"{PSA}/enforce"), labels.get(f"{PSA}/enforce-version", "latest")
        error = None
        level, version = level_label or "privileged", cluster
        if level_label is not None and level_label not in LEVELS:
            error = f"label {PSA}/enforce={level_label!r} is not one of {', '.join(LEVELS)}"
            level = "restricted"
        try:
            version = parse_version(str(version_label), cluster)
        except ValueError as problem:
            error = f"label {PSA}/enforce-version: {problem}"
        policies[item.name] = NamespacePolicy(item.name, level, version, level_label is not None, error)
    return policies


# ---------------------------------------------------------------------------------------------------------------
# LimitRanger and ResourceQuota


def _resources(container: Mapping[str, Any], key: str) -> dict[str, Any]:
    return dict((container.get("resources") or {}).get(key) or {})


def default_limit_range_item(item: Mapping[str, Any]) -> dict[str, Any]:
    """pkg/apis/core/v1/defaults.go SetDefaults_LimitRangeItem (Container items): default ← max, defaultRequest
    ← default, defaultRequest ← min, each only where unset."""
    item = copy.deepcopy(dict(item))
    if item.get("type") == "Container":
        default = item.setdefault("default", {}) or {}
        request = item.setdefault("defaultRequest", {}) or {}
        for key, value in (item.get("max") or {}).items():
            default.setdefault(key, value)
        for key, value in default.items():
            request.setdefault(key, value)
        for key, value in (item.get("min") or {}).items():
            request.setdefault(key, value)
        item["default"], item["defaultRequest"] = default, request
    return item


def admitted_resources(pod: Mapping[str, Any], limit_ranges: list[Mapping[str, Any]]) -> dict[str, Any]:
    """The pod after API defaulting and the LimitRanger's mutation.

    pkg/apis/core/v1/defaults.go SetDefaults_Pod: a limit without a request makes the request equal to it
    (containers and init containers); then limitranger admission.go PodMutateLimitFunc → mergePodResourceRequirements
    sets each LimitRange's `default` as limits and `defaultRequest` as requests where the container has none."""
    pod = copy.deepcopy(dict(pod))
    spec = pod.setdefault("spec", {})
    defaults_limits: dict[str, Any] = {}
    defaults_requests: dict[str, Any] = {}
    for limit_range in limit_ranges:          # defaultContainerResourceRequirements (later items win)
        for item in (limit_range.get("spec") or {}).get("limits") or []:
            item = default_limit_range_item(item)
            if item.get("type") == "Container":
                defaults_limits.update(item.get("default") or {})
                defaults_requests.update(item.get("defaultRequest") or {})
    for key in ("containers", "initContainers"):
        for container in spec.get(key) or []:
            resources = container.setdefault("resources", {})
            limits = dict(resources.get("limits") or {})
            requests = dict(resources.get("requests") or {})
            for name, value in limits.items():
                requests.setdefault(name, value)
            for name, value in defaults_limits.items():
                limits.setdefault(name, value)
            for name, value in defaults_requests.items():
                requests.setdefault(name, value)
            resources["limits"], resources["requests"] = limits, requests
    return pod


def invalid_quantities(node: Any, path: str, keys: tuple[str, ...] | None = None) -> list[str]:
    """`path.key=value: why` for every value under `node` (a pod: its containers' requests/limits; otherwise every
    leaf of the mapping, e.g. a quota's `spec.hard`) that is not a Kubernetes quantity."""
    problems = []
    if keys is not None:                      # a pod
        for key in keys:
            for index, container in enumerate((node.get("spec") or {}).get(key) or []):
                for kind in ("requests", "limits"):
                    problems += invalid_quantities(_resources(container, kind),
                                                   f"spec.{key}[{index}].resources.{kind}")
        return problems
    if isinstance(node, Mapping):
        for key, value in node.items():
            problems += invalid_quantities(value, f"{path}.{key}")
        return problems
    try:
        quantity(node)
    except ValueError as error:
        problems.append(f"{path}: {error}")
    return problems


def _add(total: dict[str, Fraction], values: Mapping[str, Any]) -> None:
    for name, value in values.items():
        total[name] = total.get(name, Fraction(0)) + quantity(value)


def _max(total: dict[str, Fraction], values: Mapping[str, Fraction]) -> None:
    for name, value in values.items():
        total[name] = max(total.get(name, Fraction(0)), value)


def pod_totals(pod: Mapping[str, Any], key: str) -> dict[str, Fraction]:
    """k8s.io/component-helpers/resource PodRequests / PodLimits (what quota and the Pod LimitRange use): the sum
    of the containers, sidecars (init containers with restartPolicy Always) added, and at least the largest
    ordinary init container plus the sidecars started before it."""
    spec = pod.get("spec") or {}
    total: dict[str, Fraction] = {}
    for container in spec.get("containers") or []:
        _add(total, _resources(container, key))
    sidecars: dict[str, Fraction] = {}
    init_peak: dict[str, Fraction] = {}
    for container in spec.get("initContainers") or []:
        values: dict[str, Fraction] = {}
        _add(values, _resources(container, key))
        if container.get("restartPolicy") == "Always":
            _add(total, _resources(container, key))
            for name, value in values.items():
                sidecars[name] = sidecars.get(name, Fraction(0)) + value
            _max(init_peak, sidecars)
        else:
            with_sidecars = dict(values)
            for name, value in sidecars.items():
                with_sidecars[name] = with_sidecars.get(name, Fraction(0)) + value
            _max(init_peak, with_sidecars)
    _max(total, init_peak)
    return total


def _limit_violations(pod: Mapping[str, Any], limit_range: Mapping[str, Any]) -> list[str]:
    """limitranger admission.go PodValidateLimitFunc: minConstraint, maxConstraint, limitRequestRatioConstraint
    per container (and init container) for `Container` items, on the pod totals for `Pod` items."""
    spec = pod.get("spec") or {}
    problems = []

    def check(kind: str, who: str, requests: Mapping[str, Any], limits: Mapping[str, Any],
              item: Mapping[str, Any]) -> None:
        for name, bound in (item.get("min") or {}).items():
            if name not in requests:
                problems.append(f"{who}: minimum {name} per {kind} is {bound}, no request is specified")
            elif quantity(requests[name]) < quantity(bound):
                problems.append(f"{who}: minimum {name} per {kind} is {bound}, but request is {requests[name]}")
            elif name in limits and quantity(limits[name]) < quantity(bound):
                problems.append(f"{who}: minimum {name} per {kind} is {bound}, but limit is {limits[name]}")
        for name, bound in (item.get("max") or {}).items():
            if name not in limits:
                problems.append(f"{who}: maximum {name} per {kind} is {bound}, no limit is specified")
            elif quantity(limits[name]) > quantity(bound):
                problems.append(f"{who}: maximum {name} per {kind} is {bound}, but limit is {limits[name]}")
            elif name in requests and quantity(requests[name]) > quantity(bound):
                problems.append(f"{who}: maximum {name} per {kind} is {bound}, but request is {requests[name]}")
        for name, ratio in (item.get("maxLimitRequestRatio") or {}).items():
            request, limit = quantity(requests.get(name, 0)), quantity(limits.get(name, 0))
            if request == 0 or limit == 0:
                problems.append(f"{who}: {name} max limit to request ratio per {kind} is {ratio}, but no "
                                f"{'request' if request == 0 else 'limit'} is specified (or it is 0)")
            elif limit / request > quantity(ratio):
                problems.append(f"{who}: {name} max limit to request ratio per {kind} is {ratio}, but provided "
                                f"ratio is {float(limit / request):g}")

    for raw in (limit_range.get("spec") or {}).get("limits") or []:
        item = default_limit_range_item(raw)
        if item.get("type") == "Container":
            for key in ("containers", "initContainers"):
                for container in spec.get(key) or []:
                    check("Container", f"container {container.get('name')!r}", _resources(container, "requests"),
                          _resources(container, "limits"), item)
        elif item.get("type") == "Pod":
            check("Pod", "pod", {k: _show(v, k) for k, v in pod_totals(pod, "requests").items()},
                  {k: _show(v, k) for k, v in pod_totals(pod, "limits").items()}, item)
    return problems


# pkg/quota/v1/evaluator/core/pods.go: quota on these requires every container to state them (Constraints).
_REQUIRED_BY_QUOTA = {"cpu": ("requests", "cpu"), "requests.cpu": ("requests", "cpu"),
                      "memory": ("requests", "memory"), "requests.memory": ("requests", "memory"),
                      "limits.cpu": ("limits", "cpu"), "limits.memory": ("limits", "memory")}


def _native(name: str) -> bool:
    return "/" not in name or "kubernetes.io/" in name


def quota_usage(pod: Mapping[str, Any]) -> dict[str, Fraction]:
    """pods.go PodUsageFunc + podComputeUsageHelper: what one (non-terminal) pod charges to a quota."""
    requests, limits = pod_totals(pod, "requests"), pod_totals(pod, "limits")
    usage = {"pods": Fraction(1), "count/pods": Fraction(1)}
    for name in ("cpu", "memory", "ephemeral-storage"):
        if name in requests:
            usage[name] = usage[f"requests.{name}"] = requests[name]
        if name in limits:
            usage[f"limits.{name}"] = limits[name]
    for name, value in requests.items():
        if name.startswith("hugepages-"):
            usage[name] = usage[f"requests.{name}"] = value
        elif not _native(name) and not name.startswith("requests."):
            usage[f"requests.{name}"] = value      # extended resources: only `requests.<name>` quota exists
    return usage


def _priority_class(pod: Mapping[str, Any]) -> str:
    return str((pod.get("spec") or {}).get("priorityClassName") or "")


def _in_scope(pod: Mapping[str, Any], quota: Mapping[str, Any]) -> bool:
    """pkg/quota/v1/evaluator/core/pods.go podMatchesScopeFunc: Terminating / NotTerminating (activeDeadlineSeconds),
    BestEffort / NotBestEffort, PriorityClass (scopeSelector In / NotIn / Exists / DoesNotExist)."""
    spec = quota.get("spec") or {}
    pod_spec = pod.get("spec") or {}
    # pkg/apis/core/v1/helper/qos GetPodQOS: BestEffort = no cpu/memory request or limit on any container
    best_effort = not any(name in ("cpu", "memory") for key in ("containers", "initContainers")
                          for c in pod_spec.get(key) or [] for kind in ("requests", "limits")
                          for name in _resources(c, kind))
    terminating = pod_spec.get("activeDeadlineSeconds") is not None
    selectors = [{"scopeName": scope, "operator": "Exists"} for scope in spec.get("scopes") or []]
    selectors += list((spec.get("scopeSelector") or {}).get("matchExpressions") or [])
    for selector in selectors:
        scope, operator = selector.get("scopeName"), selector.get("operator", "Exists")
        values = [str(v) for v in selector.get("values") or []]
        if (scope == "Terminating" and not terminating) or (scope == "NotTerminating" and terminating):
            return False
        if (scope == "BestEffort" and not best_effort) or (scope == "NotBestEffort" and best_effort):
            return False
        if scope == "PriorityClass":
            name = _priority_class(pod)
            matched = {"In": name in values, "NotIn": name not in values, "Exists": bool(name),
                       "DoesNotExist": not name}.get(str(operator), False)
            if not matched:
                return False
    return True


# ---------------------------------------------------------------------------------------------------------------
# The check


@dataclass
class _Verdict:
    pod: ExpandedPod
    findings: list[Finding] = field(default_factory=list)


def _cluster_version(plan: Plan | None) -> tuple[int, int]:
    text = str(getattr(getattr(plan, "config", None), "kubernetes_version", None) or "")
    match = re.fullmatch(r"v?(\d+)\.(\d+)(?:\.\d+)?", text)
    if not match:
        raise ValueError(f"kubernetes_version {text!r} of the stack is not a version like '1.34'")
    return int(match.group(1)), int(match.group(2))


def check(plan: Plan | None, objects: list[ClusterObject], pods: list[ExpandedPod],
          version: tuple[int, int] | None = None) -> list[CheckResult]:
    """`admitted`: pods passing Pod Security, LimitRange and ResourceQuota, N/N over the expanded pods."""
    cluster = version or _cluster_version(plan)
    result = CheckResult("admitted")
    policies = namespace_policies(objects, cluster)
    namespaces = sorted({p.namespace for p in pods})
    _record_policies(result, policies, namespaces, cluster)
    by_namespace = _valid_limits(objects, result)
    verdicts = [_Verdict(pod) for pod in pods]
    admitted_pods = [(verdict, mutated) for verdict in verdicts
                     if (mutated := _admit(verdict, policies, by_namespace)) is not None]
    for namespace in namespaces:
        for quota in by_namespace.get(f"ResourceQuota/{namespace}", []):
            _charge_quota(result, namespace, quota, admitted_pods, pods)
    for verdict in verdicts:
        result.total += 1
        if verdict.findings:
            result.findings.extend(verdict.findings)
        else:
            result.passed += 1
    return [result]


def _record_policies(result: CheckResult, policies: Mapping[str, Any], namespaces: list[str],
                     cluster: tuple[int, int]) -> None:
    """The API server rejects a Namespace with an invalid Pod Security label; the level each namespace enforces."""
    for policy in policies.values():
        if policy.error:
            result.findings.append(Finding(f"Namespace {policy.namespace}", f"PodSecurity: {policy.error}",
                                           "use privileged, baseline or restricted and 'latest' or 'v1.<minor>' "
                                           "(the API server rejects the Namespace otherwise)"))
    unlabelled = [ns for ns in namespaces if ns not in policies or not policies[ns].labelled]
    result.details.append(f"Pod Security evaluated at Kubernetes {cluster[0]}.{cluster[1]}; enforce per namespace: "
                          + ", ".join(f"{ns}={policies[ns].level if ns in policies else 'privileged'}"
                                      for ns in namespaces))
    if unlabelled:
        result.details.append("namespaces without a pod-security.kubernetes.io/enforce label (privileged, nothing "
                              "enforced): " + ", ".join(unlabelled))


def _valid_limits(objects: list[ClusterObject], result: CheckResult) -> dict[str, list[Mapping[str, Any]]]:
    """`LimitRange/<ns>` and `ResourceQuota/<ns>` → the objects the API server accepts (quantities that parse);
    the others are findings."""
    by_namespace: dict[str, list[Mapping[str, Any]]] = {}
    for item in objects:
        if item.kind in ("LimitRange", "ResourceQuota"):
            by_namespace.setdefault(f"{item.kind}/{item.namespace or 'default'}", []).append(item.obj)
    for key in list(by_namespace):
        kept = []
        for item in by_namespace[key]:
            where = "spec.limits" if key.startswith("LimitRange") else "spec.hard"
            node = (item.get("spec") or {}).get("limits" if key.startswith("LimitRange") else "hard") or {}
            leaves = {str(i): {k: v for k, v in entry.items() if k != "type"} for i, entry in enumerate(node)} \
                if isinstance(node, list) else node
            problems = invalid_quantities(leaves, where)
            if problems:
                result.findings.append(Finding(f"{key.split('/')[0]} {key.split('/')[1]}/"
                                               f"{(item.get('metadata') or {}).get('name')}", "; ".join(problems),
                                               "write Kubernetes quantities (e.g. 500m, 2, 16Gi)"))
            else:
                kept.append(item)
        by_namespace[key] = kept
    return by_namespace


def _admit(verdict: _Verdict, policies: Mapping[str, Any], by_namespace: Mapping[str, list[Mapping[str, Any]]]
           ) -> dict[str, Any] | None:
    """One pod through quantity validation, Pod Security and the LimitRanger: the pod as the LimitRanger mutates
    it (findings on `verdict`), or None when its quantities don't parse."""
    pod = verdict.pod
    problems = invalid_quantities(pod.pod, "", ("containers", "initContainers"))
    if problems:
        verdict.findings.append(Finding(pod.owner, "; ".join(problems),
                                        "write Kubernetes quantities (e.g. 500m, 2, 16Gi)"))
        return None
    policy = policies.get(pod.namespace)
    if policy is not None:
        for control, detail in pod_security(pod.pod, policy.level, policy.version):
            verdict.findings.append(Finding(
                pod.owner, f"PodSecurity {policy.level}:v{policy.version[0]}.{policy.version[1]} "
                           f"{control.id}: {detail}",
                f"{control.fix} (or give namespace {pod.namespace} a lower "
                f"pod-security.kubernetes.io/enforce level if the pod needs it)"))
    limit_ranges = by_namespace.get(f"LimitRange/{pod.namespace}", [])
    mutated = admitted_resources(pod.pod, limit_ranges)
    for limit_range in limit_ranges:
        name = (limit_range.get("metadata") or {}).get("name")
        for problem in _limit_violations(mutated, limit_range):
            verdict.findings.append(Finding(pod.owner, f"LimitRange {pod.namespace}/{name}: {problem}",
                                            "set the container's requests/limits within the LimitRange (or "
                                            "widen the LimitRange)"))
    return mutated


def _charge_quota(result: CheckResult, namespace: str, quota: Mapping[str, Any],
                  admitted_pods: list[tuple[_Verdict, dict[str, Any]]], pods: list[ExpandedPod]) -> None:
    """ResourceQuota: creation in object order, each expanded pod at its full count. Pods of a job Kueue queues
    (its object carries the queue label) are charged one job at a time on top of everything else: Kueue admits
    queued jobs only while their sum fits the ClusterQueue, whose quota the stack makes this quota's
    (components/training_namespace.py capacity_quota_hard), so queued jobs never run all at once."""
    name = f"{namespace}/{(quota.get('metadata') or {}).get('name')}"
    hard = {k: quantity(v) for k, v in ((quota.get("spec") or {}).get("hard") or {}).items()}
    used = {k: Fraction(0) for k in hard}
    per_job: dict[str, dict[str, Fraction]] = {}
    ordered = sorted(admitted_pods, key=lambda entry: entry[0].pod.queued_job is not None)
    for verdict, mutated in ordered:
        pod = verdict.pod
        if pod.namespace != namespace or not _in_scope(mutated, quota) or verdict.findings:
            continue  # another namespace, out of the quota's scope, or rejected earlier: charges nothing
        missing = sorted({f"{where}.{resource}" for key, (where, resource) in _REQUIRED_BY_QUOTA.items()
                          if key in hard for c in (mutated["spec"].get("containers") or [])
                          + (mutated["spec"].get("initContainers") or [])
                          if resource not in _resources(c, where)})
        if missing:
            verdict.findings.append(Finding(pod.owner, f"ResourceQuota {name}: must specify "
                                                       f"{', '.join(missing)} on every container",
                                            "set those requests/limits (or a LimitRange default)"))
            continue
        usage = quota_usage(mutated)
        count = pod.count
        job = pod.queued_job
        base = used
        if job is not None:  # on top of the unqueued pods and the rest of its own job only
            own = per_job.setdefault(job, {k: Fraction(0) for k in hard})
            base = {k: used[k] + own[k] for k in hard}
        over = [key for key in hard if key in usage and base[key] + usage[key] * count > hard[key]]
        if over:
            verdict.findings.append(Finding(
                pod.owner, f"ResourceQuota {name}: " + "; ".join(
                    f"{key}: {count} pod(s) × {_show(usage[key], key)} on top of {_show(base[key], key)} "
                    f"used exceeds hard {_show(hard[key], key)}" for key in over),
                f"raise {', '.join(over)} in the quota to at least "
                + ", ".join(_show(base[k] + usage[k] * count, k) for k in over)
                + " or shrink the pods / their count"))
            continue
        charged = per_job[job] if job is not None else used
        for key in hard:
            if key in usage:
                charged[key] += usage[key] * count
    result.details.append(f"ResourceQuota {name} at the largest scale: " + ", ".join(
        f"{key} {_show(used[key], key)}/{_show(hard[key], key)}" for key in sorted(hard))
        + (f"; queued jobs one at a time on top: {', '.join(sorted(per_job))}" if per_job else ""))
    if any(pod.daemon for pod in pods if pod.namespace == namespace):
        result.details.append(f"ResourceQuota {name}: DaemonSet pods are counted once (one per node)")
