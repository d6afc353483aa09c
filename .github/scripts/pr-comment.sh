#!/usr/bin/env bash
# Create or update the one PR comment whose body starts with MARKER (an HTML comment), so each kind of report
# (the offline plan diff, a stack's failed preview) keeps a single comment that every push edits.
# Usage: pr-comment.sh MARKER FILE [--update-only]   (env: GH_TOKEN, GH_REPO, PR_NUMBER)
# --update-only edits the marked comment if there is one and creates none (a stale failure report, now fixed).
set -euo pipefail
marker="$1"
file="$2"
mode="${3:-}"
body="$(printf '%s\n' "${marker}"; cat "${file}")"
id="$(gh api --paginate "repos/${GH_REPO}/issues/${PR_NUMBER}/comments" \
  --jq ".[] | select(.body | startswith(\"${marker}\")) | .id" | head -n 1)"
if [ -n "${id}" ]; then
  gh api --method PATCH "repos/${GH_REPO}/issues/comments/${id}" -f body="${body}" > /dev/null
elif [ "${mode}" != "--update-only" ]; then
  gh api --method POST "repos/${GH_REPO}/issues/${PR_NUMBER}/comments" -f body="${body}" > /dev/null
fi
