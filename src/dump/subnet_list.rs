//! `opensm-subnet.lst`: the links as both ends see them.

use std::fmt::Write as _;

use super::lfts::description;
use super::port_lid;
use crate::mad::{NodeType, PortState};
use crate::subnet::snapshot::Snapshot;
use crate::subnet::{NodeId, Subnet};

use crate::mad::port_info::CapabilityMask::IS_EXTENDED_SPEEDS_SUPPORTED as HAS_EXT_SPEEDS;
/// PortInfo.CapabilityMask2.IsLinkWidth2xSupported (IBA 14.2.5.6, Table 159, bit 4).
const HAS_WIDTH_2X: u16 = 1 << 4;

/// One line per cabled port of every node, nodes in ascending node-GUID
/// order and ports in ascending order (so each cable appears twice, once
/// from each end), in OpenSM's `opensm-subnet.lst` format:
///
/// ```text
/// { CA Ports:01 SystemGUID:<16 hex> NodeGUID:<16 hex> PortGUID:<16 hex> VenID:<6 hex> DevID:<4 hex> Rev:<8 hex> {<description>} LID:<4 hex> PN:<2 hex> } { <the far end alike> } PHY=4x LOG=ACT SPD=10
/// ```
///
/// `SW`, `CA` or `Rt` (`**` for other types), `-SM` after the type of the
/// node the master SM runs on; LID is switch port 0's for a switch, the
/// port's own otherwise. PHY, LOG and SPD are the near end's
/// LinkWidthActive, PortState (ACT, ARM, INI, DWN) and link speed (2.5,
/// 5, 10, or with extended speeds 14, 25, 50, 100; `??` for codes outside
/// those). Where OpenSM prints the near end's LID and SM mark for the far
/// end too, this prints the far end's own.
pub fn subnet_list(snap: &Snapshot) -> String {
    let subnet = &snap.sweep.subnet;
    let sm_node = subnet.sm_port.map(|(n, _)| n);
    let mut ids: Vec<NodeId> = subnet.ids().collect();
    ids.sort_by_key(|&id| subnet.node(id).guid());
    let mut out = String::new();
    for id in ids {
        let node = subnet.node(id);
        for port in node.external_ports() {
            let Some((far, far_port)) = node.ports[port as usize].remote else { continue };
            end(&mut out, snap, subnet, id, port, sm_node);
            end(&mut out, snap, subnet, far, far_port, sm_node);
            let info = node.ports[port as usize].info.as_ref();
            let base = node.ports.first().and_then(|p| p.info.as_ref()).filter(|_| node.is_switch()).or(info);
            let state = match info.map(|i| i.port_state) {
                Some(PortState::Active) => "ACT",
                Some(PortState::Armed) => "ARM",
                Some(PortState::Init) => "INI",
                _ => "DWN",
            };
            let width = match info.map(|i| i.link_width_active) {
                Some(1) => "1x",
                Some(2) => "4x",
                Some(4) => "8x",
                Some(8) => "12x",
                Some(16) if base.is_some_and(|b| b.capability_mask2 & HAS_WIDTH_2X != 0) => "2x",
                _ => "??",
            };
            let mut speed = match info.map(|i| i.link_speed_active) {
                Some(1) => "2.5",
                Some(2) => "5",
                Some(4) => "10",
                _ => "??",
            };
            if let (Some(i), Some(b)) = (info, base) {
                if b.capability_mask & HAS_EXT_SPEEDS != 0 {
                    // LinkSpeedExtActive (IBA 14.2.5.6): 0 none, 1 FDR,
                    // 2 EDR, 4 HDR, 8 NDR.
                    speed = match i.link_speed_ext_active {
                        0 => speed,
                        1 => "14",
                        2 => "25",
                        4 => "50",
                        8 => "100",
                        _ => "??",
                    };
                }
            }
            let _ = writeln!(out, "PHY={width} LOG={state} SPD={speed}");
        }
    }
    out
}

fn end(out: &mut String, snap: &Snapshot, subnet: &Subnet, id: NodeId, port: u8, sm_node: Option<NodeId>) {
    let node = subnet.node(id);
    let i = &node.info;
    let kind = match i.node_type {
        NodeType::Switch => "SW",
        NodeType::Ca => "CA",
        NodeType::Router => "Rt",
        NodeType::Unknown(_) => "**",
    };
    let sm = if sm_node == Some(id) { "-SM" } else { "" };
    let _ = write!(
        out,
        "{{ {kind}{sm} Ports:{:02X} SystemGUID:{:016x} NodeGUID:{:016x} PortGUID:{:016x} VenID:{:06X} DevID:{:04X} Rev:{:08X} {{{}}} LID:{:04X} PN:{:02X} }} ",
        i.num_ports,
        i.system_image_guid.0,
        i.node_guid.0,
        node.port_guid(port).0,
        i.vendor_id,
        i.device_id,
        i.revision,
        description(node),
        port_lid(snap, id, port).0,
        port
    );
}
