#!/usr/bin/env bash
# The whole test suite, on a fresh machine: installs what the tests need,
# then runs every workspace test and builds the fuzz targets.
set -euo pipefail
cd "$(dirname "$0")/.."

need_pkgs=()
for pair in ibsim:ibsim-utils smpquery:infiniband-diags opensm:opensm promtool:prometheus systemd-analyze:systemd; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || need_pkgs+=("${pair#*:}")
done
[ -e /usr/lib/x86_64-linux-gnu/libibumad.so.3 ] || need_pkgs+=(libibumad3)
/usr/bin/python3 -c 'import prometheus_client' >/dev/null 2>&1 || need_pkgs+=(python3-prometheus-client)
[ -e /usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so ] || need_pkgs+=(ibsim-utils)
if [ ${#need_pkgs[@]} -gt 0 ]; then
  echo "installing: ${need_pkgs[*]}"
  SUDO=""; [ "$(id -u)" -eq 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${need_pkgs[@]}" >/dev/null
fi

cargo test --workspace --release

# Keep the fuzz crate building (it needs nightly and cargo-fuzz).
if [ -d fuzz ]; then
  command -v cargo-fuzz >/dev/null 2>&1 || cargo install --locked cargo-fuzz
  cargo +nightly fuzz build --fuzz-dir fuzz -O
fi
