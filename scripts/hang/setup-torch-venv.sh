#!/usr/bin/env bash
# Creates the venv that generates the Flight Recorder fixtures of `dsdiag hang`
# (scripts/hang/make_fr_fixtures.py): torch 2.15.0 from PyPI in a plain venv (no system site
# packages), in a cache folder outside the tree. Prints the venv's python on success.
#
#   scripts/hang/setup-torch-venv.sh [VENV_DIR]   (default: ${XDG_CACHE_HOME:-~/.cache}/dsperf/torch-fr-venv)
#
# torch is installed without its dependencies: the CUDA wheels it would pull are replaced by the
# CUDA toolkit in /usr/local/cuda except the few pinned here that the toolkit lacks. On the dev
# image the toolkit's libraries are already found through ldconfig (/usr/local/cuda-13.0/lib);
# LD_LIBRARY_PATH gets $CUDA_LIB for hosts where they are not (the venv's users need the same).
# The gloo backend (CPU) is all the fixtures use; no GPU is needed.
# Idempotent: a venv whose torch already imports at the wanted version is left as it is.
set -euo pipefail
venv="${1:-${XDG_CACHE_HOME:-$HOME/.cache}/dsperf/torch-fr-venv}"
version="${TORCH_VERSION:-2.15.0}"
py="${PYTHON:-/usr/bin/python3}"
cuda_lib="${CUDA_LIB:-/usr/local/cuda/lib64}"
export LD_LIBRARY_PATH="$cuda_lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
check() { "$venv/bin/python" -c "import torch, sys; sys.exit(0 if torch.__version__.split('+')[0] == '$version' else 1)" 2>/dev/null; }
if [ -x "$venv/bin/python" ] && check; then
  echo "$venv/bin/python"
  exit 0
fi
if [ ! -x "$venv/bin/python" ]; then
  mkdir -p "$(dirname "$venv")"
  "$py" -m venv "$venv"
fi
"$venv/bin/pip" install --disable-pip-version-check -q --no-deps "torch==$version" \
  numpy filelock typing-extensions sympy mpmath networkx jinja2 fsspec markupsafe \
  nvidia-cufile nvidia-cusparselt-cu13==0.8.1 nvidia-nvshmem-cu13==3.7.2 nvidia-nccl-cu13==2.30.7
if ! check; then
  echo "setup-torch-venv: torch $version does not import in $venv (LD_LIBRARY_PATH=$LD_LIBRARY_PATH):" >&2
  "$venv/bin/python" -c 'import torch' >&2 || true
  exit 1
fi
echo "$venv/bin/python"
