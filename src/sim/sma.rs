//! The subnet management agent of every simulated node: SubnGet/SubnSet of
//! the SM attributes (IBA 14.2.5) behind the M_Key check (IBA 14.2.4).
//!
//! Status codes follow real devices (and the Linux SMA of qib/hfi1):
//! an unknown method is 0x0008, an unknown attribute or a Set of a
//! read-only one 0x000C, a bad AttributeModifier or field value 0x001C.

use std::time::Duration;

use super::fabric::{Fabric, PortId, PortTables};
use super::profile::{self, PortKind};
use super::DropReason;
use crate::mad::header::status;
use crate::mad::pkey_table::{self, PKEY_BLOCK_ENTRIES};
use crate::mad::port_info::{link_speed, link_speed_ext, link_width, ATTR_MOD_SM_SUPPORTS_EXTENDED_SPEEDS};
use crate::mad::{
    AttributeId, LftBlockRepr, LinkDownDefaultState, Method, NodeDescriptionRepr, NodeInfoRepr, NodeType, PhysState,
    PortInfoRepr, PortState, SwitchInfoRepr, SMP_DATA_LEN,
};
use crate::topology::{NodeIdx, NodeKind};

/// What the SMA does with one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SmaOutcome {
    Reply {
        status: u16,
        data: [u8; SMP_DATA_LEN],
    },
    /// No response (M_Key violation, TrapRepress).
    Silent(Option<DropReason>),
}

/// Result of the M_Key check (IBA 14.2.4.1, Table 140 "M_Key protection").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum KeyCheck {
    Pass,
    /// Protection level 1, wrong key: a Get succeeds but PortInfo.M_Key
    /// reads 0.
    PassHidingKey,
    Fail,
}

type Reply = Result<[u8; SMP_DATA_LEN], u16>;

fn invalid<T>() -> Result<T, u16> {
    Err(status::INVALID_FIELD)
}

/// The GUIDInfo block holds 8 GUIDs (IBA 14.2.5.5).
const GUIDS_PER_BLOCK: usize = 8;
/// The MFT block holds 32 port masks (IBA 14.2.5.12).
const MFT_BLOCK_ENTRIES: usize = 32;
/// Ports per MFT position.
const MFT_POSITION_PORTS: usize = 16;

impl Fabric {
    /// Handles one SMP request arriving at `at` (the ingress port; a
    /// switch's SMA answers for the whole switch).
    pub(crate) fn sma(
        &mut self,
        at: PortId,
        method: Method,
        attr: AttributeId,
        attr_mod: u32,
        m_key: u64,
        data: &[u8; SMP_DATA_LEN],
    ) -> SmaOutcome {
        let key_port = self.mgmt_port(at);
        let check = self.check_m_key(key_port, method, m_key);
        if check == KeyCheck::Fail {
            return SmaOutcome::Silent(Some(DropReason::MKey));
        }
        let set = match method {
            Method::Get => false,
            Method::Set => true,
            Method::TrapRepress => return SmaOutcome::Silent(None),
            _ => return SmaOutcome::Reply { status: status::METHOD_UNSUPPORTED, data: *data },
        };
        let is_switch = self.node_of(at).kind == NodeKind::Switch;
        let r: Reply = match attr {
            AttributeId::NodeDescription if !set => Ok(self.node_description(at)),
            AttributeId::NodeInfo if !set => Ok(self.node_info(at)),
            AttributeId::PortInfo => self.port_info_attr(at, set, attr_mod, data, check == KeyCheck::PassHidingKey),
            AttributeId::SwitchInfo if is_switch => self.switch_info_attr(at, set, data),
            AttributeId::LinearForwardingTable if is_switch => self.lft_attr(at, set, attr_mod, data),
            AttributeId::MulticastForwardingTable if is_switch => self.mft_attr(at, set, attr_mod, data),
            AttributeId::PKeyTable => self.pkey_attr(at, set, attr_mod, data),
            AttributeId::SlToVlMappingTable => self.sl2vl_attr(at, set, attr_mod, data),
            AttributeId::VlArbitrationTable => self.vlarb_attr(at, set, attr_mod, data),
            AttributeId::GuidInfo => self.guid_info_attr(at, set, attr_mod, data),
            _ => Err(status::METHOD_ATTR_UNSUPPORTED),
        };
        match r {
            Ok(data) => SmaOutcome::Reply { status: 0, data },
            // A refused Set answers with the attribute as it stands (what
            // the Linux SMAs do: the error path falls through to the Get).
            Err(status::INVALID_FIELD) if set => match self.sma(at, Method::Get, attr, attr_mod, m_key, data) {
                SmaOutcome::Reply { status: 0, data } => SmaOutcome::Reply { status: status::INVALID_FIELD, data },
                _ => SmaOutcome::Reply { status: status::INVALID_FIELD, data: *data },
            },
            Err(status) => SmaOutcome::Reply { status, data: *data },
        }
    }

    /// IBA 14.2.4: a key mismatch lets a Get through below protection level
    /// 2; otherwise the SMP is dropped, M_KeyViolations counts it and the
    /// lease period starts. A lease that ran out clears the protection
    /// bits; a good key stops the lease.
    fn check_m_key(&mut self, key_port: PortId, method: Method, m_key: u64) -> KeyCheck {
        let now = self.now;
        let p = self.port_mut(key_port);
        if p.lease_deadline.is_some_and(|d| now >= d) {
            p.lease_deadline = None;
            p.pi.m_key_protect_bits = 0;
        }
        if p.pi.m_key == 0 || p.pi.m_key == m_key {
            if matches!(method, Method::Get | Method::Set | Method::TrapRepress) {
                p.lease_deadline = None;
            }
            return KeyCheck::Pass;
        }
        match method {
            Method::Get if p.pi.m_key_protect_bits == 0 => KeyCheck::Pass,
            Method::Get if p.pi.m_key_protect_bits == 1 => KeyCheck::PassHidingKey,
            Method::Get | Method::Set | Method::TrapRepress => {
                p.pi.m_key_violations = p.pi.m_key_violations.saturating_add(1);
                if p.lease_deadline.is_none() && p.pi.m_key_lease_period != 0 {
                    p.lease_deadline = Some(now + Duration::from_secs(p.pi.m_key_lease_period as u64));
                }
                KeyCheck::Fail
            }
            _ => KeyCheck::Pass,
        }
    }

    fn node_description(&self, at: PortId) -> [u8; SMP_DATA_LEN] {
        NodeDescriptionRepr::new(self.node_of(at).description.clone()).to_bytes()
    }

    fn node_info(&self, at: PortId) -> [u8; SMP_DATA_LEN] {
        let n = self.node_of(at);
        let p = self.port(at);
        let (node_type, partition_cap, port_guid) = match n.kind {
            NodeKind::Switch => (NodeType::Switch, profile::SWITCH_PARTITION_CAP, self.port(self.mgmt_port(at)).guid),
            NodeKind::Ca => (NodeType::Ca, profile::CA_PARTITION_CAP, p.guid),
            NodeKind::Router => (NodeType::Router, profile::CA_PARTITION_CAP, p.guid),
        };
        NodeInfoRepr {
            base_version: 1,
            class_version: 1,
            node_type,
            num_ports: n.num_ports,
            system_image_guid: n.system_guid,
            node_guid: n.guid,
            port_guid,
            partition_cap,
            device_id: 0,
            revision: profile::REVISION,
            local_port_num: p.num,
            vendor_id: 0,
        }
        .to_bytes()
    }

    /// The port an AttributeModifier's port number selects: on a switch
    /// 0..=NumPorts, on an end node 1..=NumPorts with 0 meaning the port the
    /// SMP arrived on (IBA 14.2.5.6).
    fn select_port(&self, at: PortId, num: u32) -> Result<PortId, u16> {
        let p = self.port(at);
        let n = &self.nodes[p.node as usize];
        if num > n.num_ports as u32 {
            return invalid();
        }
        if n.kind != NodeKind::Switch && num == 0 {
            return Ok(at);
        }
        Ok(self.port_id(p.node, num as u8))
    }

    fn port_info_attr(&mut self, at: PortId, set: bool, attr_mod: u32, data: &[u8; 64], hide_key: bool) -> Reply {
        let target = self.select_port(at, attr_mod & 0xff)?;
        if set {
            // A CA's SMA configures only the port it was reached through
            // (ibsim does the same).
            if self.node_of(at).kind != NodeKind::Switch && target != at {
                return invalid();
            }
            let req = PortInfoRepr::parse_bytes(data).map_err(|_| status::INVALID_FIELD)?;
            self.set_port_info(target, &req, attr_mod & ATTR_MOD_SM_SUPPORTS_EXTENDED_SPEEDS != 0)?;
        }
        let mut pi = self.port(target).pi;
        pi.local_port_num = self.port(at).num;
        if hide_key {
            pi.m_key = 0;
        }
        Ok(pi.to_bytes())
    }

    /// Validates a SubnSet(PortInfo) in full, then applies it (an invalid
    /// request changes nothing).
    fn set_port_info(&mut self, target: PortId, req: &PortInfoRepr, ext_speeds: bool) -> Result<(), u16> {
        let p = self.port(target);
        let cur = p.pi;
        let kind = p.kind;
        let link = self.live_peer(target);
        // PortState (IBA 14.2.5.6 and 7.2): Down bounces the link, Armed
        // only from Init, Active only from Armed with the neighbour Armed
        // or Active. The management port 0 has no link to change.
        match req.port_state {
            PortState::NoChange | PortState::Down => {}
            PortState::Armed | PortState::Active if kind == PortKind::SwitchManagement => return invalid(),
            PortState::Armed => {
                if link.is_none() || !matches!(cur.port_state, PortState::Init | PortState::Armed) {
                    return invalid();
                }
            }
            PortState::Active => {
                let Some(peer) = link else { return invalid() };
                let peer_state = self.port(peer).pi.port_state;
                if !matches!(cur.port_state, PortState::Armed | PortState::Active)
                    || !matches!(peer_state, PortState::Armed | PortState::Active)
                {
                    return invalid();
                }
            }
            _ => return invalid(),
        }
        match req.port_physical_state {
            PhysState::NoChange => {}
            PhysState::Polling | PhysState::Disabled if kind != PortKind::SwitchManagement => {}
            _ => return invalid(),
        }
        if !matches!(
            req.link_down_default_state,
            LinkDownDefaultState::NoChange | LinkDownDefaultState::Sleep | LinkDownDefaultState::Polling
        ) {
            return invalid();
        }
        let width = match req.link_width_enabled {
            link_width::NO_CHANGE => cur.link_width_enabled,
            link_width::SET_TO_SUPPORTED => cur.link_width_supported,
            w if w & !cur.link_width_supported == 0 => w,
            _ => return invalid(),
        };
        let speed = match req.link_speed_enabled {
            link_speed::NO_CHANGE => cur.link_speed_enabled,
            link_speed::SET_TO_SUPPORTED => cur.link_speed_supported,
            s if s & !cur.link_speed_supported == 0 => s,
            _ => return invalid(),
        };
        let speed_ext = if !ext_speeds {
            cur.link_speed_ext_enabled
        } else {
            match req.link_speed_ext_enabled {
                link_speed_ext::NO_CHANGE => cur.link_speed_ext_enabled,
                link_speed_ext::DISABLE => 0,
                link_speed_ext::SET_TO_SUPPORTED => cur.link_speed_ext_supported,
                s if s & !cur.link_speed_ext_supported == 0 => s,
                _ => return invalid(),
            }
        };
        // Port 0 has no link: its NeighborMTU is fixed and a Set leaves it.
        let has_link = kind != PortKind::SwitchManagement;
        if has_link && (req.neighbor_mtu == 0 || req.neighbor_mtu > cur.mtu_cap) {
            return invalid();
        }
        if req.operational_vls > cur.vl_cap {
            return invalid();
        }

        let enhanced0 = self.node_of(target).enhanced_port0;
        let p = self.port_mut(target);
        // Addressing and protection live on end ports and switch port 0;
        // on switch external ports these fields are reserved.
        if kind != PortKind::SwitchExternal {
            p.pi.m_key = req.m_key;
            p.pi.gid_prefix = req.gid_prefix;
            p.pi.lid = req.lid;
            p.pi.master_sm_lid = req.master_sm_lid;
            p.pi.m_key_lease_period = req.m_key_lease_period;
            p.pi.m_key_protect_bits = req.m_key_protect_bits;
            p.pi.master_sm_sl = req.master_sm_sl;
            p.pi.subnet_timeout = req.subnet_timeout;
            if kind == PortKind::EndPort || enhanced0 {
                p.pi.lmc = req.lmc;
            }
            if req.client_reregister {
                p.reregistrations += 1;
            }
            // A new lease period applies from the next violation.
            p.lease_deadline = None;
        }
        p.pi.link_width_enabled = width;
        p.pi.link_speed_enabled = speed;
        p.pi.link_speed_ext_enabled = speed_ext;
        if req.link_down_default_state != LinkDownDefaultState::NoChange {
            p.pi.link_down_default_state = req.link_down_default_state;
        }
        if has_link {
            p.pi.neighbor_mtu = req.neighbor_mtu;
        }
        p.pi.vl_high_limit = req.vl_high_limit;
        p.pi.vl_stall_count = req.vl_stall_count;
        p.pi.hoq_life = req.hoq_life;
        if req.operational_vls != 0 {
            p.pi.operational_vls = req.operational_vls;
        }
        p.pi.partition_enforcement_inbound = req.partition_enforcement_inbound;
        p.pi.partition_enforcement_outbound = req.partition_enforcement_outbound;
        p.pi.filter_raw_inbound = req.filter_raw_inbound;
        p.pi.filter_raw_outbound = req.filter_raw_outbound;
        p.pi.m_key_violations = req.m_key_violations;
        p.pi.p_key_violations = req.p_key_violations;
        p.pi.q_key_violations = req.q_key_violations;
        p.pi.local_phy_errors = req.local_phy_errors;
        p.pi.overrun_errors = req.overrun_errors;

        match req.port_physical_state {
            PhysState::Disabled if cur.port_physical_state != PhysState::Disabled => {
                if let Some(peer) = self.drop_link(target, PhysState::Disabled) {
                    if link.is_some() {
                        self.port_state_changed(self.port(peer).node);
                    }
                }
                return Ok(());
            }
            PhysState::Polling if cur.port_physical_state == PhysState::Disabled => {
                self.port_mut(target).pi.port_physical_state = PhysState::Polling;
                if let Some(peer) = self.can_train(target) {
                    self.train(target, peer);
                    self.port_state_changed(self.port(peer).node);
                }
                return Ok(());
            }
            _ => {}
        }
        match (req.port_state, link) {
            // The link goes down and retrains at once (ibsim: both ends to
            // Init); the neighbour's switch notices the change, this one
            // does not (IBA 14.2.5.4: no PortStateChange for an SM's Set).
            (PortState::Down, Some(peer)) => {
                self.train(target, peer);
                self.port_state_changed(self.port(peer).node);
            }
            (PortState::Armed, _) => self.port_mut(target).pi.port_state = PortState::Armed,
            (PortState::Active, _) => self.port_mut(target).pi.port_state = PortState::Active,
            _ => {}
        }
        Ok(())
    }

    fn switch_info_attr(&mut self, at: PortId, set: bool, data: &[u8; 64]) -> Reply {
        let node = self.port(at).node;
        if set {
            let req = SwitchInfoRepr::parse_bytes(data).map_err(|_| status::INVALID_FIELD)?;
            let num_ports = self.nodes[node as usize].num_ports;
            let sw = self.switch_mut(node).ok_or(status::METHOD_ATTR_UNSUPPORTED)?;
            let i = &mut sw.info;
            if req.linear_fdb_top >= i.linear_fdb_cap
                || (req.multicast_fdb_top != 0 && req.multicast_fdb_top < 0xbfff)
                || req.default_port > num_ports
            {
                return invalid();
            }
            i.linear_fdb_top = req.linear_fdb_top;
            i.multicast_fdb_top = req.multicast_fdb_top;
            i.default_port = req.default_port;
            i.default_mcast_primary_port = req.default_mcast_primary_port;
            i.default_mcast_not_primary_port = req.default_mcast_not_primary_port;
            i.life_time_value = req.life_time_value;
            i.optimized_sl_to_vl_mapping_programming = req.optimized_sl_to_vl_mapping_programming;
            // Writing 1 clears PortStateChange (IBA 14.2.5.4).
            if req.port_state_change {
                i.port_state_change = false;
            }
        }
        let sw = self.switch_of(node).ok_or(status::METHOD_ATTR_UNSUPPORTED)?;
        Ok(sw.info.to_bytes())
    }

    fn lft_attr(&mut self, at: PortId, set: bool, block: u32, data: &[u8; 64]) -> Reply {
        let node = self.port(at).node;
        let sw = self.switch_mut(node).ok_or(status::METHOD_ATTR_UNSUPPORTED)?;
        let first = block as usize * 64;
        if first + 64 > sw.info.linear_fdb_cap as usize {
            return invalid();
        }
        if set {
            let req = LftBlockRepr::parse_bytes(data).map_err(|_| status::INVALID_FIELD)?;
            if sw.lft.len() < first + 64 {
                sw.lft.resize(first + 64, 0xff);
            }
            sw.lft[first..first + 64].copy_from_slice(&req.ports);
        }
        let mut ports = [0xffu8; 64];
        if let Some(have) = sw.lft.get(first..) {
            let n = have.len().min(64);
            ports[..n].copy_from_slice(&have[..n]);
        }
        if let Some(log) = self.lft_log.as_mut().filter(|_| set) {
            log.push((NodeIdx(node as usize), block, ports));
        }
        Ok(LftBlockRepr { ports }.to_bytes())
    }

    /// MulticastForwardingTable (IBA 14.2.5.12): AttributeModifier bits
    /// 31-28 pick the 16-port position, bits 8-0 the block of 32 MLIDs.
    /// Out-of-range values get 0x001C (ibsim returns a zero block instead).
    fn mft_attr(&mut self, at: PortId, set: bool, attr_mod: u32, data: &[u8; 64]) -> Reply {
        let node = self.port(at).node;
        let num_ports = self.nodes[node as usize].num_ports as usize;
        let positions = num_ports / MFT_POSITION_PORTS + 1;
        let sw = self.switch_mut(node).ok_or(status::METHOD_ATTR_UNSUPPORTED)?;
        let position = (attr_mod >> 28) as usize;
        let block = (attr_mod & 0x1ff) as usize;
        let cap = sw.info.multicast_fdb_cap as usize;
        if position >= positions || (block + 1) * MFT_BLOCK_ENTRIES > cap {
            return invalid();
        }
        let base = position * cap + block * MFT_BLOCK_ENTRIES;
        if set {
            if sw.mft.is_empty() {
                sw.mft = vec![0; positions * cap];
            }
            for i in 0..MFT_BLOCK_ENTRIES {
                sw.mft[base + i] = u16::from_be_bytes([data[2 * i], data[2 * i + 1]]);
            }
        }
        let mut out = [0u8; 64];
        if !sw.mft.is_empty() {
            for i in 0..MFT_BLOCK_ENTRIES {
                out[2 * i..2 * i + 2].copy_from_slice(&sw.mft[base + i].to_be_bytes());
            }
        }
        Ok(out)
    }

    /// P_Key entries of a port: NodeInfo.PartitionCap for end ports and a
    /// switch's port 0, SwitchInfo.PartitionEnforcementCap for external
    /// switch ports (IBA 14.2.5.7).
    pub(crate) fn pkey_cap(&self, id: PortId) -> usize {
        let p = self.port(id);
        match p.kind {
            PortKind::EndPort => profile::CA_PARTITION_CAP as usize,
            PortKind::SwitchManagement => profile::SWITCH_PARTITION_CAP as usize,
            PortKind::SwitchExternal => self.switch_of(p.node).map_or(0, |s| s.info.partition_enforcement_cap as usize),
            PortKind::Absent => 0,
        }
    }

    pub(crate) fn pkey_table(&self, id: PortId) -> Vec<u16> {
        match &self.port(id).tables {
            Some(t) => t.pkeys.clone(),
            None => PortTables::new(self.pkey_cap(id), 0).pkeys,
        }
    }

    fn tables_mut(&mut self, id: PortId) -> &mut PortTables {
        let pkey_cap = self.pkey_cap(id);
        let guid_cap = self.port(id).pi.guid_cap as usize;
        self.port_mut(id).tables.get_or_insert_with(|| Box::new(PortTables::new(pkey_cap, guid_cap)))
    }

    fn pkey_attr(&mut self, at: PortId, set: bool, attr_mod: u32, data: &[u8; 64]) -> Reply {
        let (block, port) = pkey_table::split_attribute_modifier(attr_mod);
        let target = if self.node_of(at).kind == NodeKind::Switch { self.select_port(at, port as u32)? } else { at };
        let cap = self.pkey_cap(target);
        let first = block as usize * PKEY_BLOCK_ENTRIES;
        if first >= cap {
            return invalid();
        }
        let n = (cap - first).min(PKEY_BLOCK_ENTRIES);
        if set {
            let t = self.tables_mut(target);
            for i in 0..n {
                t.pkeys[first + i] = u16::from_be_bytes([data[2 * i], data[2 * i + 1]]);
            }
        }
        let table = self.pkey_table(target);
        let mut out = [0u8; 64];
        for i in 0..n {
            out[2 * i..2 * i + 2].copy_from_slice(&table[first + i].to_be_bytes());
        }
        Ok(out)
    }

    /// SLtoVLMappingTable (IBA 14.2.5.8): on a switch AttributeModifier
    /// bits 15-8 are the input port and 7-0 the output port; an end port
    /// has one table. 16 SLs, 4 bits each.
    fn sl2vl_attr(&mut self, at: PortId, set: bool, attr_mod: u32, data: &[u8; 64]) -> Reply {
        let node = self.port(at).node;
        let mut out = [0u8; 64];
        if self.nodes[node as usize].kind == NodeKind::Switch {
            let n = self.nodes[node as usize].num_ports as usize + 1;
            let (input, output) = (((attr_mod >> 8) & 0xff) as usize, (attr_mod & 0xff) as usize);
            if input >= n || output >= n {
                return invalid();
            }
            let sw = self.switch_mut(node).ok_or(status::METHOD_ATTR_UNSUPPORTED)?;
            if set {
                if sw.sl2vl.is_empty() {
                    sw.sl2vl = vec![profile::DEFAULT_SL2VL; n * n];
                }
                sw.sl2vl[input * n + output].copy_from_slice(&data[..8]);
            }
            let t = sw.sl2vl.get(input * n + output).copied().unwrap_or(profile::DEFAULT_SL2VL);
            out[..8].copy_from_slice(&t);
        } else {
            if set {
                self.tables_mut(at).sl2vl.copy_from_slice(&data[..8]);
            }
            let t = self.port(at).tables.as_ref().map_or(profile::DEFAULT_SL2VL, |t| t.sl2vl);
            out[..8].copy_from_slice(&t);
        }
        Ok(out)
    }

    /// VLArbitrationTable (IBA 14.2.5.9): AttributeModifier bits 31-16 are
    /// the block (1, 2 low priority; 3, 4 high priority, 32 entries each),
    /// bits 15-0 the port on a switch. Entries are (VL, weight) byte pairs.
    fn vlarb_attr(&mut self, at: PortId, set: bool, attr_mod: u32, data: &[u8; 64]) -> Reply {
        let target =
            if self.node_of(at).kind == NodeKind::Switch { self.select_port(at, attr_mod & 0xffff)? } else { at };
        let block = attr_mod >> 16;
        let pi = self.port(target).pi;
        let (high, cap) = match block {
            1 | 2 => (false, pi.vl_arbitration_low_cap as usize),
            3 | 4 => (true, pi.vl_arbitration_high_cap as usize),
            _ => return invalid(),
        };
        // Blocks 2 and 4 hold entries 32-63, present only if the cap says so.
        let first = if matches!(block, 2 | 4) { 32 } else { 0 };
        if cap <= first {
            return invalid();
        }
        let n = (cap - first).min(32).min(profile::VLARB_CAP as usize);
        if set {
            let t = self.tables_mut(target);
            let table = if high { &mut t.vlarb_high } else { &mut t.vlarb_low };
            for (i, e) in table.iter_mut().enumerate().take(n) {
                *e = [data[2 * i] & 0x0f, data[2 * i + 1]];
            }
        }
        let table = match &self.port(target).tables {
            Some(t) if high => t.vlarb_high,
            Some(t) => t.vlarb_low,
            None if high => profile::DEFAULT_VLARB_HIGH,
            None => profile::DEFAULT_VLARB_LOW,
        };
        let mut out = [0u8; 64];
        for (i, e) in table.iter().enumerate().take(n) {
            out[2 * i..2 * i + 2].copy_from_slice(e);
        }
        Ok(out)
    }

    /// GUIDInfo (IBA 14.2.5.5): AttributeModifier is the block of 8 GUIDs;
    /// entry 0 is the port GUID and cannot be set. A switch has one table,
    /// on port 0.
    fn guid_info_attr(&mut self, at: PortId, set: bool, block: u32, data: &[u8; 64]) -> Reply {
        let target = self.mgmt_port(at);
        let cap = self.port(target).pi.guid_cap as usize;
        let first = block as usize * GUIDS_PER_BLOCK;
        if first >= cap {
            return invalid();
        }
        let n = (cap - first).min(GUIDS_PER_BLOCK);
        if set {
            let t = self.tables_mut(target);
            for i in 0..n {
                let idx = first + i;
                if idx == 0 {
                    continue;
                }
                let mut g = [0u8; 8];
                g.copy_from_slice(&data[8 * i..8 * i + 8]);
                if let Some(slot) = t.alias_guids.get_mut(idx - 1) {
                    *slot = u64::from_be_bytes(g);
                }
            }
        }
        let p = self.port(target);
        let mut out = [0u8; 64];
        for i in 0..n {
            let idx = first + i;
            let g = if idx == 0 {
                p.guid.0
            } else {
                p.tables.as_ref().and_then(|t| t.alias_guids.get(idx - 1).copied()).unwrap_or(0)
            };
            out[8 * i..8 * i + 8].copy_from_slice(&g.to_be_bytes());
        }
        Ok(out)
    }
}
