#!/usr/bin/env bash
# Build the `tornasole` Lambda layer asset without Docker: pip downloads the
# manylinux wheels for the Lambda runtime's platform and Python (cp312) instead of building in a container.
#
#   scripts/build_layer.sh [x86_64|arm64] [OUT_DIR]
#
# OUT_DIR/python/ gets the manylinux cp312 wheels of requirements/layer.txt (numpy, protobuf,
# google-crc32c, powertools[tracer]) for the function's architecture, plus the tornasole package
# from layers/. The CDK app ships OUT_DIR with `lambda_.Code.from_asset` (infra/constructs/evaluator.py).
set -euo pipefail
cd "$(dirname "$0")/.."

ARCH="${1:-x86_64}"
OUT="${2:-build/layer/${ARCH}}"
PYTHON="${PYTHON:-.venv/bin/python}"
case "$ARCH" in
  x86_64) PLAT=x86_64 ;;
  arm64|aarch64) PLAT=aarch64 ;;
  *) echo "build_layer.sh: unknown architecture '$ARCH' (expected x86_64 or arm64)" >&2; exit 2 ;;
esac

rm -rf "$OUT"
mkdir -p "$OUT/python"
# Both platform tags: numpy >= 2.3 ships only manylinux_2_28 wheels (the python3.12 runtime is AL2023, glibc 2.34).
{ "$PYTHON" -m pip install -q --disable-pip-version-check -r requirements/layer.txt --target "$OUT/python" \
  --platform "manylinux_2_28_${PLAT}" --platform "manylinux2014_${PLAT}" \
  --implementation cp --python-version 3.12 --abi cp312 --only-binary=:all: --no-compile \
  2>&1 1>&3 | { grep -v "is ignored: it is neither a file nor a directory" || true; } >&2; } 3>&1
# aws-xray-sdk pulls these in; the runtime ships its own boto3/botocore and must not be shadowed.
( cd "$OUT/python" && rm -rf botocore* boto3* s3transfer* urllib3* dateutil python_dateutil* six* six.py bin )
find "$OUT/python" -depth -type d \( -name tests -o -name __pycache__ \) -prune -exec rm -rf {} +
# The library itself (pure Python).
tar -C layers --exclude='__pycache__' --exclude='*.pyc' -cf - tornasole | tar -C "$OUT/python" -xf -
printf '%s\n' "arch=${ARCH}" "python=3.12" > "$OUT/python/.tornasole-layer"
echo "layer for ${ARCH}: ${OUT} ($(du -sh "$OUT" | cut -f1))"
