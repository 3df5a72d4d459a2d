#!/usr/bin/env bash
# make ansible-test: examples/ansible/playbook.yml, as shipped, rolled out by
# Debian's ansible-core over three simulated hypervisors (local connections),
# each with its own simulated host (vflag_sim_dir), state directory
# (vflag_state_dir) and config (vflag_config), sharing one real private
# ovsdb-server/ovs-vswitchd and one real private libvirtd (internal/tools/fleetbed,
# the harness of make demo):
#
#   hv1  switchdev group: VFs, switchdev, bond, VF-LAG, OVS bridge br-hv1 in
#        the real ovs-vswitchd (the simulated netdevs are mirrored into its
#        network namespace), VFs attached to vm-hv1 in the real libvirtd
#   hv2  legacy group: VFs, VF MACs, attached to vm-hv2 (no OVS). Not a
#        second switchdev group: the simulated kernel names representors
#        eth0, eth1, ... in every simulated host, so two switchdev hosts
#        mirrored into the one ovs-vswitchd namespace would claim the same
#        eth0 (and a netns can only hold one).
#   hv3  a bad config (numvfs above sriov_totalvfs), first in the inventory
#
# Scenarios, in this order, each asserted from ansible's exit status, its
# screen output and a JSON-lines record of every task result
# (callback_plugins/vflag_results.py; ansible-core 2.14 has no json callback):
#
#   d. serial 1, hv3 in the first batch: the play fails at hv3's plan with
#      vflag's message (groups[0].numvfs), no task runs on hv1 or hv2, and
#      their configs, simulated hosts, state, OVSDB rows, domains and
#      mirrors are unchanged
#      (hv1 and hv2 have changes pending: a rollout that went on would have
#      written them)
#      serial 2, hv3 and hv1 in the first batch: hv1 plans (read-only) but
#      never gets to up (any_errors_fatal), hv2's batch never starts
#   b. --check --diff on the fresh hv1, hv2: "Planned changes" is the
#      prediction (changed), Up is skipped, the plan task is not changed,
#      the config diff and every planned step summary are on screen (e), and
#      nothing is written (same hashes; the temporary config is gone)
#   a. first run: Up changed on hv1 and hv2, no failure; vflag status and
#      OVSDB/libvirt show the converged hosts
#   c. second run: changed=0 on every host, Up skipped, nothing written
#
# Exits non-zero if any assertion failed; every failed assertion is listed.
# Stops what it started (the daemons through fleetbed, which also stops
# with this script) and removes its work directory, also on failure
# (VFLAG_ANSIBLE_KEEP=1 keeps the directory: logs, sims, results).
set -euo pipefail

cd "$(dirname "$0")/../../.."
ROOT=$PWD
PLAYBOOK=$ROOT/examples/ansible/playbook.yml
GO=${GO:-$(command -v go || echo /usr/local/go/bin/go)}
START=$(date +%s)

say() { printf '\n=== %s\n' "$*"; }
die() { printf 'ansible-test: %s\n' "$*" >&2; exit 1; }
FAILURES=0
check() { # check "what" command...: one assertion; a failure is counted, the test goes on
	local what=$1
	shift
	if "$@"; then
		printf '  [ok  ] %s\n' "$what"
	else
		printf '  [FAIL] %s\n' "$what"
		FAILURES=$((FAILURES + 1))
	fi
}

# --- prerequisites: Debian packages (idempotent, like make deps), binaries
missing=()
for p in ansible-core jq python3; do
	dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
	echo "installing: ${missing[*]}"
	apt-get update -qq
	DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
[ "$(id -u)" = 0 ] || die "needs root (private network and mount namespaces for the daemons)"
"$GO" build -o bin/vflag ./cmd/vflag
"$GO" build -o bin/fleetbed ./internal/tools/fleetbed
VFLAG=$ROOT/bin/vflag

# --- work directory, daemons, cleanup
W=$(mktemp -d /tmp/vflag-ansible.XXXXXX)
BED=""
cleanup() {
	local rc=$?
	if [ -n "$BED" ] && kill -0 "$BED" 2>/dev/null; then
		kill -TERM "$BED" 2>/dev/null || true
		wait "$BED" 2>/dev/null || true
	fi
	if [ "${VFLAG_ANSIBLE_KEEP:-0}" = 1 ]; then
		echo "ansible-test: kept $W"
	else
		rm -rf "$W"
	fi
	exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

say "starting one private ovsdb-server/ovs-vswitchd and libvirtd (internal/tools/fleetbed) for three simulated hosts"
"$ROOT/bin/fleetbed" -env "$W/bed.env" -domain vm-hv1 -domain vm-hv2 -domain vm-hv3 >"$W/bed.log" 2>&1 &
BED=$!
for _ in $(seq 1800); do # up to 180 s: a first qemu capability probe is slow
	[ -f "$W/bed.env" ] && break
	kill -0 "$BED" 2>/dev/null || { cat "$W/bed.log" >&2; die "fleetbed exited"; }
	sleep 0.1
done
[ -f "$W/bed.env" ] || { cat "$W/bed.log" >&2; die "fleetbed not ready after 180 s"; }
# shellcheck disable=SC1091
. "$W/bed.env" # FLEETBED_OVSDB, FLEETBED_LIBVIRT, FLEETBED_NETNS
echo "OVSDB $FLEETBED_OVSDB, libvirt $FLEETBED_LIBVIRT, ovs-vswitchd in $FLEETBED_NETNS"

# --- the fleet: configs on the "controller" ($W/files), hosts in $W/<host>
mkdir -p "$W/files" "$W/hv1" "$W/hv2" "$W/hv3"
cat >"$W/files/hv1.yaml" <<EOF
# hv1: switchdev VF-LAG, OVS bridge in the shared ovs-vswitchd
ovsdb: $FLEETBED_OVSDB
libvirt: $FLEETBED_LIBVIRT
groups:
  - name: hv1lag
    eswitch: switchdev
    pfs: [hv1p0, hv1p1]
    numvfs: 2
    bond: {name: hv1bond, mode: active-backup, miimon: 100}
    vfs:
      - {pf: 0, vf: 0, mac: "52:54:00:a1:00:00", vlan: 100}
      - {pf: 1, vf: 0, mac: "52:54:00:a1:01:00", vlan: 100}
    ovs: {bridge: br-hv1, hw_offload: true, datapath_type: netdev}
    attachments:
      - {domain: vm-hv1, pf: 0, vf: 0}
      - {domain: vm-hv1, pf: 1, vf: 0}
sim:
  mirror_netns: $FLEETBED_NETNS
  nics:
    - name: hv1nic
      total_vfs: 4
      pfs:
        - {pci: "0000:a1:00.0", netdev: hv1p0}
        - {pci: "0000:a1:00.1", netdev: hv1p1}
EOF
legacy_config() { # host numvfs
	cat <<EOF
# $1: legacy group (VFs, VF MACs, attachments)
ovsdb: $FLEETBED_OVSDB
libvirt: $FLEETBED_LIBVIRT
groups:
  - name: ${1}sriov
    eswitch: legacy
    pfs: [${1}p0, ${1}p1]
    numvfs: $2
    vfs:
      - {pf: 0, vf: 0, mac: "52:54:00:a${1#hv}:00:00"}
      - {pf: 1, vf: 0, mac: "52:54:00:a${1#hv}:01:00"}
    attachments:
      - {domain: vm-$1, pf: 0, vf: 0}
      - {domain: vm-$1, pf: 1, vf: 0}
sim:
  nics:
    - name: ${1}nic
      total_vfs: 4
      pfs:
        - {pci: "0000:a${1#hv}:00.0", netdev: ${1}p0}
        - {pci: "0000:a${1#hv}:00.1", netdev: ${1}p1}
EOF
}
legacy_config hv2 2 >"$W/files/hv2.yaml"
legacy_config hv3 100 >"$W/files/hv3.yaml" # bad: 100 VFs on a PF with sriov_totalvfs 4

host_vars() { # host
	echo "$1 vflag_config=$W/files/$1.yaml vflag_config_path=$W/$1/vflag.yaml vflag_sim_dir=$W/$1/sim vflag_state_dir=$W/$1/state"
}
cat >"$W/inventory.ini" <<EOF
# Written by examples/ansible/test/run.sh. hv3 (bad config) comes first:
# with serial 1 it is the first batch.
[hypervisors]
$(host_vars hv3)
$(host_vars hv1)
$(host_vars hv2)

[hypervisors:vars]
ansible_connection=local
ansible_python_interpreter=/usr/bin/python3
# already root, and no sudo here
ansible_become=false
vflag_bin=$VFLAG
# no systemd units to enable on this machine
vflag_boot_units=false
EOF
cat >"$W/ansible.cfg" <<EOF
[defaults]
nocolor = true
retry_files_enabled = false
local_tmp = $W/ansible-local
remote_tmp = $W/ansible-remote
callback_plugins = $ROOT/examples/ansible/test/callback_plugins
callbacks_enabled = vflag_results
interpreter_python = /usr/bin/python3
[connection]
pipelining = true
EOF
export ANSIBLE_CONFIG=$W/ansible.cfg
export PYTHONDONTWRITEBYTECODE=1 # no __pycache__ next to the callback plugin

# play NAME ARGS...: one ansible-playbook run; screen output in $W/NAME.log,
# task results in $W/NAME.jsonl, exit status in PLAY_RC.
play() {
	local name=$1
	shift
	local t0=$SECONDS
	PLAY_RC=0
	: >"$W/$name.jsonl"
	VFLAG_RESULTS=$W/$name.jsonl ansible-playbook -i "$W/inventory.ini" "$PLAYBOOK" "$@" >"$W/$name.log" 2>&1 || PLAY_RC=$?
	echo "ansible-playbook $* -> exit $PLAY_RC ($((SECONDS - t0)) s); recap:"
	sed -n '/^PLAY RECAP/,$p' "$W/$name.log" | sed -n '2,$p' | sed '/^$/d; s/^/  /'
}
# status RUN HOST TASK: ok, changed, skipped, failed, or absent (the task did not run there)
status() {
	jq -rs --arg h "$2" --arg t "$3" \
		'[.[] | select(.host == $h and .task == $t) | .status] | if length == 0 then "absent" else join(",") end' "$W/$1.jsonl"
}
# stat RUN HOST FIELD: a field of the host's recap (ok, changed, failures, skipped, ...), or absent
stat() {
	jq -rs --arg h "$2" --arg f "$3" '[.[] | select(.stats) | .stats[$h][$f] // "absent"] | last // "absent"' "$W/$1.jsonl"
}
is() { [ "$1" = "$2" ] || { echo "    got '$1', want '$2'"; return 1; }; }
gone() { # gone PATH...: each is named and does not exist
	local p
	for p in "$@"; do
		if [ -z "$p" ] || [ -e "$p" ]; then
			echo "    '$p' exists (or no path)"
			return 1
		fi
	done
}
has() { grep -qF -- "$2" "$W/$1.log" || { echo "    '$2' not in $W/$1.log"; return 1; }; }

# snapshot HOST...: everything vflag could write for these hosts, hashed or
# dumped: the simulated host and the state directory (journal, lock), the
# OVSDB rows (not the columns ovs-vswitchd itself updates), the domains'
# persistent XML, the mirrors in ovs-vswitchd's namespace, the hw-offload
# setting. (The config file on the host is the playbook's copy task's.)
snapshot() {
	local h
	for h in "$@"; do
		for d in "$W/$h/sim" "$W/$h/state"; do
			if [ -d "$d" ]; then
				(cd "$d" && find . -type f -print0 | sort -z | xargs -0 -r sha256sum)
			else
				echo "$d absent"
			fi
		done
		virsh -q -c "$FLEETBED_LIBVIRT" dumpxml --inactive "vm-$h"
	done
	ovs-vsctl --db="$FLEETBED_OVSDB" --format=json --data=json \
		--columns=other_config list Open_vSwitch \
		-- --columns=_uuid,name,datapath_type,ports,external_ids list Bridge \
		-- --columns=_uuid,name,tag,interfaces,external_ids list Port \
		-- --columns=_uuid,name,type list Interface
	ip -n "$(basename "$FLEETBED_NETNS")" -br link | awk '{print $1, $3, ($4 ~ /[<,]UP[,>]/ ? "up" : "down")}' | sort
}
same() { # same A B: two snapshots are identical
	cmp -s "$W/$1" "$W/$2" || { diff "$W/$1" "$W/$2" | head -20 | sed 's/^/    /'; return 1; }
}

# The simulated hosts exist before the first run (created from their
# config's sim section by a read-only plan), so that "nothing written" is
# measured against a real host with changes pending.
for h in hv1 hv2; do
	rc=0
	VFLAG_SIM=$W/$h/sim VFLAG_STATE_DIR=$W/$h/state "$VFLAG" --config "$W/files/$h.yaml" plan --detailed-exit-codes >/dev/null || rc=$?
	[ "$rc" = 2 ] || die "vflag plan on the fresh $h: exit $rc, want 2 (changes pending)"
done

say "d. a bad config stops the rollout: serial 1, hv3 (numvfs 100 > sriov_totalvfs 4) in the first batch"
snapshot hv1 hv2 >"$W/d.before"
play d -e vflag_serial=1
check "ansible-playbook failed (exit $PLAY_RC)" [ "$PLAY_RC" -ne 0 ]
check "hv3 failed at its plan" is "$(status d hv3 "Plan succeeded (else the host fails with vflag's message)")" failed
check "hv3's plan task itself ran and is not changed" is "$(status d hv3 "Plan (read-only, also in --check)")" ok
msg=$(jq -rs '[.[] | select(.host == "hv3" and .status == "failed") | .msg] | join("\n")' "$W/d.jsonl")
check "the failure message is vflag's: the field path groups[0].numvfs" grep -qF 'groups[0].numvfs: "100" exceeds sriov_totalvfs 4' <<<"$msg"
check "vflag's message is on screen" has d 'groups[0].numvfs: \"100\" exceeds sriov_totalvfs 4'
check "hv3 never reached up" is "$(status d hv3 "Up (only where the plan found changes)")" absent
for h in hv1 hv2; do
	check "no task ran on $h (not even the config copy)" is "$(jq -s --arg h "$h" '[.[] | select(.host == $h)] | length' "$W/d.jsonl")" 0
done
check "the recap lists hv3 only: the rollout stopped at the failed batch" is "$(stat d hv1 ok) $(stat d hv2 ok)" "absent absent"
check "hv1, hv2 configs not copied" gone "$W/hv1/vflag.yaml" "$W/hv2/vflag.yaml"
snapshot hv1 hv2 >"$W/d.after"
check "hv1, hv2 untouched: sims, state, OVSDB, domains, mirrors identical" same d.before d.after

say "d (serial 2). hv3 and hv1 in one batch: any_errors_fatal keeps hv1 from up, hv2's batch never starts"
snapshot hv1 hv2 >"$W/d2.before"
play d2 -e vflag_serial=2
check "ansible-playbook failed (exit $PLAY_RC)" [ "$PLAY_RC" -ne 0 ]
check "hv3 failed at its plan" is "$(status d2 hv3 "Plan succeeded (else the host fails with vflag's message)")" failed
check "hv1 (same batch) planned, read-only" is "$(status d2 hv1 "Plan (read-only, also in --check)")" ok
check "hv1 (same batch) never reached up" is "$(status d2 hv1 "Up (only where the plan found changes)")" absent
check "no task ran on hv2 (next batch)" is "$(jq -s '[.[] | select(.host == "hv2")] | length' "$W/d2.jsonl")" 0
snapshot hv1 hv2 >"$W/d2.after"
check "hv1, hv2 untouched: sims, state, OVSDB, domains, mirrors identical" same d2.before d2.after
rm -f "$W/hv1/vflag.yaml" # the copy task ran on hv1: back to a fresh host for b

say "b. --check --diff on the fresh hv1, hv2: a prediction, nothing written"
snapshot hv1 hv2 >"$W/b.before"
play b --check --diff --limit hv1:hv2
check "ansible-playbook --check succeeded" is "$PLAY_RC" 0
for h in hv1 hv2; do
	check "$h: plan task ran in --check and is not changed" is "$(status b $h "Plan (read-only, also in --check)")" ok
	check "$h: Planned changes reported as changed (the prediction)" is "$(status b $h "Planned changes")" changed
	check "$h: Up skipped in --check" is "$(status b $h "Up (only where the plan found changes)")" skipped
	check "$h: Config in place would change (reported, not written)" is "$(status b $h "Config in place")" changed
	check "$h: changed=2 in the recap (config, planned changes)" is "$(stat b $h changed)" 2
	check "$h: the config diff is on screen (--diff)" has b "+++ after: $W/files/$h.yaml"
	tmp=$(jq -rs --arg h $h '[.[] | select(.host == $h and .task == "Temporary config for the plan (--check with a changed config)") | .path] | last // ""' "$W/b.jsonl")
	check "$h: the plan read the new config from a temporary copy, since removed ($tmp)" gone "$tmp"
done
for step in "pci/0000:a1:00.0: eswitch legacy -> switchdev" "create bond hv1bond mode active-backup" \
	"bridge br-hv1: bond hv1bond and 4 representors, hw-offload=true (one transaction)" \
	"domain vm-hv1: attach VF 0 of hv1p0 mac 52:54:00:a1:00:00 (after VF creation)" \
	"pci/0000:a2:00.1: sriov_numvfs 0 -> 2" "hv2p1 vf 0: mac - -> 52:54:00:a2:01:00" \
	"domain vm-hv2: attach VF 0 of hv2p1 mac 52:54:00:a2:01:00 (after VF creation)"; do
	check "planned step on screen: $step" has b "\"$step\""
done
check "configs not copied" gone "$W/hv1/vflag.yaml" "$W/hv2/vflag.yaml"
snapshot hv1 hv2 >"$W/b.after"
check "nothing written: sims, state, OVSDB, domains, mirrors identical" same b.before b.after

say "a. first run: hv1 and hv2 converge"
play a --limit hv1:hv2
check "ansible-playbook succeeded" is "$PLAY_RC" 0
for h in hv1 hv2; do
	check "$h: Up changed" is "$(status a $h "Up (only where the plan found changes)")" changed
	check "$h: plan task not changed" is "$(status a $h "Plan (read-only, also in --check)")" ok
	check "$h: no failure" is "$(stat a $h failures)" 0
	check "$h: planned steps listed" is "$(status a $h "Planned changes")" ok
done
# status exits 4 when it finds a problem (a failing validate check): a
# converged host has none.
st1=$(VFLAG_SIM=$W/hv1/sim VFLAG_STATE_DIR=$W/hv1/state "$VFLAG" --config "$W/hv1/vflag.yaml" status -o json) && rc1=0 || rc1=$?
st2=$(VFLAG_SIM=$W/hv2/sim VFLAG_STATE_DIR=$W/hv2/state "$VFLAG" --config "$W/hv2/vflag.yaml" status -o json) && rc2=0 || rc2=$?
check "hv1 status: no problem (exit 0) $(jq -c '[.groups[].problems[]?]' <<<"$st1" 2>/dev/null)" is "$rc1" 0
check "hv2 status: no problem (exit 0) $(jq -c '[.groups[].problems[]?]' <<<"$st2" 2>/dev/null)" is "$rc2" 0
j() { jq -r "$2" <<<"$1"; }
check "hv1 status: both PFs switchdev, 2 VFs each" is "$(j "$st1" '[.groups[0].pfs[] | "\(.eswitch)/\(.numvfs)"] | join(" ")')" "switchdev/2 switchdev/2"
check "hv1 status: bond hv1bond, LAG active" is "$(j "$st1" '.groups[0] | "\(.bond.name) \(.lag.state)"')" "hv1bond active"
check "hv1 status: every representor in br-hv1 with an ofport" is "$(j "$st1" '[.groups[0].vfs[] | select(.ofport > 0)] | length')" 4
check "hv1 status: VF 0 of each PF attached to vm-hv1 with its MAC" is "$(j "$st1" '[.groups[0].vfs[] | select(.domain == "vm-hv1") | .mac] | join(" ")')" "52:54:00:a1:00:00 52:54:00:a1:01:00"
check "hv2 status: both PFs legacy, 2 VFs each" is "$(j "$st2" '[.groups[0].pfs[] | "\(.eswitch)/\(.numvfs)"] | join(" ")')" "legacy/2 legacy/2"
check "hv2 status: VF 0 of each PF attached to vm-hv2 with its MAC" is "$(j "$st2" '[.groups[0].vfs[] | select(.domain == "vm-hv2") | .mac] | join(" ")')" "52:54:00:a2:00:00 52:54:00:a2:01:00"
ports=$(ovs-vsctl --db="$FLEETBED_OVSDB" list-ports br-hv1 | sort | tr '\n' ' ')
check "OVSDB: br-hv1 holds hv1bond and 4 representors ($ports)" is "$(wc -w <<<"$ports") $(grep -ow hv1bond <<<"$ports")" "5 hv1bond"
for h in hv1 hv2; do
	check "libvirt: vm-$h has 2 hostdev interfaces" is "$(virsh -q -c "$FLEETBED_LIBVIRT" dumpxml --inactive "vm-$h" | grep -c "<interface type='hostdev'")" 2
done
check "libvirt: vm-hv3 untouched" is "$(virsh -q -c "$FLEETBED_LIBVIRT" dumpxml --inactive vm-hv3 | grep -c "<interface" || true)" 0

say "c. second run: nothing to do"
snapshot hv1 hv2 >"$W/c.before"
play c --limit hv1:hv2
check "ansible-playbook succeeded" is "$PLAY_RC" 0
for h in hv1 hv2; do
	check "$h: changed=0" is "$(stat c $h changed)" 0
	check "$h: Up skipped" is "$(status c $h "Up (only where the plan found changes)")" skipped
	check "$h: nothing planned" is "$(status c $h "Planned changes")" skipped
done
snapshot hv1 hv2 >"$W/c.after"
check "nothing written: sims, state, OVSDB, domains, mirrors identical" same c.before c.after

# Stop the daemons now, so that their shutdown is part of the test.
kill -TERM "$BED"
bed_rc=0
wait "$BED" || bed_rc=$?
BED=""
check "fleetbed stopped the daemons cleanly" is "$bed_rc" 0

echo
if [ "$FAILURES" -gt 0 ]; then
	echo "ansible-test: $FAILURES assertion(s) failed ($(($(date +%s) - START)) s); ansible output:"
	for r in d d2 b a c; do
		[ -f "$W/$r.log" ] && { echo "--- $r.log (last 40 lines)"; tail -40 "$W/$r.log"; }
	done
	exit 1
fi
echo "ansible-test: all assertions passed ($(($(date +%s) - START)) s)"
