//! `opensm-lfts.dump`, from the tables the sweep decided.

use std::fmt::Write as _;

use super::{lid_owners, port_lid};
use crate::mad::NodeType;
use crate::subnet::snapshot::Snapshot;

/// Every routed switch's unicast table in OpenSM's `opensm-lfts.dump`
/// format, switches in ascending node-GUID order:
///
/// ```text
/// Unicast lids [0-<top>] of switch Lid <lid> guid 0x<guid> ('<description>'):
/// 0x<lid> <port:03> # <Channel Adapter|Switch|Router> portguid 0x<guid>: '<description>'
/// 0x<lid> <port:03> # unknown node and type
/// <top> lids dumped
/// ```
///
/// `top` is the sweep's highest LID (LinearFDBTop) within the table;
/// entries whose port is not a port of the switch (255: unrouted) are left
/// out, as OpenSM leaves them. `ibsm_routing::dump::LftDump::parse` (and
/// OpenSM's `file` routing engine) read it back.
pub fn lfts(snap: &Snapshot) -> String {
    let subnet = &snap.sweep.subnet;
    let owners = lid_owners(snap);
    let mut switches: Vec<_> = snap
        .sweep
        .routes
        .lfts
        .iter()
        .filter_map(|(guid, table)| Some((*guid, subnet.by_guid.get(guid).copied()?, table)))
        .collect();
    switches.sort_by_key(|(guid, _, _)| *guid);
    let mut out = String::new();
    for (guid, id, table) in switches {
        let node = subnet.node(id);
        let top = match table.len() {
            0 => 0,
            n => usize::from(snap.sweep.lids.max_lid.0).min(n - 1),
        };
        let _ = writeln!(
            out,
            "Unicast lids [0-{top}] of switch Lid {} guid {guid} ('{}'):",
            port_lid(snap, id, 0).0,
            description(subnet.node(id))
        );
        for (lid, &port) in table.iter().enumerate().take(top + 1) {
            if port > node.info.num_ports {
                continue;
            }
            let _ = write!(out, "0x{lid:04x} {port:03} # ");
            let _ = match owners.get(&crate::types::Lid(lid as u16)) {
                Some(&(owner, owner_port)) => {
                    let o = subnet.node(owner);
                    let kind = match o.info.node_type {
                        NodeType::Switch => "Switch",
                        NodeType::Router => "Router",
                        _ => "Channel Adapter",
                    };
                    let pg = o.port_guid(owner_port);
                    writeln!(out, "{kind} portguid {pg}: '{}'", description(o))
                }
                None => writeln!(out, "unknown node and type"),
            };
        }
        let _ = writeln!(out, "{top} lids dumped");
    }
    out
}

/// The NodeDescription as OpenSM prints it: the text read (control
/// characters as spaces, so a description cannot break a line), or nothing.
pub(super) fn description(node: &crate::subnet::SubnetNode) -> String {
    node.description.as_deref().unwrap_or("").chars().map(|c| if c.is_control() { ' ' } else { c }).collect()
}
