//! Which ports the performance manager polls, from the newest snapshot.
//!
//! A switch's PMA sits behind port 0 (its LID) and answers for every
//! external port, chosen by PortSelect; a CA's or router's answers at each
//! port's own LID for that port. Only ports with a cable and a link are
//! polled: a switch port whose link is up (Init or later; counters of a
//! link that will not go Active are the interesting ones), a CA or router
//! port that is Active (GMPs reach nothing else).

use std::sync::Arc;

use crate::mad::PortState;
use crate::subnet::snapshot::{Snapshot, Snapshots};
use crate::subnet::Subnet;
use crate::types::{Guid, Lid};

/// One port to poll.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct PerfPort {
    pub node_guid: Guid,
    /// NodeDescription as the sweep read it (empty when unread).
    pub node_desc: Arc<str>,
    /// The port whose counters are read (PortSelect).
    pub port: u8,
    /// Where the PerfMgt GMPs go: the switch's port 0 LID, or the port's own.
    pub lid: Lid,
    pub is_switch: bool,
}

/// The ports of `snap` to poll, in node then port order.
pub fn from_snapshot(snap: &Snapshot) -> Vec<PerfPort> {
    from_subnet(&snap.sweep.subnet, |guid| snap.sweep.lids.ranges.get(&guid).map(|r| r.base()))
}

/// A target source for the driver: the newest snapshot's ports, nothing
/// before the first sweep publishes one.
pub fn from_snapshots(snapshots: Snapshots) -> impl FnMut() -> Vec<PerfPort> + Send + 'static {
    move || snapshots.latest().map(|s| from_snapshot(&s)).unwrap_or_default()
}

/// The ports of `subnet` to poll; `lid_of(port GUID)` is the LID the sweep
/// assigned (falling back on the LID the port reported).
pub fn from_subnet(subnet: &Subnet, lid_of: impl Fn(Guid) -> Option<Lid>) -> Vec<PerfPort> {
    let mut out = Vec::new();
    for id in subnet.ids() {
        let node = subnet.node(id);
        if node.quarantined.is_some() {
            continue;
        }
        let desc: Arc<str> = node.description.as_deref().unwrap_or("").into();
        let switch = node.is_switch();
        let switch_lid = switch.then(|| lid_of(node.info.port_guid).or_else(|| subnet.current_lid(id, 0))).flatten();
        for port in node.external_ports() {
            let slot = &node.ports[port as usize];
            let (Some(info), Some(_)) = (slot.info.as_ref(), slot.remote) else { continue };
            let up = if switch { info.port_state != PortState::Down } else { info.port_state == PortState::Active };
            if !up {
                continue;
            }
            let lid =
                if switch { switch_lid } else { lid_of(node.port_guid(port)).or(Some(info.lid)).filter(|l| l.0 != 0) };
            let Some(lid) = lid.filter(|l| l.0 != 0 && l.0 < 0xC000) else { continue };
            out.push(PerfPort { node_guid: node.guid(), node_desc: desc.clone(), port, lid, is_switch: switch });
        }
    }
    out
}
