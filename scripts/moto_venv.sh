#!/usr/bin/env bash
# A venv that differs from the development one by its moto only: how the local mode is checked against
# another moto release (make check-moto-versions, make test-moto-newest).
#
#   scripts/moto_venv.sh DEV_PYTHON VENV_DIR MOTO_REQUIREMENT
#
# The new venv reads the development venv's packages through a .pth file (its own site-packages come
# first, so its moto, and whatever that moto needs newer, wins), gets MOTO_REQUIREMENT installed by the
# development venv's pip (pip's wheel cache: seconds, not minutes) and this checkout installed editable
# without dependencies (the `tornasole` command the end-to-end tests run). Prints the moto version.
set -euo pipefail
dev_python=$1 venv=$2 requirement=$3
dev_site=$("$dev_python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
rm -rf "$venv"
"$dev_python" -m venv --without-pip "$venv"
site=$("$venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$dev_site" > "$site/development-venv.pth"
pip=("$dev_python" -m pip --python "$venv/bin/python" install -q --disable-pip-version-check)
"${pip[@]}" --upgrade --upgrade-strategy only-if-needed "$requirement"
"${pip[@]}" --no-deps --no-build-isolation -e .
"$venv/bin/python" -c 'from importlib.metadata import version; print(version("moto"))'
