#!/bin/bash
# A reboot, on the real kernel: after a converged up, what a reboot keeps
# (vflag's journal, Open vSwitch's database) stays and what it loses goes:
# OVS stopped and its datapath deleted, the bond deleted, the netdevsim
# device deleted and re-created after two other netdevs took eth0 and eth1
# (kernel names shift: representors come back under other names, and the
# old ones now name foreign netdevs that OVS opens from its database), the
# PFs renamed back as udev would. Then, in boot order, `vflag up --stage pre`
# and `vflag up`: the host must reconverge to the same state (modulo
# representor names and random MACs) and pass `vflag validate` (but for the
# LACP check netdevsim cannot pass: no link partner). Between the two, an
# up that fails at the bridge (after the bond) rolls back to what the pre
# stage left: no bond, the eswitch in switchdev, the VFs, the bridge done
# again as the up before the reboot made it. Once more
# without the pre stage. down returns to the baseline.
#
# MACHINE: default
# TIMEOUT: 420
# EXPECT: r_up r_up_again
# EXPECT: r1_pre r1_fail r1_up r1_same r1_no_stale r1_validate r1_again
# EXPECT: r2_up r2_same r2_no_stale r2_validate r2_again
# EXPECT: r_down r_baseline
. "$(dirname "$0")/lib.sh"

ID=10
PF1=enp10s0f0np0 # the names udev would give
PF2=enp10s0f1np1
udev_names() { # the PFs of netdevsim<ID>, renamed as udev would
	local a b
	a=$(netdev_by_ppn $ID p1) && b=$(netdev_by_ppn $ID p2) || return 1
	ip link set "$a" name $PF1 && ip link set "$b" name $PF2 && echo "$a -> $PF1, $b -> $PF2"
}
step "bed: netdevsim with 2 ports (udev names), bonding, Open vSwitch"
nsim_new $ID 2 || exit 1
udev_names || exit 1
modprobe bonding max_bonds=0
ovs_start || exit 1
ovs-vsctl add-br br-ops -- add-port br-ops ops0 -- set interface ops0 type=internal

cat >/root/vflag.yaml <<EOF
ovsdb: unix:/var/run/openvswitch/db.sock
lag_timeout: 20s
groups:
  - name: lag0
    pfs: [$PF1, $PF2]
    numvfs: 4
    bond: {name: bond0, mode: 802.3ad, miimon: 100, lacp_rate: fast, xmit_hash_policy: layer3+4}
    vfs:
      - {pf: 0, vf: 0, vlan: 100}
      - {pf: 0, vf: 2, vlan: 200}   # netdevsim: one VF pool, on the first port
    ovs: {bridge: br-vf}
EOF
V() { "$VFLAG" --config /root/vflag.yaml --state-dir /root/state "$@"; }

# snapshot NAME: the kernel's and OVS's view, representors named by their
# phys_port_name (rep:pf0vfN), random MACs and switch ids masked, LACP
# progress dropped, links sorted (their ifindex order changes); the netdevs
# standing in for other NICs (dummies) left out.
snapshot() {
	local map="" n ppn
	for n in $(nsim_netdevs $ID); do
		ppn=$(cat /sys/class/net/$n/phys_port_name 2>/dev/null)
		case $ppn in pf*vf*) map="$map s#(^|[ ,:])$n([ ,:@]|\$)#\\1rep:$ppn\\2#g;" ;; esac
	done
	{
		ip -d link show | sed -E 's/^[0-9]+: //; s/ qdisc [a-z_]+ / /' |
			awk '/^[^ ]/ { if (l != "") print l; l = $0; next } { l = l " " $0 } END { print l }' |
			grep -Ev '(^| )dummy( |$)'
		devlink dev eswitch show netdevsim/netdevsim$ID
		echo "numvfs $(cat /sys/bus/netdevsim/devices/netdevsim$ID/sriov_numvfs)"
		for f in mode miimon lacp_rate xmit_hash_policy slaves; do echo "bond0 $f $(cat /sys/class/net/bond0/bonding/$f 2>/dev/null)"; done
		for b in $(ovs-vsctl list-br); do
			for p in $(ovs-vsctl list-ports "$b"); do
				echo "bridge $b port $p tag $(ovs-vsctl get port "$p" tag) ofport>0 $([ "$(ovs-vsctl get interface "$p" ofport)" -gt 0 ] 2>/dev/null && echo yes || echo no) error $(ovs-vsctl get interface "$p" error)"
			done
		done
		ovs-vsctl get Open_vSwitch . other_config
	} | sed -E "$map"'s#link/ether [0-9a-f:]{17}#link/ether <mac>#g; s#brd [0-9a-f:]{17}#brd <mac>#g; s#switchid [0-9a-f]+#switchid <id>#g; s#perm_hwaddr [0-9a-f:]{17}#perm_hwaddr <mac>#g; s#ad_(actor|partner)_oper_port_state [0-9]+ ad_(actor|partner)_oper_port_state_str <[^>]*>#<lacp>#g; s#ad_aggregator_id [0-9]+#ad_aggregator_id <n>#g' |
		sort >"$OUT/$1.state"
}
same() {
	if diff -u "$OUT/$1.state" "$OUT/$2.state" >"$OUT/$2.diff"; then
		echo "identical to $1 ($(wc -l <"$OUT/$2.state") lines)"
	else
		cat "$OUT/$2.diff"
		return 1
	fi
}
no_stale() {
	local errs
	errs=$(ovs-vsctl --format=csv --data=bare --no-headings --columns=name,error list Interface | awk -F, '$2 != ""')
	if [ -n "$errs" ] || ovs-vsctl show | grep -q 'could not open'; then
		echo "errors: $errs"
		return 1
	fi
	local want got
	want=$(printf '%s\n' bond0 $(reps $ID) | sort | tr '\n' ' ')
	got=$(ovs-vsctl list-ports br-vf | sort | tr '\n' ' ')
	[ "$want" = "$got" ] || { echo "br-vf has [$got], want bond0 and the representors [$want]"; return 1; }
	echo "no Interface error; br-vf: $got"
}
# validated: validate --allow-skip fails only where netdevsim must: bond/lacp
# (no link partner on netdevsim's ports); everything else passes or skips.
validated() {
	local rc failed
	V validate --allow-skip -o json >"$OUT/$1.json" 2>"$OUT/$1.err"
	rc=$?
	failed=$(jq -r '[.groups[].checks[] | select(.verdict == "fail") | .name] | join(" ")' "$OUT/$1.json")
	echo "pass: $(jq -r '[.groups[].checks[] | select(.verdict == "pass") | .name] | join(" ")' "$OUT/$1.json")"
	echo "skip: $(jq -r '[.groups[].checks[] | select(.verdict == "skip") | .name] | join(" ")' "$OUT/$1.json")"
	# netdevsim ports report operstate unknown (no carrier) and have no LACP
	# partner: the slave and LACP checks fail on netdevsim, nothing else may.
	local other
	other=$(jq -r '[.groups[].checks[] | select(.verdict == "fail") | .name | select(. != "bond/lacp" and (startswith("bond/slave/") | not))] | join(" ")' "$OUT/$1.json")
	[ -z "$other" ] && [ $rc = 1 ] && echo "$failed" | grep -q "bond/lacp" ||
		{ echo "exit $rc, failed [$failed], want exit 1 with only the netdevsim ones (bond/lacp, bond/slave/*): $(jq -c '[.groups[].checks[] | select(.verdict == "fail")]' "$OUT/$1.json")"; return 1; }
	echo "exit 1: only the netdevsim checks fail ($failed)"
}
# failed_after_pre STEP: up failing at STEP (after the bond) rolls back to
# the host the pre stage left: exit 1, rolled back (no failed rollback), no
# bond, the eswitch in switchdev, 4 VFs, br-vf holding bond0's port and the
# representors (done again as the config makes it); plan then still makes
# the bond.
failed_after_pre() {
	local out rc
	out=$(V up --fail-at "$1" 2>&1)
	rc=$?
	printf '%s\n' "$out" | tail -n 2
	if [ $rc != 1 ] || ! grep -q "injected failure" <<<"$out" || ! grep -q "rolled back" <<<"$out" || grep -q "rollback failed" <<<"$out"; then
		echo "exit $rc, want 1, injected failure, rolled back"
		return 1
	fi
	if ip link show bond0 >/dev/null 2>&1; then
		echo "bond0 is still there"
		return 1
	fi
	devlink dev eswitch show netdevsim/netdevsim$ID | grep -q "mode switchdev" || { echo "the eswitch is not in switchdev"; return 1; }
	[ "$(cat /sys/bus/netdevsim/devices/netdevsim$ID/sriov_numvfs)" = 4 ] || { echo "numvfs is not 4"; return 1; }
	local want got
	want=$(printf '%s\n' bond0 $(reps $ID) | sort | tr '\n' ' ')
	got=$(ovs-vsctl list-ports br-vf | sort | tr '\n' ' ')
	[ "$want" = "$got" ] || { echo "br-vf has [$got], want bond0 and the representors [$want]"; return 1; }
	V plan | grep -q "create bond bond0" || { echo "plan does not make bond0 again"; return 1; }
	echo "rolled back to the pre stage's host: no bond0, switchdev, 4 VFs, br-vf: $got"
}
# sim_reboot NAME...: what a reboot keeps and loses; dummies NAME... stand for
# other NICs that probe first and take those names.
sim_reboot() {
	local n
	run ovs-ctl stop
	run ovs-dpctl del-dp ovs-system
	run ip link del bond0
	echo $ID >/sys/bus/netdevsim/del_device
	for n in "$@"; do run ip link add "$n" type dummy; done
	echo "$ID 2" >/sys/bus/netdevsim/new_device
	wait_for 10 _nsim_has $ID 2 || return 1
	udev_names || return 1
	ovs_start || return 1
	echo "after the reboot: $(ip -br link | awk '{print $1}' | tr '\n' ' ')"
}

snapshot base
step "up"
check r_up V up || exit 1
check r_up_again again
snapshot converged
ovs-vsctl show >"$OUT/converged.ovs"

step "reboot 1: up --stage pre, then up"
# The representors were eth0..eth3 (in OVS's database): eth0 and eth1 now
# name other netdevs, the representors come back as eth2..eth5.
sim_reboot eth0 eth1 || exit 1
ovs-vsctl show >"$OUT/reboot1.ovs"
check r1_pre V up --stage pre
check r1_fail failed_after_pre ovs.bridge/br-vf
check r1_up V up
snapshot r1
check r1_same same converged r1
check r1_no_stale no_stale
check r1_validate validated validate1
check r1_again again

step "reboot 2: up alone"
ip link del eth0
ip link del eth1
# The representors were eth2..eth5: now eth1..eth4, each name another VF's.
sim_reboot eth0 || exit 1
ovs-vsctl show >"$OUT/reboot2.ovs"
check r2_up V up
snapshot r2
check r2_same same converged r2
check r2_no_stale no_stale
check r2_validate validated validate2
check r2_again again

step "down"
check r_down V down
ip link del eth0
snapshot after
check r_baseline same base after
exit 0
