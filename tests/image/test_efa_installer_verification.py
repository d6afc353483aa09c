"""The EFA installer's verification, run as the Dockerfile's efa-installer stage runs it, against throwaway keys.

The stage downloads the tarball, its `.sig` and AWS's key, then runs verify-efa-installer.sh. These tests take that
last step's command from the Dockerfile itself and run it in a folder holding local stand-ins for the three files
(signed here by keys made for the test), with the build args as the environment, as `RUN` gives them.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from catalog import versions
from components import image_spec
from tests.image.test_dockerfile import CONTEXT, DOCKERFILE, parse_dockerfile, stages

SCRIPT = CONTEXT / "verify-efa-installer.sh"
VERSION = "9.9.9"
TARBALL = f"aws-efa-installer-{VERSION}.tar.gz"
# AWS's own rendering (EC2 user guide, efa-start.html, "Verify the GPG key's fingerprint"): spaces, as gpg prints it.
AWS_DOCUMENTED_FINGERPRINT = "4E90 91BC BB97 A96B 26B1  5E59 A054 80B1 DD2D 3CCC"


def _gpg_required() -> str:
    found = shutil.which("gpg")
    assert found, "gpg is not installed: `sudo apt-get install gnupg` (`make test` installs it as root)"
    return found


def _efa_installer_run() -> str:
    stage = next(s for s in stages(parse_dockerfile(DOCKERFILE.read_text(encoding="utf-8")))[1:]
                 if s[0].arguments.endswith("AS efa-installer"))
    (run,) = [i.arguments for i in stage if i.keyword == "RUN"]
    return run


def _steps() -> list[str]:
    return _efa_installer_run().split(" && ")


def _verify_step() -> str:
    """The stage's verification command, its mount target replaced by the script in the repository."""
    mount = _steps()[0].split()[0]
    assert mount == "--mount=type=bind,source=verify-efa-installer.sh,target=/tmp/verify-efa-installer.sh", mount
    (step,) = [s for s in _steps() if s.startswith("sh /tmp/verify-efa-installer.sh ")]
    return step.replace("/tmp/verify-efa-installer.sh", str(SCRIPT), 1)


@dataclass(frozen=True)
class Keys:
    home: Path
    aws: str
    """Stands in for AWS's key: a primary key that signs."""
    other: str
    """Anyone else's key."""
    subkey_signer: str
    """A primary key that only certifies, with a signing subkey (the signature names the subkey)."""

    def gpg(self, *args: str, **kwargs) -> subprocess.CompletedProcess[bytes]:
        return subprocess.run([_gpg_required(), "--batch", "--quiet", *args], check=True, capture_output=True,
                              env={**os.environ, "GNUPGHOME": str(self.home)}, **kwargs)

    def export(self, *fingerprints: str) -> bytes:
        return self.gpg("--armor", "--export", *fingerprints).stdout

    def sign(self, fingerprint: str, data: Path, signature: Path) -> None:
        signature.unlink(missing_ok=True)
        self.gpg("--local-user", f"{fingerprint}!" if fingerprint != self.subkey_signer else fingerprint,
                 "--detach-sign", "--output", str(signature), str(data))


def _new_key(home: Path, user_id: str, usage: str) -> str:
    env = {**os.environ, "GNUPGHOME": str(home)}
    subprocess.run([_gpg_required(), "--batch", "--quiet", "--passphrase", "", "--quick-gen-key", user_id, "ed25519",
                    usage, "never"], check=True, capture_output=True, env=env)
    listing = subprocess.run([_gpg_required(), "--batch", "--with-colons", "--list-keys", user_id], check=True,
                             capture_output=True, text=True, env=env).stdout
    return next(line.split(":")[9] for line in listing.splitlines() if line.startswith("fpr:"))


@pytest.fixture(scope="module")
def keys() -> Iterator[Keys]:
    # A short path: gpg-agent's socket lives in the home when /run/user has no folder for us (108-byte limit).
    home = Path(tempfile.mkdtemp(prefix="gtp-gpg-"))
    home.chmod(0o700)
    try:
        aws = _new_key(home, "AWS stand-in <efa@example.invalid>", "sign")
        other = _new_key(home, "Someone else <other@example.invalid>", "sign")
        subkey_signer = _new_key(home, "Subkey signer <subkey@example.invalid>", "cert")
        subprocess.run([_gpg_required(), "--batch", "--quiet", "--passphrase", "", "--quick-add-key", subkey_signer,
                        "ed25519", "sign", "never"], check=True, capture_output=True,
                       env={**os.environ, "GNUPGHOME": str(home)})
        yield Keys(home, aws, other, subkey_signer)
    finally:
        subprocess.run(["gpgconf", "--kill", "all"], check=False, capture_output=True,
                       env={**os.environ, "GNUPGHOME": str(home)})
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture()
def downloads(tmp_path: Path, keys: Keys) -> Path:
    """What the stage's download step leaves: AWS's tarball, its signature and AWS's key (all stand-ins)."""
    (tmp_path / TARBALL).write_bytes(b"the EFA installer tarball, as AWS published it\n")
    keys.sign(keys.aws, tmp_path / TARBALL, tmp_path / f"{TARBALL}.sig")
    (tmp_path / "aws-efa-installer.key").write_bytes(keys.export(keys.aws))
    return tmp_path


def verify(folder: Path, fingerprint: str, sha256: str = "") -> subprocess.CompletedProcess[str]:
    """The stage's verification step, with these build args, in `folder` (the stage's WORKDIR)."""
    build_args = {"EFA_INSTALLER_VERSION": VERSION, "EFA_INSTALLER_GPG_FINGERPRINT": fingerprint,
                  "EFA_INSTALLER_SHA256": sha256}
    return subprocess.run(["sh", "-c", _verify_step()], cwd=folder, capture_output=True, text=True, check=False,
                          env={**os.environ, **build_args})


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --- The stage, as written ------------------------------------------------------------------------------


def test_the_stage_verifies_the_files_its_download_step_writes() -> None:
    steps = _steps()
    download = next(i for i, s in enumerate(steps) if s.startswith("python -c "))
    verification = next(i for i, s in enumerate(steps) if s.startswith("sh /tmp/verify-efa-installer.sh "))
    assert download < verification
    files = ['"aws-efa-installer-${EFA_INSTALLER_VERSION}.tar.gz"',
             '"aws-efa-installer-${EFA_INSTALLER_VERSION}.tar.gz.sig"', "aws-efa-installer.key"]
    assert steps[download].split('" ', 1)[1].split() == files
    pins = ['"${EFA_INSTALLER_GPG_FINGERPRINT}"', '"${EFA_INSTALLER_SHA256}"']
    assert steps[verification].split()[2:] == [*files, *pins]
    assert "apt-get install -y --no-install-recommends gnupg" in steps


def test_net_efa_installs_only_the_verified_tarball() -> None:
    stage = next(s for s in stages(parse_dockerfile(DOCKERFILE.read_text(encoding="utf-8")))[1:]
                 if s[0].arguments.endswith("AS net-efa"))
    (run,) = [i.arguments for i in stage if i.keyword == "RUN"]
    assert run.startswith("--mount=type=bind,from=efa-installer,source=/efa,target=/tmp/efa-verified tar -xzf "
                          '"/tmp/efa-verified/aws-efa-installer-${EFA_INSTALLER_VERSION}.tar.gz"')
    assert "://" not in run and "urlopen" not in run  # nothing fetched here, so nothing unverified


def test_the_build_args_reach_the_script_as_the_catalog_pins_them() -> None:
    args = image_spec.build_args(net_variant="efa")
    assert args["EFA_INSTALLER_GPG_FINGERPRINT"] == AWS_DOCUMENTED_FINGERPRINT.replace(" ", "")
    assert args["EFA_INSTALLER_GPG_FINGERPRINT"] == versions.EFA_INSTALLER.gpg_fingerprint
    assert args["EFA_INSTALLER_SHA256"] == (versions.EFA_INSTALLER.sha256 or "")


# --- The verification, run ------------------------------------------------------------------------------


def test_the_right_key_and_a_good_signature_pass(downloads: Path, keys: Keys) -> None:
    result = verify(downloads, keys.aws)
    assert result.returncode == 0, result.stderr
    assert f"good signature by {keys.aws}" in result.stdout


def test_a_tampered_tarball_fails(downloads: Path, keys: Keys) -> None:
    with (downloads / TARBALL).open("ab") as tarball:
        tarball.write(b"one more line\n")
    result = verify(downloads, keys.aws)
    assert result.returncode == 1
    assert f"{TARBALL}.sig is not a good signature of it by {keys.aws}; not installing it" in result.stderr


def test_a_tarball_signed_by_another_key_fails_with_that_key_served(downloads: Path, keys: Keys) -> None:
    # The download swapped whole: another tarball, signed by another key, served as AWS's key.
    keys.sign(keys.other, downloads / TARBALL, downloads / f"{TARBALL}.sig")
    (downloads / "aws-efa-installer.key").write_bytes(keys.export(keys.other))
    result = verify(downloads, keys.aws)
    assert result.returncode == 1
    assert f"holds key(s) {keys.other} but not only the pinned {keys.aws}" in result.stderr


def test_a_tarball_signed_by_another_key_fails_with_aws_key_served(downloads: Path, keys: Keys) -> None:
    keys.sign(keys.other, downloads / TARBALL, downloads / f"{TARBALL}.sig")
    result = verify(downloads, keys.aws)
    assert result.returncode == 1
    assert "is not a good signature of it" in result.stderr


def test_a_key_file_with_an_extra_key_fails_even_beside_the_pinned_one(downloads: Path, keys: Keys) -> None:
    # Otherwise the extra key could sign: gpg --verify accepts any key in the keyring.
    keys.sign(keys.other, downloads / TARBALL, downloads / f"{TARBALL}.sig")
    (downloads / "aws-efa-installer.key").write_bytes(keys.export(keys.aws, keys.other))
    result = verify(downloads, keys.aws)
    assert result.returncode == 1
    assert "but not only the pinned" in result.stderr


def test_a_wrong_pinned_fingerprint_fails(downloads: Path, keys: Keys) -> None:
    result = verify(downloads, keys.other)
    assert result.returncode == 1
    assert f"holds key(s) {keys.aws} but not only the pinned {keys.other}" in result.stderr


def test_the_signature_is_checked_against_the_primary_key(downloads: Path, keys: Keys) -> None:
    keys.sign(keys.subkey_signer, downloads / TARBALL, downloads / f"{TARBALL}.sig")
    (downloads / "aws-efa-installer.key").write_bytes(keys.export(keys.subkey_signer))
    assert verify(downloads, keys.subkey_signer).returncode == 0


def test_no_pin_at_all_fails_before_reading_anything(tmp_path: Path) -> None:
    result = verify(tmp_path, "")  # an empty folder: nothing downloaded is even looked at
    assert result.returncode == 1
    assert ("no way to verify it (build args EFA_INSTALLER_GPG_FINGERPRINT and EFA_INSTALLER_SHA256 are empty); pin "
            "the fingerprint of AWS's signing key, as AWS documents it, in catalog/versions.py EFA_INSTALLER"
            ) in result.stderr


@pytest.mark.parametrize("pin", [AWS_DOCUMENTED_FINGERPRINT, "4e9091bcbb97a96b26b15e59a05480b1dd2d3ccc",
                                 "DD2D3CCC"])
def test_a_fingerprint_not_in_the_catalog_form_fails(downloads: Path, pin: str) -> None:
    result = verify(downloads, pin)
    assert result.returncode == 1
    assert f"pinned fingerprint '{pin}' is not 40 upper-case hex digits" in result.stderr


def test_the_catalog_pin_has_the_form_the_script_checks(downloads: Path) -> None:
    # The stand-in key is not AWS's, so it is refused, but for its fingerprint, not the pin's form.
    pin = image_spec.build_args(net_variant="efa")["EFA_INSTALLER_GPG_FINGERPRINT"]
    result = verify(downloads, pin)
    assert result.returncode == 1
    assert f"but not only the pinned {pin}" in result.stderr


def test_a_pinned_sha256_is_checked_too(downloads: Path, keys: Keys) -> None:
    digest = _sha256(downloads / TARBALL)
    good = verify(downloads, keys.aws, digest)
    assert good.returncode == 0, good.stderr
    assert f"sha256 {digest}" in good.stdout
    bad = verify(downloads, keys.aws, "0" * 64)
    assert bad.returncode == 1
    assert f"sha256 {digest} differs from the pinned {'0' * 64}" in bad.stderr


def test_a_sha256_alone_verifies_where_no_fingerprint_is_pinned(downloads: Path) -> None:
    assert verify(downloads, "", _sha256(downloads / TARBALL)).returncode == 0
    assert verify(downloads, "", "0" * 64).returncode == 1
