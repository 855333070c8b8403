//! Linear forwarding tables: what an engine produces and the SM programs.
//!
//! A switch's LFT maps each destination LID to an output port (IBA 14.2.5.10,
//! LinearForwardingTable). The SM writes it 64 LIDs at a time: block `n`
//! holds LIDs `64n..64n+63` and travels as attribute modifier `n`. Entries
//! past `LinearFDBTop` (IBA 14.2.5.4, SwitchInfo) are ignored by the switch.

use serde::{Deserialize, Serialize};

use crate::fabric::SwitchId;

/// The port value meaning "no route": the switch drops packets to that LID.
pub const UNROUTED: u8 = 255;
/// LIDs per LinearForwardingTable block (one SMP data payload).
pub const LFT_BLOCK_LIDS: usize = 64;

/// SwitchInfo.LinearFDBTop: the highest LID the table holds a valid entry
/// range for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct LinearFdbTop(pub u16);

/// One switch's forwarding table, indexed by LID.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Lft {
    /// `ports[lid]` is the output port; [`UNROUTED`] for no route.
    pub ports: Vec<u8>,
}

/// One 64-LID block as sent in a LinearForwardingTable Set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct LftBlock {
    /// Block number: the SMP attribute modifier.
    pub index: u16,
    /// Ports for LIDs `64 * index ..`; padded with [`UNROUTED`] past the table.
    pub ports: [u8; LFT_BLOCK_LIDS],
}

impl LftBlock {
    pub fn first_lid(&self) -> u32 {
        u32::from(self.index) * LFT_BLOCK_LIDS as u32
    }
}

impl Lft {
    /// A table covering LIDs `0..=top` with every entry unrouted.
    pub fn unrouted(top: u16) -> Lft {
        Lft { ports: vec![UNROUTED; usize::from(top) + 1] }
    }

    /// The output port for `lid`; [`UNROUTED`] past the end of the table.
    pub fn port(&self, lid: u16) -> u8 {
        self.ports.get(usize::from(lid)).copied().unwrap_or(UNROUTED)
    }

    /// Sets the port for `lid`, growing the table (with unrouted entries) if
    /// needed.
    pub fn set(&mut self, lid: u16, port: u8) {
        let i = usize::from(lid);
        if i >= self.ports.len() {
            self.ports.resize(i + 1, UNROUTED);
        }
        self.ports[i] = port;
    }

    /// SwitchInfo.LinearFDBTop for this table: its last LID. Engines size every
    /// table to the fabric's highest LID, as OpenSM does, so switches agree.
    pub fn linear_fdb_top(&self) -> LinearFdbTop {
        LinearFdbTop(self.ports.len().saturating_sub(1) as u16)
    }

    /// Blocks needed to cover the table.
    pub fn num_blocks(&self) -> usize {
        self.ports.len().div_ceil(LFT_BLOCK_LIDS)
    }

    /// Block `index`, padded with [`UNROUTED`]; a block wholly past the end is
    /// all unrouted.
    pub fn block(&self, index: u16) -> LftBlock {
        let mut ports = [UNROUTED; LFT_BLOCK_LIDS];
        let start = usize::from(index) * LFT_BLOCK_LIDS;
        if start < self.ports.len() {
            let end = (start + LFT_BLOCK_LIDS).min(self.ports.len());
            ports[..end - start].copy_from_slice(&self.ports[start..end]);
        }
        LftBlock { index, ports }
    }

    /// All blocks in order.
    pub fn blocks(&self) -> impl Iterator<Item = LftBlock> + '_ {
        (0..self.num_blocks() as u16).map(|i| self.block(i))
    }

    /// Number of LIDs routed out of each port (index = port number, 0..=255);
    /// the unrouted count sits at index 255.
    pub fn port_histogram(&self) -> Vec<u32> {
        let mut h = vec![0u32; 256];
        for &p in &self.ports {
            h[usize::from(p)] += 1;
        }
        h
    }
}

/// The blocks of `new` the SM must send to a switch known to hold `old`:
/// blocks whose entries differ, plus every block holding LIDs past the end of
/// `old` (what a switch holds beyond the top we programmed is unknown, so a
/// grown table always sends its new range; a fresh switch is `old` = empty).
/// Blocks past the end of `new` are not sent: they lie beyond the new
/// LinearFDBTop and the switch ignores them.
pub fn diff_blocks<'a>(old: &'a Lft, new: &'a Lft) -> impl Iterator<Item = LftBlock> + 'a {
    let known = old.ports.len();
    (0..new.num_blocks() as u16).filter_map(move |i| {
        let n = new.block(i);
        let end = (usize::from(i) + 1) * LFT_BLOCK_LIDS;
        let covers_unknown = end > known && new.ports.len() > known;
        (covers_unknown || old.block(i) != n).then_some(n)
    })
}

/// Path SLs chosen by engines that layer routes onto SLs for deadlock
/// freedom (LASH, DFSSSP, Nue). MinHop leaves it empty.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct PathSl {
    /// `by_source_switch[s][dlid]` is the SL for traffic entering the fabric
    /// at switch `s` towards `dlid`; one row per switch, or one row all
    /// switches share ([`PathSl::per_destination`]).
    pub by_source_switch: SlRows,
    /// Further SLs towards a DLID used by some of the end ports on a source
    /// switch, as (DLID, switch index, SL), sorted: an SA that answers per
    /// source *port* (OpenSM's dfsssp and nue) may give two ports of one
    /// switch different SLs. Engines here choose per switch and leave this
    /// empty; [`crate::dump::parse_path_sl`] fills it.
    #[serde(default)]
    pub more: Vec<(u16, u32, u8)>,
    /// SL-to-VL tables per (switch, input port, output port) when the
    /// engine changes a path's VL inside the fabric; `None`: SL n rides
    /// VL n on every hop.
    #[serde(default)]
    pub hop_vls: Option<HopVls>,
}

impl PathSl {
    /// One SL per (source switch, DLID).
    pub fn per_switch(by_source_switch: Vec<Vec<u8>>) -> PathSl {
        PathSl { by_source_switch: SlRows::per_switch(by_source_switch), more: Vec::new(), hop_vls: None }
    }

    /// One SL per DLID, the same from each of `switches` source switches
    /// (nue: a path's SL is its destination's layer): `by_dlid[dlid]` is
    /// stored once instead of once per switch.
    pub fn per_destination(by_dlid: Vec<u8>, switches: usize) -> PathSl {
        PathSl { by_source_switch: SlRows::per_destination(by_dlid, switches), more: Vec::new(), hop_vls: None }
    }

    /// The VL a packet on `sl` takes leaving switch `s` by `out_port`,
    /// having entered by `in_port` (0: the switch itself, or an end port's
    /// first hop, for which engines must not vary the table).
    pub fn hop_vl(&self, s: SwitchId, in_port: u8, out_port: u8, sl: u8) -> u8 {
        match &self.hop_vls {
            Some(h) => h.vl(s, in_port, out_port, sl),
            None => sl,
        }
    }

    /// Whether every path is on SL 0 and stays on VL 0 (an engine's one
    /// layer): such routes need no SL of their own.
    pub fn all_on_sl0(&self) -> bool {
        self.hop_vls.is_none()
            && self.more.iter().all(|m| m.2 == 0)
            && match &self.by_source_switch.0 {
                Rows::PerSwitch(rows) => rows.iter().all(|r| r.iter().all(|&sl| sl == 0)),
                Rows::Shared { row, .. } => row.iter().all(|&sl| sl == 0),
            }
    }

    pub fn sl(&self, source: SwitchId, dlid: u16) -> Option<u8> {
        self.by_source_switch.get(source.index())?.get(usize::from(dlid)).copied()
    }

    /// The further SLs of [`PathSl::more`] towards `dlid`, as (switch index, SL).
    pub fn more_for(&self, dlid: u16) -> impl Iterator<Item = (u32, u8)> + '_ {
        let start = self.more.partition_point(|m| m.0 < dlid);
        self.more[start..].iter().take_while(move |m| m.0 == dlid).map(|m| (m.1, m.2))
    }
}

/// The SL rows of a [`PathSl`], one per source switch (`rows[s][dlid]`),
/// read like a `Vec<Vec<u8>>` whatever the storage. Engines that give every
/// source the same SL towards a DLID store that row once: S x L bytes
/// become L (21 MB -> 13 kB for nue on the 11,664-host fat tree, whose 1,620
/// switches each held a copy of the same 13,285-byte row).
#[derive(Debug, Clone)]
pub struct SlRows(Rows);

#[derive(Debug, Clone)]
enum Rows {
    PerSwitch(Vec<Vec<u8>>),
    /// `row` is every one of the `switches` rows.
    Shared {
        row: Vec<u8>,
        switches: usize,
    },
}

impl SlRows {
    pub fn per_switch(rows: Vec<Vec<u8>>) -> SlRows {
        SlRows(Rows::PerSwitch(rows))
    }

    /// `switches` rows, each `row`, stored once.
    pub fn per_destination(row: Vec<u8>, switches: usize) -> SlRows {
        SlRows(Rows::Shared { row, switches })
    }

    /// Whether one row is stored for every switch.
    pub fn is_per_destination(&self) -> bool {
        matches!(self.0, Rows::Shared { .. })
    }

    /// Source switches covered (rows).
    pub fn len(&self) -> usize {
        match &self.0 {
            Rows::PerSwitch(rows) => rows.len(),
            Rows::Shared { switches, .. } => *switches,
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Source switch `s`'s row (SL per DLID).
    pub fn get(&self, s: usize) -> Option<&Vec<u8>> {
        match &self.0 {
            Rows::PerSwitch(rows) => rows.get(s),
            Rows::Shared { row, switches } => (s < *switches).then_some(row),
        }
    }

    /// The rows in switch order (a shared row once per switch).
    pub fn iter(&self) -> impl Iterator<Item = &Vec<u8>> + '_ {
        (0..self.len()).map(move |s| &self[s])
    }
}

impl Default for SlRows {
    fn default() -> Self {
        SlRows::per_switch(Vec::new())
    }
}

impl std::ops::Index<usize> for SlRows {
    type Output = Vec<u8>;

    /// # Panics
    /// When `s` is not below [`SlRows::len`], as a `Vec` would.
    fn index(&self, s: usize) -> &Vec<u8> {
        match self.get(s) {
            Some(row) => row,
            None => panic!("source switch {s} out of range for {} SL rows", self.len()),
        }
    }
}

/// Writing one switch's row gives every switch its own copy first, so the
/// others keep theirs.
impl std::ops::IndexMut<usize> for SlRows {
    fn index_mut(&mut self, s: usize) -> &mut Vec<u8> {
        if let Rows::Shared { row, switches } = &mut self.0 {
            let rows = vec![std::mem::take(row); *switches];
            self.0 = Rows::PerSwitch(rows);
        }
        match &mut self.0 {
            Rows::PerSwitch(rows) => &mut rows[s],
            Rows::Shared { .. } => unreachable!("expanded above"),
        }
    }
}

/// Equal when every switch's row is: the storage does not count.
impl PartialEq for SlRows {
    fn eq(&self, other: &SlRows) -> bool {
        self.len() == other.len() && self.iter().zip(other.iter()).all(|(a, b)| a == b)
    }
}

impl Eq for SlRows {}

/// Serialized as the rows, one per switch, as when this was a `Vec<Vec<u8>>`.
impl Serialize for SlRows {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_seq(self.iter())
    }
}

impl<'de> Deserialize<'de> for SlRows {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<SlRows, D::Error> {
        Vec::<Vec<u8>>::deserialize(deserializer).map(SlRows::per_switch)
    }
}

/// Number of SLs (IBA 7.6.5): an SL-to-VL table has one VL per SL.
pub const SL_COUNT: usize = 16;

/// SL-to-VL tables a switch needs per (input port, output port) when paths
/// change VL inside the fabric (dimension-order routing on tori moves to
/// VL 1 at the dateline, as OpenSM's torus-2QoS does, instead of fixing the
/// VL per path). The SM programs them as SLtoVLMappingTable Sets with the
/// (input, output) attribute modifier (IBA 14.2.5.8); end ports map every
/// SL to VL 0.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct HopVls {
    /// Per switch index: ports + 1 (the row width of its tables).
    width: Vec<u16>,
    /// Per switch index: `[in_port * width + out_port]` = VL per SL.
    tables: Vec<Vec<[u8; SL_COUNT]>>,
}

impl HopVls {
    /// All-zero tables (every SL on VL 0) for every switch of `fabric`.
    pub fn new(fabric: &crate::fabric::RoutingFabric) -> HopVls {
        let width: Vec<u16> = fabric.switches().iter().map(|s| u16::from(s.num_ports) + 1).collect();
        let tables = width.iter().map(|&w| vec![[0u8; SL_COUNT]; usize::from(w) * usize::from(w)]).collect();
        HopVls { width, tables }
    }

    fn slot(&self, s: SwitchId, in_port: u8, out_port: u8) -> Option<usize> {
        let w = usize::from(*self.width.get(s.index())?);
        let (i, o) = (usize::from(in_port), usize::from(out_port));
        (i < w && o < w).then_some(i * w + o)
    }

    /// Sets the table for (`s`, `in_port`, `out_port`); ports past the
    /// switch's are ignored.
    pub fn set(&mut self, s: SwitchId, in_port: u8, out_port: u8, table: [u8; SL_COUNT]) {
        if let Some(k) = self.slot(s, in_port, out_port) {
            self.tables[s.index()][k] = table;
        }
    }

    /// The table for (`s`, `in_port`, `out_port`); all zero for ports the
    /// switch does not have.
    pub fn table(&self, s: SwitchId, in_port: u8, out_port: u8) -> [u8; SL_COUNT] {
        self.slot(s, in_port, out_port).map_or([0; SL_COUNT], |k| self.tables[s.index()][k])
    }

    pub fn vl(&self, s: SwitchId, in_port: u8, out_port: u8, sl: u8) -> u8 {
        self.table(s, in_port, out_port)[usize::from(sl) % SL_COUNT]
    }

    /// Switches the tables cover (the fabric's switch count).
    pub fn num_switches(&self) -> usize {
        self.width.len()
    }

    /// The highest VL any table uses, plus one.
    pub fn vls_used(&self) -> u8 {
        self.tables.iter().flatten().flat_map(|t| t.iter()).copied().max().map_or(1, |v| v + 1)
    }
}

/// An engine's output: one LFT per switch.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct Routes {
    /// Indexed by [`SwitchId`].
    pub lfts: Vec<Lft>,
    pub sl: Option<PathSl>,
}

impl Routes {
    pub fn lft(&self, s: SwitchId) -> Option<&Lft> {
        self.lfts.get(s.index())
    }

    /// The port switch `s` forwards `lid` to; [`UNROUTED`] if the switch or
    /// entry is missing.
    pub fn port(&self, s: SwitchId, lid: u16) -> u8 {
        self.lft(s).map_or(UNROUTED, |l| l.port(lid))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_pad_and_index() {
        let mut l = Lft::unrouted(70);
        assert_eq!(l.linear_fdb_top(), LinearFdbTop(70));
        assert_eq!(l.num_blocks(), 2);
        l.set(1, 3);
        l.set(64, 7);
        l.set(70, 9);
        let b0 = l.block(0);
        assert_eq!(b0.index, 0);
        assert_eq!(b0.ports[1], 3);
        assert_eq!(b0.ports[0], UNROUTED);
        let b1 = l.block(1);
        assert_eq!(b1.first_lid(), 64);
        assert_eq!(b1.ports[0], 7);
        assert_eq!(b1.ports[6], 9);
        assert!(b1.ports[7..].iter().all(|&p| p == UNROUTED), "padding past LinearFDBTop");
        assert_eq!(l.block(5).ports, [UNROUTED; 64]);
        assert_eq!(l.port(1000), UNROUTED);
        assert_eq!(l.blocks().count(), 2);
    }

    #[test]
    fn set_grows_the_table() {
        let mut l = Lft::default();
        assert_eq!(l.linear_fdb_top(), LinearFdbTop(0));
        l.set(130, 2);
        assert_eq!(l.linear_fdb_top(), LinearFdbTop(130));
        assert_eq!(l.port(129), UNROUTED);
        assert_eq!(l.port(130), 2);
        assert_eq!(l.num_blocks(), 3);
        let h = l.port_histogram();
        assert_eq!(h[2], 1);
        assert_eq!(h[255], 130);
    }

    #[test]
    fn diff_sends_only_changed_blocks() {
        let mut old = Lft::unrouted(200);
        for lid in 1..=200 {
            old.set(lid, (lid % 4) as u8 + 1);
        }
        let mut new = old.clone();
        assert_eq!(diff_blocks(&old, &new).count(), 0);
        new.set(65, 9);
        new.set(190, 9);
        let d: Vec<u16> = diff_blocks(&old, &new).map(|b| b.index).collect();
        assert_eq!(d, vec![1, 2]);
        assert_eq!(diff_blocks(&old, &new).next().unwrap().ports[1], 9);

        // A fresh switch (empty table) needs every block that routes something.
        let empty = Lft::default();
        assert_eq!(diff_blocks(&empty, &new).count(), new.num_blocks());

        // Growing: the switch's entries past the old top are unknown, so
        // every block touching the new range goes out, even unrouted ones.
        let mut grown = old.clone();
        grown.set(300, UNROUTED);
        assert_eq!(diff_blocks(&old, &grown).map(|b| b.index).collect::<Vec<_>>(), vec![3, 4]);

        // Shrinking: blocks past the new top are not sent.
        let small = Lft { ports: old.ports[..64].to_vec() };
        assert_eq!(diff_blocks(&old, &small).count(), 0);
    }

    #[test]
    fn routes_lookup_is_total() {
        let r = Routes { lfts: vec![Lft::unrouted(3)], sl: None };
        assert_eq!(r.port(SwitchId(0), 2), UNROUTED);
        assert_eq!(r.port(SwitchId(7), 2), UNROUTED);
        let sl = PathSl::per_switch(vec![vec![0, 1, 2]]);
        assert_eq!(sl.sl(SwitchId(0), 2), Some(2));
        assert_eq!(sl.sl(SwitchId(0), 3), None);
    }

    #[test]
    fn per_destination_sls_read_as_one_row_per_switch() {
        let shared = PathSl::per_destination(vec![0, 1, 2], 3);
        let copies = PathSl::per_switch(vec![vec![0, 1, 2]; 3]);
        assert!(shared.by_source_switch.is_per_destination());
        assert!(!copies.by_source_switch.is_per_destination());
        for s in 0..3 {
            assert_eq!(shared.sl(SwitchId(s), 2), Some(2));
            assert_eq!(shared.by_source_switch[s as usize], vec![0, 1, 2]);
        }
        assert_eq!(shared.sl(SwitchId(0), 3), None);
        assert_eq!(shared.sl(SwitchId(3), 0), None, "no row past the switches");
        assert_eq!(shared.by_source_switch.len(), 3);
        assert_eq!(shared.by_source_switch.iter().count(), 3);
        assert_eq!(shared, copies, "equal tables, whatever the storage");
        assert_eq!(serde_json::to_string(&shared).unwrap(), serde_json::to_string(&copies).unwrap());
        let back: PathSl = serde_json::from_str(&serde_json::to_string(&shared).unwrap()).unwrap();
        assert_eq!(back, shared);

        // Writing one switch's row leaves the others' alone.
        let mut one = shared.clone();
        one.by_source_switch[1][0] = 5;
        assert!(!one.by_source_switch.is_per_destination());
        assert_eq!(one.sl(SwitchId(1), 0), Some(5));
        assert_eq!(one.sl(SwitchId(0), 0), Some(0));
        assert_eq!(one.sl(SwitchId(2), 0), Some(0));
        assert_ne!(one, shared);
        assert!(PathSl::per_destination(vec![1], 0).by_source_switch.is_empty());
    }
}
