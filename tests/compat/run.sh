#!/usr/bin/env bash
# meson entry for the compatibility suite (suite 'compat'): every case runs
# against nats-server and keeld and compares what a client observes.
# Skips (77) without keeld, nats-server or node; nats.js comes from
# tests/js (tools/dev setup installs it).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")"
if [[ -z ${KEELD:-} || ! -x ${KEELD} ]]; then
  echo "keeld is not built yet: skipping the compatibility suite"
  exit 77
fi
if [[ -z ${KEEL:-} || ! -x ${KEEL} ]]; then
  echo "keel (the CLI) is not built yet: skipping the compatibility suite"
  exit 77
fi
if [[ -z ${NATS_SERVER:-} || ! -x ${NATS_SERVER} ]]; then
  echo "nats-server is not installed: skipping the compatibility suite"
  exit 77
fi
if [[ ! -f ../js/node_modules/nats/package.json ]]; then
  echo "nats.js is not installed in tests/js: run tools/dev setup" >&2
  exit 1
fi
# Node resolves 'nats' from the importing file's folders upwards.
[[ -e node_modules ]] || ln -s ../js/node_modules node_modules
exec "${NODE:-node}" --test --test-reporter=tap ./*.test.mjs
