#!/usr/bin/env bash
# Installs the Debian packages Loom needs (only those missing), then
# configures and builds a release build in build/.
set -euo pipefail
cd "$(dirname "$0")/.."

PACKAGES=(
  cmake ninja-build g++ pkg-config
  libprotobuf-dev protobuf-compiler
  libgoogle-glog-dev libgflags-dev
  libgtest-dev libgmock-dev libbenchmark-dev
  libopenblas-dev libgloo-dev
  libhiredis-dev redis-server  # Gloo's RedisStore: the rendezvous of launches across machines
  slurmctld slurmd slurm-client munge  # srun; a one-node Slurm of its own for slurm_test
  nlohmann-json3-dev zlib1g-dev iproute2
  libjemalloc-dev  # the programs' allocator: planning makes millions of small allocations
  chromium
  clang libclang-rt-dev
  python3-torch python3-venv
)
missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" ||
    missing+=("$p")
done
if ((${#missing[@]})); then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO=sudo
  echo "setup: installing ${missing[*]}"
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq \
    --no-install-recommends "${missing[@]}"
fi

# PyPI's safetensors over Debian's torch, for the test that PyTorch reads
# Loom's checkpoints (scripts/check_checkpoint_torch.py).
if [ ! -x build/pyenv/bin/python ]; then
  mkdir -p build
  /usr/bin/python3 -m venv --system-site-packages build/pyenv
fi
build/pyenv/bin/python -c 'import safetensors' 2>/dev/null ||
  build/pyenv/bin/pip install -q --disable-pip-version-check safetensors==0.8.0

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release
cmake --build build -j "$(nproc)"
