#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Install every Debian package kvss needs. Idempotent: when everything is
# present it checks and returns without touching apt.
set -euo pipefail

PKGS=(
	build-essential pkg-config
	dpdk dpdk-dev libdpdk-dev
	libconfig-dev libxxhash-dev libcriterion-dev libpcap-dev liburing-dev libssl-dev fio
	clang libclang-rt-dev
	python3 iproute2 prometheus python3-prometheus-client python3-yaml gnuplot-nox tshark
	redis-server redis-tools
	ceph-mon ceph-mgr ceph-osd ceph-common librados-dev
)

missing=()
for p in "${PKGS[@]}"; do
	if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
		missing+=("$p")
	fi
done

if [ ${#missing[@]} -eq 0 ]; then
	exit 0
fi

echo "deps: installing ${missing[*]}" >&2
SUDO=
if [ "$(id -u)" -ne 0 ]; then
	SUDO=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q >&2
$SUDO apt-get install -y -q --no-install-recommends "${missing[@]}" >&2
