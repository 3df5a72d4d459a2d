#!/usr/bin/env bash
# run.sh runs every Go fuzz target of vflag, one after the other, each for
# FUZZTIME (`make fuzz`). The targets are listed below, one "package target"
# a line: a new target is one line. A target that is not listed, or listed
# and gone, fails the run before any fuzzing.
#
# A failure is a crasher: go test writes it to <package>/testdata/fuzz/<target>/
# (keep it there, as a seed, with the fix). One failure is not: Go 1.26's
# fuzz coordinator may end a run with a bare "context deadline exceeded" at
# the end of -fuzztime and no input (golang/go#75804, fixed in Go 1.27);
# that run is reported as such and does not fail.
set -uo pipefail

GO=${GO:-go}
FUZZTIME=${FUZZTIME:-30s}
# Minimizing each new interesting input can take the whole budget (60 s
# by default) with no new input tried.
FUZZMINIMIZETIME=${FUZZMINIMIZETIME:-5s}

TARGETS='
./eswitch/              FuzzValidIfName
./eswitch/              FuzzParseRepName
./eswitch/              FuzzParseRate
./eswitch/              FuzzParseFilter
./eswitch/              FuzzParseDatapath
./internal/config/      FuzzParse
./internal/doctor/      FuzzParseMstconfig
./internal/doctor/      FuzzParseDevlinkBoolParam
./internal/pathsafe/    FuzzComponent
./internal/pciaddr/     FuzzParse
./internal/sim/         FuzzParseKstrtou16
./internal/sim/         FuzzParseBondOpt
./internal/validate/    FuzzParseTCRead
./internal/validate/    FuzzParseRoCEMode
./internal/validate/    FuzzParseIperf3
./internal/validate/    FuzzParseSendBW
./libvirtx/             FuzzParseHookDomain
./libvirtx/             FuzzParseNetworkHook
./libvirtx/             FuzzParseView
./libvirtx/             FuzzRewriteVF
./ovs/                  FuzzParseDumpFlows
./ovs/                  FuzzModelFromWire
./ovs/                  FuzzSplitSelectResults
./sriov/                FuzzParseDevice
./teardown/             FuzzDecodeJournal
'

cd "$(dirname "$0")/../../.." || exit 1

# The list and the code agree: every func FuzzX in a _test.go is listed.
listed=$(awk 'NF == 2 { sub(/\/$/, "", $1); print $1 " " $2 }' <<<"$TARGETS" | sort)
found=$(grep -rE --include='*_test.go' '^func Fuzz[A-Za-z0-9_]*\(f \*testing\.F\)' . |
	sed -E 's|^(.*)/[^/]*_test\.go:func (Fuzz[A-Za-z0-9_]*)\(.*|\1 \2|' | sort)
if [ "$listed" != "$found" ]; then
	echo "fuzz: the targets in $0 and the code differ (< listed, > in the code):" >&2
	diff <(echo "$listed") <(echo "$found") | grep '^[<>]' >&2
	exit 1
fi

failed=() flaked=()
n=0 start=$SECONDS
while read -r pkg target; do
	[ -n "$pkg" ] || continue
	n=$((n + 1))
	corpus="$pkg/testdata/fuzz/$target"
	before=$(ls "$corpus" 2>/dev/null | sort)
	echo "== $target ($pkg, $FUZZTIME)"
	out=$("$GO" test -run '^$' -fuzz "^$target\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZMINIMIZETIME" "$pkg" 2>&1 </dev/null)
	rc=$?
	after=$(ls "$corpus" 2>/dev/null | sort)
	if [ $rc -eq 0 ]; then
		grep -E '^(ok|PASS)' <<<"$out" | tail -1
		continue
	fi
	if [ "$before" = "$after" ] && grep -qx '    context deadline exceeded' <<<"$out" &&
		! grep -qE 'Failing input written|failure while testing seed corpus|panic:' <<<"$out"; then
		echo "   ended by Go's fuzz coordinator at the deadline, no input (golang/go#75804): not a crasher"
		flaked+=("$target")
		continue
	fi
	echo "$out"
	failed+=("$pkg $target")
done <<<"$TARGETS"

echo "fuzz: $n targets, $FUZZTIME each, $((SECONDS - start)) s; ${#failed[@]} failed, ${#flaked[@]} ended by golang/go#75804"
if [ ${#failed[@]} -gt 0 ]; then
	printf '  FAIL %s\n' "${failed[@]}"
	exit 1
fi
