#!/usr/bin/env bash
# meson entry for the nats.js suite (suite 'integration').
# Skips (77) until keeld is built; fails if the npm packages are missing,
# because tools/dev setup installs them (npm ci) before every test run.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
if [[ -z ${KEELD:-} || ! -x ${KEELD} ]]; then
  echo "keeld is not built yet: skipping the nats.js tests"
  exit 77
fi
if [[ ! -f node_modules/nats/package.json ]]; then
  echo "nats.js is not installed in tests/js: run tools/dev setup" >&2
  exit 1
fi
# Arguments: the files to run (a slow one has its own meson test and
# timeout); none: every *.test.mjs.
if (($# > 0)); then
  exec "${NODE:-node}" --test "$@"
fi
exec "${NODE:-node}" --test ./*.test.mjs
