// Package ovs is vflag's Open vSwitch step: it builds (or completes) the
// bridge that holds the bond and the VF representors and turns on hardware
// offload, through OVSDB (libovsdb, typed models in ovs/model), and undoes
// exactly what it did.
//
// # Ordering constraints
//
//   - The bridge exists before its ports: a new bridge, its internal port and
//     interface (named like the bridge, as ovs-vsctl add-br makes them), every
//     wanted Port with its Interface, the reference from Open_vSwitch.bridges
//     and other_config:hw-offload are written in ONE transaction, using named
//     UUIDs for rows created in it. OVSDB applies a transaction atomically,
//     so ovs-vswitchd never sees a bridge without its ports or ports without a
//     bridge, and a failed Ensure leaves nothing behind.
//   - Ensure on a converged host sends no transaction at all. A transaction
//     that writes also increments Open_vSwitch.next_cfg (as ovs-vsctl does);
//     WaitApplied then waits, on monitor updates, until ovs-vswitchd has set
//     cur_cfg to at least that value, i.e. it has applied the change. Read
//     Interface.ofport / Interface.error (Status) only after WaitApplied:
//     before that they describe the previous configuration.
//   - Enabling hw-offload takes effect without a restart. Disabling it (or
//     changing tc-policy) needs an ovs-vswitchd restart: Ensure never does that
//     and never turns offload off; it reports Change.RestartRequired instead.
//   - Ensure converges from any state: in the same one transaction it also
//     removes the owner's ports on the bridge that the spec no longer lists
//     (Change.RemovePorts: a smaller numvfs, representors renamed after a
//     reboot). A bridge the config renamed is pruned before, with
//     RemoveOwned on the old name (OwnedBridges finds it): a netdev can be a
//     port of one bridge only, so the old bridge must release the bond and
//     the representors before Ensure builds the new one.
//   - Undo runs in reverse of Ensure, in one transaction: remove vflag's ports,
//     then the bridge if vflag created it and nothing else is left on it, then
//     restore hw-offload if vflag set it and it is still "true".
//   - A port whose netdev did not exist when ovs-vswitchd opened it has
//     ofport -1 and gets its ofport later, when the netdev appears (the switch
//     reconfigures on the kernel's link notifications). WaitOFPorts waits for
//     that with a bound, after WaitApplied or instead of it.
//
// # Ownership and concurrency
//
// Every row vflag creates carries external_ids vflag-owner=<LAG group>.
// Undo removes only rows carrying the record's owner. Each read is one
// read-only transaction selecting just the columns vflag uses from the
// Open_vSwitch, Bridge, Port and Interface tables: a consistent snapshot
// that includes every change committed before it, ours and other clients'.
// Reads go over a JSON-RPC connection of this package's own (selectConn),
// decoded in one pass into the typed models; libovsdb's client carries the
// writes and waits and is connected only on the first of them, so a run
// that only reads never fetches the schema. (That client monitors only
// Open_vSwitch next_cfg and cur_cfg, for WaitApplied: a monitor of every
// port and interface would cost each connect a snapshot to decode and
// cache, and each write of many ports the update that ovsdb-server sends
// ahead of the reply.) Prefetch starts the bridges' read ahead of its use;
// a write of the client's own in between discards it. Ensure builds its
// transaction on the read of the Plan or PlanStatus that found the change
// (a VLAN change reads once), unless the client wrote since or that read is
// older than plannedMaxAge. Writes are guarded against another client
// changing the database between that read and the write: new rows collide
// with the name indexes, a wait operation makes the transaction fail if the
// bridge Ensure adds ports to is gone or the bridge Undo deletes gained a
// port or a port Ensure, Undo or RemoveOwned deletes lost the owner's mark,
// hw-offload is restored only where it is still "true", and retags
// match only ports still carrying the owner mark (a miss is reported as an
// error after the commit).
//
// # How writes are built
//
// Writes use libovsdb's typed API on the models of ovs/model: Create for
// new rows (a model's UUID field holding the named UUID the other rows of
// the transaction reference), Where by _uuid with Mutate for the set and
// map columns (Bridge.ports, Open_vSwitch.bridges and other_config,
// next_cfg += 1), WhereAll with Update for the guarded column updates and
// with Mutate for the guarded other_config restores, Wait for the guards.
// The typed API maps models through the connected client's database model,
// so a plan does not build operations: plan and undoTxn record the writes
// as a txn of builders, and commit builds them after connecting the client
// (a plan that finds nothing to write never connects it). Two pieces stay
// raw: the select of next_cfg in each write transaction (the typed API has
// no select: List and Get read the client's cache), and WaitOFPorts'
// condition ofport > 0 (libovsdb treats an optional integer column as a
// set and refuses ordering functions on it). libovsdb replaces WhereAll
// conditions that match a row of its cache by that row's _uuid, which
// would drop a guard: the cache holds only next_cfg and cur_cfg, and
// building a guarded operation checks that its conditions were kept. The
// typed API costs CPU: libovsdb maps each model to a row through maps the
// size of its table's schema, ~20 µs a row, so building the inserts of a
// bridge of 254 ports takes ~8 ms (BenchmarkBuild254), about what the rest
// of that Ensure takes.
//
// Names (bridges, ports, owners) are used only as OVSDB values, never as
// named UUIDs, command arguments or paths.
package ovs
