#!/bin/sh
# Verify AWS's EFA installer tarball before anything installs it; exit 1, closed, on any doubt.
#
#   verify-efa-installer.sh TARBALL SIGNATURE KEY FINGERPRINT SHA256
#
# FINGERPRINT and SHA256 are catalog/versions.py EFA_INSTALLER's pins (build args EFA_INSTALLER_GPG_FINGERPRINT and
# EFA_INSTALLER_SHA256); an empty one is not checked, and with both empty nothing is trusted. With FINGERPRINT, the
# steps AWS documents (EC2 user guide, "Install the EFA software", efa-start.html): KEY (aws-efa-installer.key)
# must hold exactly the key with that fingerprint, and SIGNATURE (the tarball's .tar.gz.sig) must be a good
# signature of TARBALL whose primary key is that key. The files are read, never fetched: the Dockerfile's
# efa-installer stage downloads them, tests/image/test_efa_installer_verification.py supplies its own.
set -eu

if [ "$#" -ne 5 ]; then
    echo "usage: $0 TARBALL SIGNATURE KEY FINGERPRINT SHA256 (FINGERPRINT or SHA256 may be empty, not both)" >&2
    exit 2
fi
tarball=$1
signature=$2
key=$3
fingerprint=$4
sha256=$5

refuse() {
    echo "EFA installer $tarball: $*; not installing it" >&2
    exit 1
}

if [ -z "$fingerprint" ] && [ -z "$sha256" ]; then
    refuse "no way to verify it (build args EFA_INSTALLER_GPG_FINGERPRINT and EFA_INSTALLER_SHA256 are empty);" \
        "pin the fingerprint of AWS's signing key, as AWS documents it, in catalog/versions.py EFA_INSTALLER"
fi

if [ -n "$fingerprint" ]; then
    case $fingerprint in
        *[!0-9A-F]*) refuse "pinned fingerprint '$fingerprint' is not 40 upper-case hex digits" ;;
    esac
    [ "${#fingerprint}" -eq 40 ] || refuse "pinned fingerprint '$fingerprint' is not 40 upper-case hex digits"
    # A keyring of its own: nothing else is trusted, and nothing of it outlives this check.
    GNUPGHOME=$(mktemp -d)
    export GNUPGHOME
    trap 'gpgconf --kill all >/dev/null 2>&1 || true; rm -rf "$GNUPGHOME"' EXIT
    gpg --batch --quiet --import "$key" || refuse "$key is not an OpenPGP public key"
    # `fpr` records that follow a `pub` record are primary keys' (gnupg doc/DETAILS, "Field 10"): a key file that
    # also carries another key could let that one sign, so it must hold the pinned key and nothing else.
    imported=$(gpg --batch --with-colons --fingerprint \
        | awk -F: '$1 == "pub" { primary = 1; next } $1 == "fpr" && primary { print $10; primary = 0 }' \
        | paste -s -d ' ' -)
    [ "$imported" = "$fingerprint" ] \
        || refuse "$key holds key(s) ${imported:-none} but not only the pinned $fingerprint (catalog/versions.py" \
            "EFA_INSTALLER.gpg_fingerprint, as AWS documents it)"
    # VALIDSIG's last field is the signing key's primary-key fingerprint (gnupg doc/DETAILS); a revoked key's
    # signature is refused although gpg exits 0 for it.
    status=$(gpg --batch --status-fd 1 --verify "$signature" "$tarball") \
        || refuse "$signature is not a good signature of it by $fingerprint"
    signers=$(printf '%s\n' "$status" | awk '$1 == "[GNUPG:]" && $2 == "VALIDSIG" { print $NF }' | sort -u \
        | paste -s -d ' ' -)
    [ "$signers" = "$fingerprint" ] || refuse "$signature is signed by ${signers:-no valid key}, not $fingerprint"
    if printf '%s\n' "$status" | grep -q '^\[GNUPG:\] REVKEYSIG '; then
        refuse "the key $fingerprint that signed it is revoked"
    fi
    echo "EFA installer $tarball: good signature by $fingerprint"
fi

if [ -n "$sha256" ]; then
    actual=$(sha256sum "$tarball" | cut -d ' ' -f 1)
    [ "$actual" = "$sha256" ] || refuse "sha256 $actual differs from the pinned $sha256"
    echo "EFA installer $tarball: sha256 $sha256"
fi
