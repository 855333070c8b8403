#!/bin/sh
# Rebuilds fixtures/mads/ from two sources independent of ibsm's Rust code:
#   1. libibmad's field encoders (fixturegen gen), for chosen field values;
#   2. a live ibsim (fixturegen capture + smpquery/ibroute text output).
# Needs gcc, libibmad-dev, libibumad-dev, ibsim-utils and infiniband-diags.
# The Rust tests only read the committed files; run this after changing
# fixturegen.c and commit the result.
set -eu

here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
out="$root/fixtures/mads"
net="${IBSIM_NET:-/usr/share/doc/ibsim-utils/net-examples/net}"
tmp=$(mktemp -d)
simpid=""
cleanup() {
	if [ -n "$simpid" ]; then kill "$simpid" 2>/dev/null || true; fi
	rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

gcc -Wall -Wextra -O1 -o "$tmp/fixturegen" "$here/fixturegen.c" -libmad -libumad

mkdir -p "$out"
rm -f "$out"/*.hex "$out"/*.fields "$out"/*.smpquery.txt "$out"/*.ibroute.txt
"$tmp/fixturegen" gen "$out"

# ibsim: one instance on a socket name of our own, killed on exit.
sock="ibsm_fixturegen_$$"
IBSIM_SOCKNAME="$sock" ibsim -s -n "$net" </dev/null >"$tmp/ibsim.log" 2>&1 &
simpid=$!
sleep 1

# umad2sim writes ./sys-<pid>, so run the clients from the temp dir.
cd "$tmp"
export LD_PRELOAD=/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so
export IBSIM_SOCKNAME="$sock" SIM_HOST=Hca1

q() { # q <file tag> <smpquery args...>
	tag=$1
	shift
	smpquery -D "$@" >"$out/ibsim_$tag.smpquery.txt"
}
q nodeinfo_0 nodeinfo 0
q nodeinfo_0-1 nodeinfo 0,1
q nodeinfo_0-1-3 nodeinfo 0,1,3
q nodeinfo_0-1-2 nodeinfo 0,1,2
q portinfo_0_port1 portinfo 0 1
q portinfo_0-1_port0 portinfo 0,1 0
q portinfo_0-1_port1 portinfo 0,1 1
q portinfo_0-1_port3 portinfo 0,1 3
q portinfo_0-1_port8 portinfo 0,1 8
q switchinfo_0-1 switchinfo 0,1
q switchinfo_0-1-3 switchinfo 0,1,3
q nodedesc_0 nodedesc 0
q nodedesc_0-1 nodedesc 0,1
q pkeys_0 pkeys 0
q pkeys_0-1_port1 pkeys 0,1 1
q guidinfo_0 guidinfo 0
# capture runs after the text dumps: it ends by programming Switch1's LFT
# block 0 (and LinearFDBTop) so the LFT fixture is not all 255.
"$tmp/fixturegen" capture "$out"
ibroute -D 0,1 0 63 >"$out/ibsim_lft_0-1.ibroute.txt" 2>/dev/null || true

echo "fixtures written to $out"
