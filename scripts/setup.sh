#!/usr/bin/env bash
# Installs every Debian package clustersim needs to build and test. Idempotent; quiet when all
# packages are present. Run as root (or with sudo available) on Debian 12.
set -euo pipefail
# spdlog brings its fmt (libfmt-dev) as a dependency; googletest without gmock (unused).
packages=(
  build-essential cmake ninja-build pkg-config
  libboost-graph-dev libspdlog-dev libyaml-cpp-dev nlohmann-json3-dev libcli11-dev zlib1g-dev
  libprotobuf-dev protobuf-compiler
  libgtest-dev libbenchmark-dev
  python3-matplotlib
  libopenmpi-dev openmpi-bin
  clang libclang-rt-14-dev
)
missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  exit 0
fi
echo "setup: installing ${missing[*]}"
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
