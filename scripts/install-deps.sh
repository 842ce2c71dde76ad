#!/usr/bin/env bash
# Installs the Debian 12 packages Fluence needs, only those missing. Needs root (or sudo).
set -euo pipefail
packages=(cmake g++ make pkg-config clang-format git
  petsc-dev slepc-dev libhdf5-openmpi-dev openmpi-bin libopenmpi-dev
  libgtest-dev libgmock-dev libbenchmark-dev libtomlplusplus-dev libcli11-dev librandom123-dev
  libfmt-dev libopenblas-dev zlib1g-dev libdeflate-dev libfftw3-dev libsimdjson-dev
  python3-h5py python3-matplotlib python3-numpy python3-xarray python3-h5netcdf python3-netcdf4
  python3-pandas python3-yaml
  dataset-fashion-mnist weka
  slurm-wlm munge)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
echo "Installing missing Debian packages: ${missing[*]}"
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
