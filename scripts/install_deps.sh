#!/usr/bin/env bash
# Installs what building and testing nexttok needs on Debian/Ubuntu, from the
# distribution's packages only. Idempotent: installs nothing when all is there.
set -euo pipefail

packages=(
  build-essential cmake ninja-build git pkg-config
  libgtest-dev libgmock-dev libbenchmark-dev
  ocl-icd-opencl-dev opencl-headers opencl-clhpp-headers pocl-opencl-icd clinfo
  python3 python3-pip python3-venv
)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if ((${#missing[@]})); then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  echo "installing: ${missing[*]}" >&2
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2
fi

# The Python package's build and CI tests, from PyPI (torch is not needed).
py_pkgs=(numpy hypothesis pytest nanobind scikit-build-core)
if ! python3 -c "import numpy, hypothesis, pytest, nanobind, scikit_build_core" 2>/dev/null; then
  echo "installing (pip): ${py_pkgs[*]}" >&2
  # Debian's own python3 is externally managed: there pip needs to be told.
  python3 -m pip install -q "${py_pkgs[@]}" >&2 ||
    python3 -m pip install -q --break-system-packages "${py_pkgs[@]}" >&2
fi
