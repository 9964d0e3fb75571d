# SPDX-License-Identifier: BSD-3-Clause
#
# Sourced by the runners that take numbers from the environment (soak.sh,
# soak-procs.sh, demo.sh). env_whole WHO NAME MIN MAX [DEFAULT]: the
# variable NAME (DEFAULT when it is unset or empty) must hold a whole number
# from MIN to MAX, written in decimal digits only; else WHO says which
# variable and what it takes, and the runner exits 2 before it starts
# anything. The value is never evaluated: bash arithmetic on a variable runs
# what a[$(...)] in it names, and SEEDS='s[$(touch F)]' did.
env_whole() {
	local who=$1 name=$2 min=$3 max=$4 v

	[ $# -ge 5 ] && [ -z "${!name-}" ] && printf -v "$name" '%s' "$5"
	v=${!name-}

	if ! [[ "$v" =~ ^[0-9]{1,9}$ ]] || [ "$((10#$v))" -lt "$min" ] || [ "$((10#$v))" -gt "$max" ]; then
		echo "$who: $name=$v: a whole number from $min to $max" >&2
		exit 2
	fi
	printf -v "$name" '%s' "$((10#$v))"
}
