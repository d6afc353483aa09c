#!/usr/bin/env bash
# Create or update the one PR comment whose body starts with MARKER (an HTML comment), so each kind of report
# (the offline plan diff, a stack's failed preview) keeps a single comment that every push edits.
# Usage: pr-comment.sh MARKER FILE   (env: GH_TOKEN, GH_REPO, PR_NUMBER)
set -euo pipefail
marker="$1"
file="$2"
body="$(printf '%s\n' "${marker}"; cat "${file}")"
id="$(gh api --paginate "repos/${GH_REPO}/issues/${PR_NUMBER}/comments" \
  --jq ".[] | select(.body | startswith(\"${marker}\")) | .id" | head -n 1)"
if [ -n "${id}" ]; then
  gh api --method PATCH "repos/${GH_REPO}/issues/comments/${id}" -f body="${body}" > /dev/null
else
  gh api --method POST "repos/${GH_REPO}/issues/${PR_NUMBER}/comments" -f body="${body}" > /dev/null
fi
