//! PathRecords (IBA 15.2.5.16) and MultiPathRecords (15.2.5.20) from one
//! sweep: pure functions over a [`PathIndex`], no I/O.
//!
//! # What a record says
//! Every record describes the route the SM actually programmed, walked
//! switch by switch through the forwarding tables from the SLID's port to
//! the DLID ([`PathIndex::route`]):
//! - MTU: the smallest of every port on the way (each end of every link
//!   crossed, MTUCap and the NeighborMTU the SM set, and MTUCap of a
//!   switch's port 0 when the path starts or ends there);
//! - Rate: the slowest link crossed ([`rate`]: every generation SDR..XDR,
//!   widths 1x..12x and 2x), then lowered to a code both ends know when
//!   they do not declare the generation that brought it (OpenSM does the
//!   same, `ib_path_rate_2x_hdr_fixups`);
//! - SL: the routing engine's path SL for traffic entering the fabric at
//!   the source's switch (`SweptRoutes::path_sl`), 0 for engines without;
//! - PacketLifeTime: [`PathConfig::packet_life_time`] (the subnet timeout,
//!   as OpenSM), 0 for a loopback path (IBA Table 209's PacketLifeTime);
//! - Reversible: the tables also route DLID back to SLID. A reversible
//!   record serves both directions (the two ends of a connection use one
//!   path), so its MTU and rate are the smaller of the two routes' when
//!   they differ (OpenSM gives the forward route's);
//! - P_Key: a masked one must be shared by both ends (both hold its
//!   partition, one as a full member) and is answered as asked; otherwise
//!   the source's key of the lowest partition both share (as OpenSM's
//!   `osm_physp_find_common_pkey`; its full-member key when it holds
//!   both), which is the default 0xFFFF until partitions are configured.
//!   Tables are every block as the sweep left them
//!   (`ProgramReport::pkey_blocks`); a port whose table the sweep does not
//!   know holds the default P_Key. No shared P_Key: no record.
//! - An untrusted requester ([`PathConfig::requester_must_share`]) gets
//!   only paths whose both ends share a partition with its own port (as
//!   OpenSM: requester, source and destination pairwise); a trusted one
//!   (SM_Key = the SA key) any path.
//! - Selectors for MTU, Rate and PacketLifeTime: 0 greater than, 1 less than
//!   (the value is lowered to the largest one below the bound, as a path
//!   carries anything smaller), 2 exactly (the path must carry at least the
//!   value; the record says the value), 3 the largest available (for
//!   PacketLifeTime the smallest, which is the one the SA has). A value
//!   masked without its selector is read as "exactly"; a selector without
//!   its value is ignored (as OpenSM). An unsatisfiable selector, a masked
//!   SL other than the route's, a masked Preference other than the
//!   record's, or Reversible = 1 on a one-way path: no record.
//! - ServiceID, FlowLabel, HopLimit, TClass, QoSClass and RawTraffic are
//!   the requester's to choose on a local subnet: masked ones are answered
//!   as asked, others are 0. Selectors say 2 (exactly), NumbPath 0.
//!
//! The records are the answer: the caller must not filter them again with
//! the component matcher (selectors and NumbPath are instructions, not
//! fields to compare).
//!
//! # Which paths
//! The source is the port of SGID or SLID (both must name the same port),
//! else the requester's own (the port owning the request's SLID); the
//! destination the port of DGID or DLID, else every port of the subnet,
//! the source included (a GetTable "from me to all"). OpenSM differs when
//! a side is missing: it answers every source (or every pair). A GID names
//! a port by its port GUID or by one of its alias GUIDs (additional port
//! GUIDs handed out through GUIDInfoRecord, IBA 15.2.5.18; the record then
//! carries the GID as asked). An SGID or DGID no port has, or with another
//! subnet prefix than the port's (the link-local fe80::/64 always
//! accepted): ERR_REQ_INVALID_GID. (OpenSM also answers a query without a
//! destination with one record per alias GID of every port; here each
//! port once, by its port GID.) A LID no
//! port has: no records. A multicast DGID: no records here (multicast
//! PathRecords are the multicast issue's).
//!
//! Between two ports with LMC > 0 each (SLID, DLID) pair is its own route.
//! The pairs come in OpenSM's order: first SLID+i with DLID+i for every i
//! both ranges have (Preference 0: the most independent), then the others
//! (Preference 2). A masked SLID or DLID keeps only that one. A masked
//! NumbPath takes the first NumbPath of them per port pair (0: none); a
//! SubnAdmGet takes one per pair ([`path_record_get`], the IBA 1.2
//! erratum OpenSM follows). A pair whose route is broken (table entry
//! 0xFF, a loop, a link down) gives no record.

mod index;
mod multipath;
pub mod rate;

#[cfg(test)]
mod tests;

pub use index::{Broken, EndPort, PathIndex, Route, MAX_HOPS};
pub use multipath::multipath_records;

use crate::mad::sa::{path_mask as pm, sa_status, unknown_components, PathRecordRepr, SaRecord};
use crate::types::Lid;

/// The SA's choices for path records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PathConfig {
    /// PacketLifeTime of every path but loopback ones, 4.096 µs × 2^n
    /// (OpenSM answers its `subnet_timeout`, default 18).
    pub packet_life_time: u8,
    /// Most records one query may build; a query that would build more is
    /// refused with ERR_NO_RESOURCES before it does (default: what 16 MiB
    /// of 64-byte records hold).
    pub max_records: usize,
    /// Only paths between ports that share a partition with the
    /// requester's port (an untrusted requester); a requester whose LID
    /// names no port then gets none. Default off.
    pub requester_must_share: bool,
}

impl Default for PathConfig {
    fn default() -> Self {
        PathConfig { packet_life_time: 18, max_records: (16 << 20) / 64, requester_must_share: false }
    }
}

impl PathConfig {
    /// The SA's `[sa]` settings: its subnet timeout, and as many records
    /// as its largest answer holds.
    pub fn from_sa(sa: &super::SaConfig) -> Self {
        PathConfig {
            packet_life_time: sa.subnet_timeout,
            max_records: sa.max_answer_bytes / crate::mad::sa::PATH_RECORD_LEN,
            requester_must_share: false,
        }
    }
}

/// A PathRecord selector (IBA 15.2.5.16) bound to its value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Bound {
    selector: u8,
    value: u8,
}

impl Bound {
    /// The value to report for a path carrying `have`, None when the path
    /// cannot satisfy the bound. `gt` orders values, `below` gives the
    /// largest value under one.
    fn apply(self, have: u8, gt: impl Fn(u8, u8) -> bool, below: impl Fn(u8) -> Option<u8>) -> Option<u8> {
        match self.selector {
            0 => gt(have, self.value).then_some(have),
            1 if gt(self.value, have) => Some(have),
            1 => below(self.value),
            2 => (!gt(self.value, have)).then_some(self.value),
            _ => Some(have),
        }
    }
}

/// What a query asks of every path, read once from its masked fields.
#[derive(Debug, Clone, Default)]
pub(crate) struct Constraints {
    /// Fields the requester chooses, answered as asked (0 unless masked).
    service_id: u64,
    flow_label: u32,
    hop_limit: u8,
    tclass: u8,
    qos_class: u16,
    raw_traffic: bool,
    sl: Option<u8>,
    pkey: Option<u16>,
    mtu: Option<Bound>,
    rate: Option<Bound>,
    life: Option<Bound>,
    reversible: bool,
    numb_path: Option<u8>,
    preference: Option<u8>,
}

impl Constraints {
    /// Reads the constraints of a PathRecord query. Errors: an MTU or rate
    /// value that is no code (ERR_REQ_INVALID), one half of ServiceID
    /// without the other (ERR_REQ_INSUFFICIENT_COMPONENTS), as OpenSM.
    pub(crate) fn from_path_query(q: &PathRecordRepr, mask: u64) -> Result<Constraints, u16> {
        let has = |bit: u64| mask & bit == bit;
        let sid = mask & pm::SERVICE_ID;
        if sid != 0 && sid != pm::SERVICE_ID {
            return Err(sa_status::INSUFFICIENT_COMPONENTS);
        }
        let bound = |sel_bit: u64, val_bit: u64, sel: u8, val: u8| {
            has(val_bit).then(|| Bound { selector: if has(sel_bit) { sel } else { 2 }, value: val })
        };
        let mtu = bound(pm::MTU_SELECTOR, pm::MTU, q.mtu_selector, q.mtu);
        let rate = bound(pm::RATE_SELECTOR, pm::RATE, q.rate_selector, q.rate);
        if mtu.is_some_and(|b| !rate::is_mtu(b.value)) || rate.is_some_and(|b| !rate::is_rate(b.value)) {
            return Err(sa_status::REQ_INVALID);
        }
        Ok(Constraints {
            service_id: if has(pm::SERVICE_ID) { q.service_id } else { 0 },
            flow_label: if has(pm::FLOW_LABEL) { q.flow_label & 0xF_FFFF } else { 0 },
            hop_limit: if has(pm::HOP_LIMIT) { q.hop_limit } else { 0 },
            tclass: if has(pm::TCLASS) { q.tclass } else { 0 },
            qos_class: if has(pm::QOS_CLASS) { q.qos_class & 0xFFF } else { 0 },
            raw_traffic: has(pm::RAW_TRAFFIC) && q.raw_traffic,
            sl: has(pm::SL).then_some(q.sl & 0xF),
            pkey: has(pm::PKEY).then_some(q.pkey),
            mtu,
            rate,
            life: bound(
                pm::PACKET_LIFE_TIME_SELECTOR,
                pm::PACKET_LIFE_TIME,
                q.packet_life_time_selector,
                q.packet_life_time & 0x3F,
            ),
            reversible: has(pm::REVERSIBLE) && q.reversible,
            numb_path: has(pm::NUMB_PATH).then_some(q.numb_path & 0x7F),
            preference: has(pm::PREFERENCE).then_some(q.preference),
        })
    }
}

/// The P_Key of a path between two ports holding `src` and `dst` (valid
/// keys in [`index::pkey_order`], as [`PathIndex::pkeys`] gives them). With
/// `want`, that P_Key when both hold its partition (the low 15 bits) and
/// one of them as a full member (IBA 10.9.3: two limited members cannot
/// talk); without, the first of the source's P_Keys the destination shares
/// so: the lowest partition, the full key when the source holds both.
/// O(log keys) per partition tried.
pub(crate) fn shared_pkey(src: &[u16], dst: &[u16], want: Option<u16>) -> Option<u16> {
    // Whether a port holds the partition, and as a full member.
    let full = |keys: &[u16], base: u16| {
        let at = keys.partition_point(|&k| k & 0x7FFF < base);
        keys[at..].iter().take_while(|&&k| k & 0x7FFF == base).map(|&k| k & 0x8000 != 0).max()
    };
    let shares = |base: u16| matches!((full(src, base), full(dst, base)), (Some(a), Some(b)) if a || b);
    match want {
        Some(p) => shares(p & 0x7FFF).then_some(p),
        None => src.iter().copied().find(|&p| shares(p & 0x7FFF)),
    }
}

/// Whether two end ports may talk: they share a partition, one of them a
/// full member (a port always reaches itself).
pub(crate) fn ends_share(index: &PathIndex, a: u32, b: u32) -> bool {
    a == b || shared_pkey(index.pkeys(a), index.pkeys(b), None).is_some()
}

/// Whether the requester at end port `requester` may have a path between
/// `src` and `dst` ([`PathConfig::requester_must_share`]).
fn requester_may_see(index: &PathIndex, cfg: &PathConfig, requester: Option<u32>, src: u32, dst: u32) -> bool {
    if !cfg.requester_must_share {
        return true;
    }
    requester.is_some_and(|r| ends_share(index, r, src) && ends_share(index, r, dst))
}

/// One path of a query, before it becomes a record.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Ask {
    pub src: u32,
    pub dst: u32,
    pub slid: Lid,
    pub dlid: Lid,
    pub preference: u8,
    /// The GIDs to answer with (the query's when it gave them).
    pub sgid: [u8; 16],
    pub dgid: [u8; 16],
}

/// The record for one (SLID, DLID) pair, None when the route is broken or
/// fails the constraints. See the module docs for every field.
pub(crate) fn evaluate(index: &PathIndex, c: &Constraints, cfg: &PathConfig, ask: &Ask) -> Option<PathRecordRepr> {
    let (src, dst) = (index.end(ask.src), index.end(ask.dst));
    let loopback = ask.src == ask.dst;
    let fwd = index.route(ask.src, ask.dlid).ok()?;
    if fwd.dest != ask.dst {
        return None;
    }
    let sl = index.path_sl(ask.src, ask.dlid);
    if c.sl.is_some_and(|want| want != sl) || c.preference.is_some_and(|p| p != ask.preference) {
        return None;
    }
    let pkey = shared_pkey(index.pkeys(ask.src), index.pkeys(ask.dst), c.pkey)?;
    // A reversible record serves both directions (a connection's two ends
    // use one path), so it carries what both routes carry.
    let back = if loopback { None } else { index.route(ask.dst, ask.slid).ok().filter(|b| b.dest == ask.src) };
    let reversible = loopback || back.is_some();
    if c.reversible && !reversible {
        return None;
    }
    let (path_mtu, path_rate) = match back {
        Some(b) => (fwd.mtu.min(b.mtu), rate::slower(fwd.rate, b.rate)),
        None => (fwd.mtu, fwd.rate),
    };
    // The source sends on the path; the destination too when it answers.
    let mut path_rate = rate::fit_rate_to_port(path_rate, &src.caps);
    if reversible {
        path_rate = rate::fit_rate_to_port(path_rate, &dst.caps);
    }
    let life = if loopback { 0 } else { cfg.packet_life_time & 0x3F };
    let num_gt = |a: u8, b: u8| a > b;
    let mtu = match c.mtu {
        Some(b) => b.apply(path_mtu, num_gt, |v| (v > rate::MTU_MIN).then(|| v - 1))?,
        None => path_mtu,
    };
    let path_rate = match c.rate {
        Some(b) => b.apply(path_rate, |a, b| rate::cmp_rates(a, b).is_gt(), rate::rate_below)?,
        None => path_rate,
    };
    let life = match c.life {
        Some(b) => b.apply(life, num_gt, |v| v.checked_sub(1))?,
        None => life,
    };
    Some(PathRecordRepr {
        service_id: c.service_id,
        dgid: ask.dgid,
        sgid: ask.sgid,
        dlid: ask.dlid.0,
        slid: ask.slid.0,
        raw_traffic: c.raw_traffic,
        flow_label: c.flow_label,
        hop_limit: c.hop_limit,
        tclass: c.tclass,
        reversible,
        numb_path: 0,
        pkey,
        qos_class: c.qos_class,
        sl,
        mtu_selector: 2,
        mtu,
        rate_selector: 2,
        rate: path_rate,
        packet_life_time_selector: 2,
        packet_life_time: life,
        preference: ask.preference,
    })
}

/// LIDs in a row: one a query names, or the 2^LMC of a port.
#[derive(Debug, Clone, Copy)]
pub(crate) struct LidRun {
    first: u16,
    len: u16,
}

impl LidRun {
    pub(crate) fn one(lid: u16) -> Self {
        LidRun { first: lid, len: 1 }
    }

    /// Every LID end port `e` answers to.
    pub(crate) fn of(e: &EndPort) -> Self {
        LidRun { first: e.base_lid.0, len: 1 << e.lmc.min(7) }
    }

    fn at(self, i: u16) -> Lid {
        Lid(self.first.wrapping_add(i))
    }
}

/// (SLID, DLID, Preference) in OpenSM's order: the diagonal first (both
/// offsets equal, Preference 0), then every other pair (Preference 2).
pub(crate) fn lid_pairs(slids: LidRun, dlids: LidRun) -> impl Iterator<Item = (Lid, Lid, u8)> {
    let diag = slids.len.min(dlids.len);
    let first = (0..diag).map(move |i| (slids.at(i), dlids.at(i), 0));
    let rest = (0..slids.len)
        .flat_map(move |s| (0..dlids.len).map(move |d| (s, d)))
        .filter(|&(s, d)| s != d)
        .map(move |(s, d)| (slids.at(s), dlids.at(d), 2));
    first.chain(rest)
}

/// How one side of a query names its port.
enum Side {
    /// Neither GID nor LID masked.
    Unspecified,
    /// A LID no port has: no records.
    NotFound,
    Port(u32),
}

/// Whether `gid` names end port `e`: its GUID, with the port's subnet
/// prefix or the link-local one.
fn gid_prefix_ok(index: &PathIndex, e: u32, gid: &[u8; 16]) -> bool {
    let prefix = u64::from_be_bytes(gid[..8].try_into().expect("8 bytes"));
    prefix == crate::sa::index::DEFAULT_SUBNET_PREFIX || prefix == index.end(e).gid_prefix
}

/// The end port of a unicast GID, or ERR_REQ_INVALID_GID: the port whose
/// GUID, or one of whose alias GUIDs, is the GID's interface ID.
pub(crate) fn end_by_gid(index: &PathIndex, gid: &[u8; 16]) -> Result<u32, u16> {
    let guid = crate::sa::index::gid_guid(gid);
    index
        .end_by_guid(guid)
        .or_else(|| index.end_by_alias(guid))
        .filter(|&e| gid_prefix_ok(index, e, gid))
        .ok_or(sa_status::INVALID_GID)
}

fn side(index: &PathIndex, gid: Option<&[u8; 16]>, lid: Option<u16>) -> Result<Side, u16> {
    let by_gid = gid.map(|g| end_by_gid(index, g)).transpose()?;
    let by_lid = lid.map(|l| index.end_by_lid(Lid(l)));
    Ok(match (by_gid, by_lid) {
        (None, None) => Side::Unspecified,
        (_, Some(None)) => Side::NotFound,
        (Some(g), Some(Some(l))) if g != l => return Err(sa_status::REQ_INVALID),
        (Some(e), _) | (None, Some(Some(e))) => Side::Port(e),
    })
}

/// Every PathRecord a query (a SubnAdmGetTable, or a Get through
/// [`path_record_get`]) asks for, in order; see the module docs. The error
/// is the SA status to answer with. `requester_lid` is the SLID the query
/// came from. Cost: O(records × hops), at most `cfg.max_records` records.
pub fn path_records(
    index: &PathIndex,
    query: &PathRecordRepr,
    mask: u64,
    requester_lid: Lid,
    cfg: &PathConfig,
) -> Result<Vec<PathRecordRepr>, u16> {
    let mut out = Vec::new();
    collect(index, query, mask, requester_lid, cfg, None, &mut out)?;
    Ok(out)
}

/// The one PathRecord a SubnAdmGet asks for: NumbPath is 1 per port pair
/// whatever the query says (IBA 1.2 erratum, as OpenSM), so a query naming
/// both ports gets its first path; one naming several pairs (a missing
/// destination) is ERR_TOO_MANY_RECORDS, and none ERR_NO_RECORDS.
pub fn path_record_get(
    index: &PathIndex,
    query: &PathRecordRepr,
    mask: u64,
    requester_lid: Lid,
    cfg: &PathConfig,
) -> Result<PathRecordRepr, u16> {
    // Two records are enough to know the answer is TOO_MANY_RECORDS: a
    // Get without a destination stops walking there, not at every port.
    let mut records = TwoAtMost::default();
    collect(index, query, mask, requester_lid, cfg, Some(1), &mut records)?;
    match records {
        TwoAtMost { first: None, .. } => Err(sa_status::NO_RECORDS),
        TwoAtMost { first: Some(r), second: None } => Ok(r),
        TwoAtMost { .. } => Err(sa_status::TOO_MANY_RECORDS),
    }
}

/// Where [`collect`] puts the records it finds, until it is full.
trait Found {
    fn count(&self) -> usize;
    fn full(&self) -> bool;
    fn keep(&mut self, r: PathRecordRepr);
}

impl Found for Vec<PathRecordRepr> {
    fn count(&self) -> usize {
        self.len()
    }
    fn full(&self) -> bool {
        false
    }
    fn keep(&mut self, r: PathRecordRepr) {
        self.push(r);
    }
}

/// A Get's records: the first two, on the stack.
#[derive(Default)]
struct TwoAtMost {
    first: Option<PathRecordRepr>,
    second: Option<PathRecordRepr>,
}

impl Found for TwoAtMost {
    fn count(&self) -> usize {
        usize::from(self.first.is_some()) + usize::from(self.second.is_some())
    }
    fn full(&self) -> bool {
        self.second.is_some()
    }
    fn keep(&mut self, r: PathRecordRepr) {
        if self.first.is_none() {
            self.first = Some(r);
        } else {
            self.second.get_or_insert(r);
        }
    }
}

/// The records of a query into `out`, at most `per_pair` per port pair,
/// until `out` is full: gathering stops there (a Get needs two to refuse).
fn collect(
    index: &PathIndex,
    q: &PathRecordRepr,
    mask: u64,
    requester_lid: Lid,
    cfg: &PathConfig,
    per_pair: Option<usize>,
    out: &mut impl Found,
) -> Result<(), u16> {
    if unknown_components(PathRecordRepr::COMPONENTS, mask) != 0 {
        return Err(sa_status::REQ_INVALID);
    }
    let c = Constraints::from_path_query(q, mask)?;
    let has = |bit: u64| mask & bit != 0;
    if has(pm::DGID) && q.dgid[0] == 0xFF {
        return Ok(());
    }
    let src = match side(index, has(pm::SGID).then_some(&q.sgid), has(pm::SLID).then_some(q.slid))? {
        Side::Port(e) => e,
        Side::NotFound => return Ok(()),
        Side::Unspecified => match index.end_by_lid(requester_lid) {
            Some(e) => e,
            None => return Ok(()),
        },
    };
    // A range, not a list: the common query names one port, and builds
    // nothing to find it.
    let dsts = match side(index, has(pm::DGID).then_some(&q.dgid), has(pm::DLID).then_some(q.dlid))? {
        Side::Port(e) => e..e + 1,
        Side::NotFound => return Ok(()),
        Side::Unspecified => 0..index.ends().len() as u32,
    };
    let requester = index.end_by_lid(requester_lid);
    let limit = per_pair.or(c.numb_path.map(usize::from)).unwrap_or(usize::MAX);
    let slids = if has(pm::SLID) { LidRun::one(q.slid) } else { LidRun::of(index.end(src)) };
    let sgid = if has(pm::SGID) { q.sgid } else { index.end(src).gid() };
    for dst in dsts {
        if out.full() {
            break;
        }
        if !requester_may_see(index, cfg, requester, src, dst) {
            continue;
        }
        let dlids = if has(pm::DLID) { LidRun::one(q.dlid) } else { LidRun::of(index.end(dst)) };
        let dgid = if has(pm::DGID) { q.dgid } else { index.end(dst).gid() };
        let mut taken = 0;
        for (slid, dlid, preference) in lid_pairs(slids, dlids) {
            if taken >= limit {
                break;
            }
            let ask = Ask { src, dst, slid, dlid, preference, sgid, dgid };
            if let Some(r) = evaluate(index, &c, cfg, &ask) {
                if out.count() >= cfg.max_records {
                    return Err(sa_status::NO_RESOURCES);
                }
                out.keep(r);
                taken += 1;
            }
        }
    }
    Ok(())
}
