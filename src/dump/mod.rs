//! Text dumps of a published sweep, in the formats OpenSM writes (so the
//! tools that read OpenSM's files read ours), and a Graphviz drawing.
//!
//! - [`subnet_list`]: `opensm-subnet.lst`, one line per cabled port;
//! - [`lfts`]: `opensm-lfts.dump`, every switch's unicast table;
//! - [`mfts`]: OpenSM's multicast table dump (`opensm.mcfdbs`);
//! - [`guid2lid`]: the guid2lid cache file;
//! - [`dot`]: the fabric for Graphviz, links coloured by state.
//!
//! All are pure functions of a [`Snapshot`]: no I/O, the caller writes or
//! serves the text.

mod dot;
mod lfts;
mod subnet_list;
#[cfg(test)]
mod tests;

use std::collections::HashMap;
use std::fmt::Write as _;

pub use dot::{dot, topology_dot, Drawing, Edge, EdgeState, Vertex};
pub use lfts::lfts;
pub use subnet_list::subnet_list;

use crate::subnet::snapshot::Snapshot;
use crate::subnet::{NodeId, Subnet};
use crate::types::{Guid, Lid};

/// OpenSM's multicast table dump (`opensm.mcfdbs`; the issue calls it the
/// MFTs): switches in ascending node-GUID order, each with at least one
/// MLID routed: a blank line, `Switch 0x<guid>`, the `LID    : Out Port(s)`
/// header, then one line per MLID in ascending order: `0x<MLID> :` and
/// ` 0x<port:03X> ` per output port. Switches no group crosses are left
/// out, as OpenSM leaves out switches with empty tables.
pub fn mfts(snap: &Snapshot) -> String {
    let mut switches: Vec<_> = snap.sweep.mcast_tables.iter().collect();
    switches.sort_by_key(|(guid, _)| **guid);
    let mut out = String::new();
    for (guid, table) in switches {
        let routed: Vec<_> = table.iter().filter(|(_, ports)| !ports.is_empty()).collect();
        if routed.is_empty() {
            continue;
        }
        let _ = write!(out, "\nSwitch {guid}\nLID    : Out Port(s)\n");
        for (mlid, ports) in routed {
            let _ = write!(out, "0x{mlid:04X} :");
            for p in ports.iter() {
                let _ = write!(out, " 0x{p:03X} ");
            }
            out.push('\n');
        }
    }
    out
}

/// The guid2lid cache file as OpenSM writes it (`0x<port GUID> 0x<min LID>
/// 0x<max LID>`, a blank line after each record): what the sweep keeps,
/// the present ports' ranges and the absent ports' surviving reservations.
pub fn guid2lid(snap: &Snapshot) -> String {
    snap.sweep.lids.map.to_text()
}

/// Who holds each LID: (node, port) by LID, from the sweep's assignment
/// (a port's whole LMC range), falling back to the LIDs the ports last
/// reported for ports the assignment does not name.
pub(crate) fn lid_owners(snap: &Snapshot) -> HashMap<Lid, (NodeId, u8)> {
    let subnet = &snap.sweep.subnet;
    let mut by_guid: HashMap<Guid, (NodeId, u8)> = HashMap::new();
    for (id, port) in subnet.lid_ports() {
        by_guid.entry(subnet.node(id).port_guid(port)).or_insert((id, port));
    }
    let mut owners = HashMap::new();
    for (guid, range) in &snap.sweep.lids.ranges {
        if let Some(&at) = by_guid.get(guid) {
            let base = range.base().0;
            for lid in base..base.saturating_add(range.len()) {
                owners.insert(Lid(lid), at);
            }
        }
    }
    for (id, port) in subnet.lid_ports() {
        if let Some(lid) = subnet.current_lid(id, port).filter(|l| l.is_unicast() && l.0 != 0) {
            owners.entry(lid).or_insert((id, port));
        }
    }
    owners
}

/// The base LID of a node's port (switch port 0 for a switch): the
/// sweep's assignment, or what the port last reported.
pub(crate) fn port_lid(snap: &Snapshot, id: NodeId, port: u8) -> Lid {
    let subnet: &Subnet = &snap.sweep.subnet;
    let node = subnet.node(id);
    let port = if node.is_switch() { 0 } else { port };
    snap.sweep
        .lids
        .ranges
        .get(&node.port_guid(port))
        .map(|r| r.base())
        .or_else(|| subnet.current_lid(id, port))
        .unwrap_or(Lid(0))
}
