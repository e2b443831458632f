#!/usr/bin/env bash
# Install Medplum's in-memory FHIR router for the conformance suite (tests/fhir).
# Idempotent: does nothing when the pinned packages are already installed.
set -euo pipefail
cd "$(dirname "$0")/../conformance/medplum"
if ! command -v npm >/dev/null 2>&1; then
  echo "medplum.sh: npm not found; the Medplum conformance target will be skipped" >&2
  exit 0
fi
want="$(node -p "require('./package.json').dependencies['@medplum/fhir-router']")"
have="$(node -p "try { require('./node_modules/@medplum/fhir-router/package.json').version } catch { '' }")"
if [ "$want" = "$have" ]; then
  echo "medplum.sh: @medplum/fhir-router $have already installed"
  exit 0
fi
npm install --no-audit --no-fund --no-save --silent
echo "medplum.sh: installed @medplum/fhir-router $want"
