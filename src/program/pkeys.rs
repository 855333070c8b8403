//! P_Key tables (IBA 10.9; the P_KeyTable attribute is IBA 14.2.5.7) and
//! partition enforcement on the switch ports facing end ports (PortInfo
//! PartitionEnforcementInbound/Outbound, IBA 14.2.5.6; OpenSM's
//! `part_enforce`).
//!
//! # End ports
//! Every managed end port (CA and router ports, switch port 0) gets the
//! keys its partitions give it (`Plan::partitions`, by port GUID; a port
//! the set does not name is in no partition and its table is emptied).
//! [`crate::partition::table`] decides where each key goes, keeping the
//! indexes the port's QPs use, and only the 32-entry blocks that change are
//! sent. A port that is a member of more keys than NodeInfo.PartitionCap
//! gets the first ones and a [`Problem::PKeyTableFull`].
//!
//! Without partitions (`Plan::partitions` is `None`) an end port keeps what
//! it holds and gets the default P_Key, full member, where it lacks it (a
//! limited default entry is upgraded in place): what ibsm did before it
//! knew partitions, so a fabric without a partitions file loses no key
//! another SM or tool put there. A table with no room for it is left as it
//! is ([`Problem::DefaultPKeyMissing`]).
//!
//! # Switch ports (enforcement)
//! With `part_enforce` other than `off`, the switch port facing each CA or
//! router port gets the keys that port holds (planned on the switch port's
//! own table, so its entries move as little as the end port's) and the
//! enforcement bits `part_enforce` names; they ride in the PortInfo Set the
//! port gets anyway ([`super::sets`]). A switch port that cannot hold the
//! keys (SwitchInfo.PartitionEnforcementCap) gets enforcement off and a
//! [`Problem::EnforcementCapTooSmall`]; so does, silently, one whose table
//! or end port could not be read (enforcing with a table nobody checked
//! would drop traffic), and one on a switch with no enforcement table at
//! all (cap 0). Inter-switch ports always get enforcement off, as do all
//! switch ports with `part_enforce = off`, whose tables are then never
//! read or written.
//!
//! # What is read
//! Every block of those tables (the port's cap rounded up to whole blocks;
//! an end port that reports PartitionCap 0 is taken to hold one block),
//! except the blocks the memo ([`PKeyMemos`], in `LftCache`) knows: what
//! the port answered this SM's last Set or read of it, and except the
//! switch ports of a cold switch (LinearFDBTop 0: reset since any SM
//! programmed it), whose tables are written unread: block 0, and the other
//! blocks that hold a key (a reset leaves the entries past index 0
//! invalid). A later sweep reads
//! only what is new (ports found INIT or DOWN have their memos forgotten
//! first: a rebooted host comes back with a fresh table); a takeover clears
//! the memo and reads everything.

use std::collections::{HashMap, HashSet};

use crate::mad::pkey_table::{attribute_modifier, DEFAULT_PKEY, DEFAULT_PKEY_LIMITED, PKEY_BLOCK_ENTRIES};
use crate::mad::{AttributeId, DrPath, PKeyTableBlockRepr, PortState, SmpAttribute};
use crate::partition::table::{block_of, changed_blocks, plan_keys, plan_table, table_len, TableError};
use crate::partition::{PartEnforce, PartitionSet};
use crate::subnet::{NodeId, Problem, Subnet, SweepProblem};
use crate::sweep::core::SmpDriver;
use crate::types::Guid;

use super::reads::read_all;
use crate::subnet::ProgramReport;

/// One P_Key block of one port, as the SM last saw it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PKeyMemo {
    /// What the port answered (a Set's GetResp, or a read).
    pub held: PKeyTableBlockRepr,
    /// What the SM asked it to hold (after a read: what it held). A device
    /// that keeps less than asked is not asked the same again.
    pub wanted: PKeyTableBlockRepr,
}

/// The memos, by node GUID, port number and block.
pub type PKeyMemos = HashMap<(Guid, u8, u16), PKeyMemo>;

/// PartitionEnforcementInbound/Outbound as the SM wants them on one port.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Enforcement {
    pub inbound: bool,
    pub outbound: bool,
}

impl Enforcement {
    pub const OFF: Enforcement = Enforcement { inbound: false, outbound: false };

    fn of(e: PartEnforce) -> Enforcement {
        Enforcement { inbound: e.inbound(), outbound: e.outbound() }
    }
}

/// One P_KeyTable block Set to send.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PKeySet {
    pub node: NodeId,
    pub port: u8,
    pub block: u16,
    pub path: DrPath,
    pub amod: u32,
    pub want: PKeyTableBlockRepr,
}

/// What [`prepare`] decided.
#[derive(Debug, Clone, Default)]
pub struct PKeyWork {
    /// The blocks to write.
    pub sets: Vec<PKeySet>,
    /// The enforcement bits of switch external ports (cabled ones); ports
    /// absent keep what they hold.
    pub enforcement: HashMap<(NodeId, u8), Enforcement>,
    /// Every port whose table was planned: node GUID, port, blocks.
    pub ports: Vec<(Guid, u8, u16)>,
    /// Blocks of cold switches' tables taken as the reset left them
    /// (empty) without a read: remembered as held.
    pub assumed: Vec<((Guid, u8, u16), PKeyTableBlockRepr)>,
}

/// One port table the SM reads and may write.
#[derive(Debug, Clone, Copy)]
struct PortTable {
    node: NodeId,
    port: u8,
    node_guid: Guid,
    port_guid: Guid,
    path: DrPath,
    /// The port number in the AttributeModifier: the port itself on a
    /// switch, 0 on a CA or router (the port the SMP arrives on).
    amod_port: u8,
    /// Entries.
    cap: usize,
}

impl PortTable {
    fn blocks(&self) -> u16 {
        (table_len(self.cap) / PKEY_BLOCK_ENTRIES) as u16
    }
    fn amod(&self, block: u16) -> u32 {
        attribute_modifier(block, self.amod_port)
    }
}

/// A switch external port facing an end port.
#[derive(Debug, Clone, Copy)]
struct Facing {
    table: PortTable,
    end: (NodeId, u8),
    /// On a cold switch: its table is written whole, never read.
    cold: bool,
}

/// Reads what is not known and plans every table: the Sets to send and
/// the enforcement bits for the PortInfo Sets. Call with the subnet as
/// discovered (port states before programming).
pub(super) async fn prepare<D: SmpDriver>(
    driver: &D,
    subnet: &mut Subnet,
    partitions: Option<&PartitionSet>,
    enforce: PartEnforce,
    report: &mut ProgramReport,
    memos: &mut PKeyMemos,
) -> PKeyWork {
    forget_reset_ports(subnet, memos);
    let ends = end_ports(subnet);
    let (facing, enforcement) = switch_ports(subnet, enforce);
    // A cold switch's tables are written whole: reading them first would
    // cost as many SMPs again for nothing (a cold bring-up of a fat tree
    // reads more switch ports than it has hosts).
    let tables: Vec<PortTable> =
        ends.iter().copied().chain(facing.iter().filter(|f| !f.cold).map(|f| f.table)).collect();
    read_unknown(driver, subnet, &tables, report, memos).await;
    let mut work = PKeyWork { enforcement, ..PKeyWork::default() };
    plan(subnet, &ends, &facing, partitions, enforce, memos, &mut work);
    for &(key, held) in &work.assumed {
        memos.insert(key, PKeyMemo { held, wanted: held });
    }
    work
}

/// The pure half of [`prepare`]: plans from the memos.
fn plan(
    subnet: &mut Subnet,
    ends: &[PortTable],
    facing: &[Facing],
    partitions: Option<&PartitionSet>,
    enforce: PartEnforce,
    memos: &PKeyMemos,
    work: &mut PKeyWork,
) {
    // The keys each end port holds once programmed, by index.
    let mut keys_of: HashMap<(NodeId, u8), Vec<u16>> = HashMap::new();
    for t in ends {
        let Some(held) = held_table(memos, t) else { continue };
        let new = match partitions {
            Some(set) => {
                let wanted = set.ports.get(&t.port_guid).cloned().unwrap_or_default();
                match plan_table(&held, &wanted, t.cap) {
                    Ok(p) => p.table,
                    Err(TableError::TooMany { wanted, cap, plan }) => {
                        let what = Problem::PKeyTableFull { port: t.port, port_guid: t.port_guid, cap, wanted };
                        subnet.problems.push(SweepProblem { path: t.path, guid: Some(t.node_guid), what });
                        plan.table
                    }
                }
            }
            None => with_default_pkey(&held, t.cap).unwrap_or_else(|| {
                let what = Problem::DefaultPKeyMissing { port: t.port };
                subnet.problems.push(SweepProblem { path: t.path, guid: Some(t.node_guid), what });
                held.clone()
            }),
        };
        push_sets(work, memos, t, &held, &new);
        keys_of.insert((t.node, t.port), new.iter().copied().filter(|&k| is_key(k)).collect());
    }
    for f in facing {
        let t = &f.table;
        // Known, or on a cold switch: unknown, and every block is written.
        let held = match held_table(memos, t) {
            Some(held) => Some((held, false)),
            None if f.cold => Some((vec![0; table_len(t.cap)], true)),
            None => None,
        };
        let decision = match (keys_of.get(&f.end), held) {
            (Some(keys), Some((held, whole))) => match plan_keys(&held, keys, None, t.cap) {
                Ok(p) if whole => {
                    push_whole(work, t, &p.table);
                    Enforcement::of(enforce)
                }
                Ok(p) => {
                    push_sets(work, memos, t, &held, &p.table);
                    Enforcement::of(enforce)
                }
                Err(TableError::TooMany { wanted, cap, .. }) => {
                    let end = subnet.node(f.end.0).port_guid(f.end.1);
                    let what = Problem::EnforcementCapTooSmall { port: t.port, cap, needed: wanted, end_port: end };
                    subnet.problems.push(SweepProblem { path: t.path, guid: Some(t.node_guid), what });
                    Enforcement::OFF
                }
            },
            // Unknown table or end port: enforcing could drop traffic.
            _ => Enforcement::OFF,
        };
        work.enforcement.insert((t.node, t.port), decision);
    }
}

/// The Sets for the blocks of `t` in which `new` differs from `held`,
/// except those the port answered our last Set of with `held` (it keeps
/// less than asked: asking again changes nothing).
fn push_sets(work: &mut PKeyWork, memos: &PKeyMemos, t: &PortTable, held: &[u16], new: &[u16]) {
    work.ports.push((t.node_guid, t.port, t.blocks()));
    for block in changed_blocks(held, new) {
        let want = PKeyTableBlockRepr { pkeys: block_of(new, block) };
        if memos.get(&(t.node_guid, t.port, block)).is_some_and(|m| m.wanted == want) {
            continue;
        }
        work.sets.push(PKeySet { node: t.node, port: t.port, block, path: t.path, amod: t.amod(block), want });
    }
}

/// The Sets that make `t`, a table on a cold switch nobody read, hold
/// `new`: block 0 always (what a reset leaves at index 0 differs between
/// devices), and every other block that holds a key. A reset leaves the
/// entries past index 0 invalid, so an empty block is already right; a
/// switch whose LinearFDBTop says it was programmed since is read first.
fn push_whole(work: &mut PKeyWork, t: &PortTable, new: &[u16]) {
    work.ports.push((t.node_guid, t.port, t.blocks()));
    for block in 0..t.blocks() {
        let want = PKeyTableBlockRepr { pkeys: block_of(new, block) };
        if block > 0 && !want.pkeys.iter().any(|&k| is_key(k)) {
            work.assumed.push(((t.node_guid, t.port, block), want));
            continue;
        }
        work.sets.push(PKeySet { node: t.node, port: t.port, block, path: t.path, amod: t.amod(block), want });
    }
}

/// Managed end ports with a known PortInfo: cabled CA and router ports,
/// and switch port 0.
fn end_ports(subnet: &Subnet) -> Vec<PortTable> {
    let mut out = Vec::new();
    for id in subnet.ids() {
        let node = subnet.node(id);
        if node.quarantined.is_some() {
            continue;
        }
        let has_info = |p: u8| node.ports.get(usize::from(p)).is_some_and(|s| s.info.is_some());
        // One block at least: a device claiming none still has block 0.
        let cap = match usize::from(node.info.partition_cap) {
            0 => PKEY_BLOCK_ENTRIES,
            n => n,
        };
        let table = |port: u8| PortTable {
            node: id,
            port,
            node_guid: node.guid(),
            port_guid: node.port_guid(port),
            path: node.path_for_port(port),
            amod_port: 0,
            cap,
        };
        if node.is_switch() {
            if has_info(0) {
                out.push(table(0));
            }
            continue;
        }
        for port in node.external_ports() {
            if has_info(port) && node.ports[usize::from(port)].remote.is_some() {
                out.push(table(port));
            }
        }
    }
    out
}

/// Switch external ports facing managed end ports, whose tables enforce
/// partitions; and the enforcement bits of every other cabled switch port
/// (off). With `part_enforce = off`, none faces anything.
fn switch_ports(subnet: &Subnet, enforce: PartEnforce) -> (Vec<Facing>, HashMap<(NodeId, u8), Enforcement>) {
    let mut facing = Vec::new();
    let mut bits = HashMap::new();
    for id in subnet.switches() {
        let node = subnet.node(id);
        if node.quarantined.is_some() {
            continue;
        }
        let cap = node.switch_info.as_ref().map_or(0, |s| usize::from(s.partition_enforcement_cap));
        for port in node.external_ports() {
            let Some((far, far_port)) = node.ports[usize::from(port)].remote else { continue };
            let far_node = subnet.node(far);
            let end_port = !far_node.is_switch()
                && far_node.quarantined.is_none()
                && far_node.ports.get(usize::from(far_port)).is_some_and(|p| p.info.is_some());
            if enforce == PartEnforce::Off || !end_port || cap == 0 {
                bits.insert((id, port), Enforcement::OFF);
                continue;
            }
            let table = PortTable {
                node: id,
                port,
                node_guid: node.guid(),
                port_guid: node.port_guid(port),
                path: node.path,
                amod_port: port,
                cap,
            };
            facing.push(Facing { table, end: (far, far_port), cold: node.is_cold_switch() });
        }
    }
    (facing, bits)
}

/// Reads the blocks of `tables` the memo does not know and remembers them
/// as held (and wanted). A block that could not be read stays unknown: its
/// port is left alone this sweep.
async fn read_unknown<D: SmpDriver>(
    driver: &D,
    subnet: &mut Subnet,
    tables: &[PortTable],
    report: &mut ProgramReport,
    memos: &mut PKeyMemos,
) {
    let reads: Vec<(PortTable, u16)> = tables
        .iter()
        .flat_map(|t| (0..t.blocks()).map(move |b| (*t, b)))
        .filter(|(t, b)| !memos.contains_key(&(t.node_guid, t.port, *b)))
        .collect();
    report.pkey_reads += reads.len();
    let gets = reads.into_iter().map(|(t, b)| ((t, b), t.path, AttributeId::PKeyTable, t.amod(b)));
    read_all(driver, gets, |(t, block), path, result| {
        match result
            .map_err(|e| e.to_string())
            .and_then(|d| PKeyTableBlockRepr::parse_data(&d).map_err(|e| e.to_string()))
        {
            Ok(held) => {
                memos.insert((t.node_guid, t.port, block), PKeyMemo { held, wanted: held });
            }
            Err(e) => {
                report.failures += 1;
                let what = Problem::ReadFailed {
                    attr: AttributeId::PKeyTable,
                    amod: t.amod(block),
                    error: format!("port {}: {e}", t.port),
                };
                subnet.problems.push(SweepProblem { path, guid: Some(t.node_guid), what });
            }
        }
    })
    .await;
}

/// `t`'s whole table from the memos, or `None` when a block is unknown.
fn held_table(memos: &PKeyMemos, t: &PortTable) -> Option<Vec<u16>> {
    let mut out = Vec::with_capacity(table_len(t.cap));
    for block in 0..t.blocks() {
        out.extend_from_slice(&memos.get(&(t.node_guid, t.port, block))?.held.pkeys);
    }
    Some(out)
}

/// Without partitions: `held` (its first `cap` entries) with the
/// full-member default P_Key added where it lacks it, in the entry of a
/// limited default key (upgraded in place), else the first empty one;
/// every other entry as it is (repeats too: they are not the SM's). `None`
/// when there is no room.
pub fn with_default_pkey(held: &[u16], cap: usize) -> Option<Vec<u16>> {
    let mut table = held[..held.len().min(cap)].to_vec();
    if !table.contains(&DEFAULT_PKEY) {
        let slot = table
            .iter()
            .position(|&k| k == DEFAULT_PKEY_LIMITED)
            .or_else(|| table.iter().position(|&k| !is_key(k)))
            .or_else(|| (table.len() < cap).then_some(table.len()))?;
        table.resize(table.len().max(slot + 1), 0);
        table[slot] = DEFAULT_PKEY;
    }
    table.resize(table_len(cap), 0);
    Some(table)
}

/// Forgets the memos of ports gone from `subnet` (or quarantined) and of
/// ports found in INIT or DOWN: the link came up anew and the table may
/// have been reset with it (a rebooted host). A switch's port 0 has no
/// link: its memo goes when none of the switch's cabled ports is up (the
/// switch restarted).
pub fn forget_reset_ports(subnet: &Subnet, memos: &mut PKeyMemos) {
    if memos.is_empty() {
        return;
    }
    let up = |s: Option<PortState>| matches!(s, Some(PortState::Armed | PortState::Active));
    let mut kept: HashSet<(Guid, u8)> = HashSet::new();
    for id in subnet.ids() {
        let node = subnet.node(id);
        if node.quarantined.is_some() {
            continue;
        }
        let mut any_up = false;
        for port in node.external_ports() {
            let slot = &node.ports[usize::from(port)];
            if slot.remote.is_some() && up(slot.info.as_ref().map(|i| i.port_state)) {
                any_up = true;
                kept.insert((node.guid(), port));
            }
        }
        if node.is_switch() && any_up {
            kept.insert((node.guid(), 0));
        }
    }
    memos.retain(|&(guid, port, _), _| kept.contains(&(guid, port)));
}

/// The tables of `ports` as the memos hold them, block by block: what the
/// SA's P_KeyTableRecords answer from. Ports with a block unknown (a Set
/// that failed) are absent.
pub fn held_blocks(memos: &PKeyMemos, ports: &[(Guid, u8, u16)]) -> HashMap<(Guid, u8), Vec<PKeyTableBlockRepr>> {
    ports
        .iter()
        .filter_map(|&(guid, port, blocks)| {
            let table: Option<Vec<_>> = (0..blocks).map(|b| memos.get(&(guid, port, b)).map(|m| m.held)).collect();
            Some(((guid, port), table?))
        })
        .collect()
}

/// What the port answered a Set of `block` with (`answer`, `None` when it
/// did not parse: then what was asked is assumed held).
pub(super) fn remember_set(memos: &mut PKeyMemos, key: (Guid, u8, u16), asked: &[u8; 64], answer: &[u8; 64]) {
    let Ok(wanted) = PKeyTableBlockRepr::parse_data(asked) else { return };
    let held = PKeyTableBlockRepr::parse_data(answer).unwrap_or(wanted);
    memos.insert(key, PKeyMemo { held, wanted });
}

fn is_key(k: u16) -> bool {
    crate::mad::pkey_table::is_valid(k)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(keys: &[(usize, u16)]) -> Vec<u16> {
        let mut b = vec![0; 32];
        for &(i, k) in keys {
            b[i] = k;
        }
        b
    }

    #[test]
    fn default_pkey_is_added_without_moving_others() {
        assert_eq!(
            with_default_pkey(&block(&[(0, 0xffff), (3, 0x8001)]), 32),
            Some(block(&[(0, 0xffff), (3, 0x8001)]))
        );
        // A limited default entry is upgraded in place.
        assert_eq!(
            with_default_pkey(&block(&[(0, 0x8001), (2, 0x7fff)]), 32),
            Some(block(&[(0, 0x8001), (2, 0xffff)]))
        );
        // Otherwise the first empty entry (0x8000 is empty).
        assert_eq!(
            with_default_pkey(&block(&[(0, 0x8001), (1, 0x8000), (5, 0x0002)]), 32),
            Some(block(&[(0, 0x8001), (1, 0xffff), (5, 0x0002)]))
        );
        // No room: nothing; repeats are not the SM's to clear.
        assert_eq!(with_default_pkey(&[0x8002; 32], 32), None);
        // A short read: the entries past it are empty.
        assert_eq!(
            with_default_pkey(&[0x8002; 3], 32),
            Some(block(&[(0, 0x8002), (1, 0x8002), (2, 0x8002), (3, 0xffff)]))
        );
        // Entries past the cap do not count.
        assert_eq!(with_default_pkey(&[0x8002, 0xffff], 1), None);
        // Keys in block 1 stay too.
        let mut two = block(&[(0, 0x8001)]);
        two.extend(block(&[(4, 0x8009)]));
        let got = with_default_pkey(&two, 64).unwrap();
        assert_eq!((got[0], got[1], got[36]), (0x8001, 0xffff, 0x8009));
        assert_eq!(changed_blocks(&two, &got), vec![0]);
    }

    #[test]
    fn held_blocks_need_every_block() {
        let mut memos = PKeyMemos::new();
        let b = PKeyTableBlockRepr { pkeys: [0xffff; 32] };
        memos.insert((Guid(1), 1, 0), PKeyMemo { held: b, wanted: b });
        memos.insert((Guid(1), 1, 1), PKeyMemo { held: b, wanted: b });
        memos.insert((Guid(2), 1, 0), PKeyMemo { held: b, wanted: b });
        let got = held_blocks(&memos, &[(Guid(1), 1, 2), (Guid(2), 1, 2)]);
        assert_eq!(got.len(), 1);
        assert_eq!(got[&(Guid(1), 1)], vec![b, b]);
    }

    #[test]
    fn a_set_answered_with_less_is_remembered_as_held() {
        let mut memos = PKeyMemos::new();
        let asked = PKeyTableBlockRepr { pkeys: [0x8001; 32] };
        let answer = PKeyTableBlockRepr::default();
        remember_set(&mut memos, (Guid(1), 2, 0), &asked.to_data(), &answer.to_data());
        assert_eq!(memos[&(Guid(1), 2, 0)], PKeyMemo { held: answer, wanted: asked });
    }
}
