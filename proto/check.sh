#!/usr/bin/env bash
# Check that the committed generated code (proto/gen/python) matches the .proto files, and that
# `buf lint` is clean. Exits 1 with a message otherwise. Runs from any directory.
set -euo pipefail

proto_dir="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

status=0

if ! command -v buf >/dev/null 2>&1; then
  echo "check.sh: buf not on PATH (install buf-bin, e.g. run 'make proto-check')" >&2
  exit 1
fi
if ! (cd "$proto_dir" && buf lint); then
  echo "check.sh: buf lint reported problems (above)" >&2
  status=1
fi

# Lint was done above: generate without linting again, so that a lint problem still gets the diff checked.
PROTO_SKIP_LINT=1 "$proto_dir/generate.sh" "$tmp/python"

if ! diff -r -x __pycache__ "$proto_dir/gen/python" "$tmp/python" >"$tmp/diff.txt"; then
  cat "$tmp/diff.txt" >&2
  echo "check.sh: proto/gen/python is out of date with proto/mus: run 'make proto' and commit the result" >&2
  status=1
fi

exit "$status"
