#!/usr/bin/env bash
# Creates the venv the DeepSpeed differential test uses: the real DeepSpeed (PyPI) beside Debian's
# torch (python3-torch), in a cache folder outside the tree. Prints the venv's python on success.
#
#   scripts/deepspeed/setup-venv.sh [VENV_DIR]     (default: ${XDG_CACHE_HOME:-~/.cache}/dsperf/deepspeed-venv)
#
# DeepSpeed is installed without its dependencies (they would pull a second torch); the few its
# import needs come from PyPI. mpi4py is tried too (it builds against libopenmpi-dev): without it,
# DeepSpeed's MPI discovery fails with ModuleNotFoundError, and the live test says so.
set -euo pipefail
venv="${1:-${XDG_CACHE_HOME:-$HOME/.cache}/dsperf/deepspeed-venv}"
version="${DEEPSPEED_VERSION:-0.19.8}"
py=/usr/bin/python3
if ! "$py" -c 'import torch' 2>/dev/null; then
  echo "setup-venv: Debian's torch does not import with $py; install python3-torch (apt-get install python3-torch) first." >&2
  exit 1
fi
if [ ! -x "$venv/bin/python" ]; then
  mkdir -p "$(dirname "$venv")"
  "$py" -m venv --system-site-packages "$venv"
fi
pip=("$venv/bin/pip" install --disable-pip-version-check -q)
"${pip[@]}" --no-deps --no-build-isolation "deepspeed==$version"
# The modules `import deepspeed` needs that Debian's python does not provide. pydantic comes with
# its own pins (pydantic-core, typing-extensions).
"${pip[@]}" --no-deps packaging tqdm hjson einops msgpack
"${pip[@]}" pydantic
"${pip[@]}" --no-deps mpi4py || echo "setup-venv: mpi4py did not build; MPI discovery cases record ModuleNotFoundError live." >&2
"$venv/bin/python" -c 'import deepspeed, sys; sys.stdout.write(deepspeed.__version__ + "\n")' >/dev/null
echo "$venv/bin/python"
