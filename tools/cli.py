"""The one entry point every `python -m tools.<x>` runs through: a user's mistake ends in one line, never a traceback.

A missing prerequisite (the Pulumi CLI, skopeo, docker, helm, go, AWS credentials) is said as what to install or set;
a file that isn't there or isn't valid YAML is named with its line and column. Anything else is a bug of ours and
keeps its traceback (tests/test_cli_errors.py runs every tool's user mistakes and fails on any traceback).
"""

from __future__ import annotations

import shutil
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

PREREQUISITES: dict[str, str] = {
    "pulumi": "install the Pulumi CLI: `curl -fsSL https://get.pulumi.com | sh` "
              "(https://www.pulumi.com/docs/iac/download-install/), then `pulumi login`",
    "skopeo": "install skopeo: `sudo apt-get install skopeo` (Debian/Ubuntu)",
    "docker": "install the Docker Engine: `sudo apt-get install docker.io` "
              "(Debian; `make engine-test` does it as root)",
    "dockerd": "install the Docker Engine: `sudo apt-get install docker.io` (Debian)",
    "helm": "run `make setup` (it installs the pinned helm into .venv/bin: tools/vendor.py)",
    "go": "install Go >= 1.26 (https://go.dev/doc/install); the cluster test builds with GOTOOLCHAIN=local",
    "git": "install git: `sudo apt-get install git`",
    "prometheus": "run `make prometheus-local` (`sudo apt-get install prometheus`)",
    "promtool": "run `make prometheus-local` (`sudo apt-get install prometheus`)",
    "dot": "install Graphviz: `sudo apt-get install graphviz`",
    "chromium": "install Chromium: `sudo apt-get install chromium`",
    "aws": "install the AWS CLI v2 (https://docs.aws.amazon.com/cli/latest/userguide/getting-started-install.html)",
    "kubectl": "install kubectl (https://kubernetes.io/docs/tasks/tools/)",
    "npm": "install Node.js and npm: `sudo apt-get install npm`",
}
"""Binary → what to do when it is missing (one line)."""

CREDENTIALS_HINT = ("no usable AWS credentials: set AWS_PROFILE (after `aws sso login`) or AWS_ACCESS_KEY_ID/"
                    "AWS_SECRET_ACCESS_KEY, and AWS_REGION")
# botocore's exceptions for credentials/region the user hasn't set (botocore/exceptions.py); matched by name, so
# a tool that never touches AWS doesn't import botocore.
CREDENTIAL_ERRORS = frozenset({"NoCredentialsError", "PartialCredentialsError", "NoRegionError", "SSOTokenLoadError",
                               "UnauthorizedSSOTokenError", "TokenRetrievalError", "ProfileNotFound"})
# ClientError codes of STS/IAM that mean "these credentials are not valid" (AWS API reference, Common Errors:
# https://docs.aws.amazon.com/STS/latest/APIReference/CommonErrors.html).
REJECTED_CREDENTIAL_CODES = frozenset({"ExpiredToken", "ExpiredTokenException", "InvalidClientTokenId",
                                       "UnrecognizedClientException", "SignatureDoesNotMatch"})


class MissingPrerequisite(RuntimeError):
    """A binary the command needs is not installed; the message says what to install."""


def missing_line(command: str) -> str:
    """`<command> is not installed (not on PATH): <what to do>`."""
    name = Path(command).name
    hint = PREREQUISITES.get(name, f"install `{name}` and put it on PATH")
    return f"`{command}` is not installed (not on PATH): {hint}"


def require(command: str) -> str:
    """The full path of `command`, or MissingPrerequisite saying what to install."""
    found = shutil.which(command)
    if found is None:
        raise MissingPrerequisite(missing_line(command))
    return found


def user_error(error: BaseException) -> str | None:
    """The one line a user's mistake deserves, or None for a bug (which keeps its traceback)."""
    from stack_config.problems import ConfigError
    from stack_config.source import YamlFileError

    if isinstance(error, (MissingPrerequisite, YamlFileError, ConfigError)):
        return str(error)
    if isinstance(error, FileNotFoundError):
        name = Path(str(error.filename or "")).name
        if name in PREREQUISITES:
            return missing_line(str(error.filename))
        return f"{error.filename}: no such file or directory" if error.filename else str(error)
    if type(error).__module__.startswith("botocore"):
        if type(error).__name__ in CREDENTIAL_ERRORS:
            return f"{CREDENTIALS_HINT} ({error})"
        code = (getattr(error, "response", None) or {}).get("Error", {}).get("Code")
        if code in REJECTED_CREDENTIAL_CODES:
            return f"{CREDENTIALS_HINT}: AWS rejected the current ones ({code})"
    return None


def run(main: Callable[..., int], argv: Sequence[str] | None = None, *, prog: str | None = None) -> int:
    """`main(argv)`'s exit code; a user's mistake becomes `error: ...` on stderr and exit 2, Ctrl-C exit 130."""
    name = prog or Path(sys.argv[0]).stem
    try:
        return main(argv) if argv is not None else main()
    except KeyboardInterrupt:
        print(f"{name}: interrupted", file=sys.stderr)
        return 130
    except Exception as error:
        line = user_error(error)
        if line is None:
            raise
        print(f"error: {line}", file=sys.stderr)
        return 2
