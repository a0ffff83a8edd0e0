#!/usr/bin/env bash
# buf breaking against the previous main, once main carries the v1 protos.
set -euo pipefail
buf=${1:-buf}
against_ref=${BUF_AGAINST_REF:-HEAD~1}
if ! git rev-parse --verify --quiet "$against_ref" >/dev/null \
   || [ -z "$(git ls-tree -r --name-only "$against_ref" -- protos/contextengine/v1)" ]; then
  echo "buf breaking: no v1 protos on $against_ref yet; skipped"
  exit 0
fi
"$buf" breaking --against ".git#ref=$against_ref"
echo "buf breaking: compatible with $against_ref"
