//! Forwarding tables as text: OpenSM's `opensm-lfts.dump` (read and
//! written) and `ibroute` output (read), so that OpenSM's tables and ours
//! go through the same analysis.
//!
//! OpenSM's format (written by `osm_dump.c` when log flag 0x40 is on; its
//! `file` routing engine reads the same text back), one block per switch in
//! ascending GUID order:
//!
//! ```text
//! Unicast lids [0-14] of switch Lid 2 guid 0x0000000000200000 ('leaf0'):
//! 0x0001 001 # Channel Adapter portguid 0x0000000000100001: 'leaf0-h0'
//! 0x0002 000 # Switch portguid 0x0000000000200000: 'leaf0'
//! 0x0009 004 # unknown node and type
//! 14 lids dumped
//! ```
//!
//! Entries whose port is not a port of the switch (255 = unrouted) are left
//! out; the footer repeats the top LID, not the number of lines. `ibroute`
//! prints the same entries as `0x0001 001 : (Channel Adapter portguid
//! 0x...: 'desc')` under a two-line column header, the range in hex, the
//! switch named by `Lid N` or by a directed-route path, and a footer
//! counting the lines (`N valid lids dumped`, or `N lids dumped` with `-a`,
//! which also lists unrouted entries).
//!
//! The comments name the port behind each LID. Reading a dump keeps them
//! ([`LftDump::lid_claims`]), so a caller can rebuild the LID plan of the
//! fabric the dump came from before checking the tables against it
//! ([`LftDump::to_routes`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::{self, Write as _};

use thiserror::Error;

use crate::fabric::{EndPortId, NodeRef, RoutingFabric, SwitchId};
use crate::lft::{HopVls, Lft, PathSl, Routes, SL_COUNT, UNROUTED};

/// Which tool wrote a dump.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DumpFormat {
    /// `opensm-lfts.dump` (and `ibsm route --lfts-out`).
    OpenSm,
    /// `ibroute` (infiniband-diags).
    Ibroute,
}

/// Node type words the comments use (`ib_get_node_type_str`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NodeTypeText {
    ChannelAdapter,
    Switch,
    Router,
}

impl NodeTypeText {
    pub fn as_str(self) -> &'static str {
        match self {
            NodeTypeText::ChannelAdapter => "Channel Adapter",
            NodeTypeText::Switch => "Switch",
            NodeTypeText::Router => "Router",
        }
    }
}

/// What a line's comment says owns its LID.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpDest {
    /// None for ibroute's `path #N out of M` lines (further LIDs of an LMC
    /// range), which give no type.
    pub kind: Option<NodeTypeText>,
    pub port_guid: u64,
    pub desc: String,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpEntry {
    pub lid: u16,
    pub port: u8,
    /// 1-based line number.
    pub line: usize,
    pub dest: Option<DumpDest>,
}

/// One switch's block.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DumpSwitch {
    pub guid: u64,
    /// The switch's LID from the header (ibroute by directed route: None).
    pub lid: Option<u16>,
    pub desc: String,
    /// The top of the header's LID range.
    pub top: u16,
    pub line: usize,
    pub entries: Vec<DumpEntry>,
}

/// A parsed dump, in file order.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LftDump {
    pub format: DumpFormat,
    pub switches: Vec<DumpSwitch>,
}

/// A port and the LIDs the dump's comments and headers give it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LidClaim {
    /// A port GUID, or a switch GUID from a block header.
    pub guid: u64,
    /// Ascending, no repeats.
    pub lids: Vec<u16>,
    /// The first line naming it.
    pub line: usize,
}

/// What is wrong with a dump, or with a dump against a fabric; `file` is
/// the name the caller gave, `line` 1-based.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DumpError {
    // --- text
    #[error("{file}:{line}: {problem}")]
    Syntax { file: String, line: usize, problem: String },
    #[error("{file}: no switch tables in the dump")]
    Empty { file: String },
    #[error("{file}:{line}: switch {guid:#018x} appears twice (first at line {first_line})")]
    DuplicateSwitch { file: String, line: usize, guid: u64, first_line: usize },
    #[error("{file}:{line}: LID {lid:#06x} belongs to {first:#018x} (line {first_line}) and to {second:#018x}")]
    LidConflict { file: String, line: usize, lid: u16, first: u64, first_line: usize, second: u64 },

    // --- against the fabric
    #[error("{file}:{line}: switch {guid:#018x} (LID {}) is not in the topology", opt_lid(*lid))]
    UnknownSwitch { file: String, line: usize, guid: u64, lid: Option<u16> },
    #[error("{file}: switch {guid:#018x} (LID {lid:#06x}) of the topology has no table in the dump")]
    MissingSwitch { file: String, guid: u64, lid: u16 },
    #[error(
        "{file}:{line}: switch {guid:#018x} (LID {}): LID {lid:#06x} goes to port {port}, the switch has {num_ports} ports",
        opt_lid(*switch_lid)
    )]
    PortOutOfRange { file: String, line: usize, guid: u64, switch_lid: Option<u16>, lid: u16, port: u8, num_ports: u8 },
    #[error("{file}:{line}: switch {guid:#018x} (LID {}): LID {lid:#06x} goes to port {port}, which has no cable", opt_lid(*switch_lid))]
    NotCabled { file: String, line: usize, guid: u64, switch_lid: Option<u16>, lid: u16, port: u8 },
    #[error(
        "{file}:{line}: switch {guid:#018x} (LID {}): LID {lid:#06x} belongs to no port of the topology",
        opt_lid(*switch_lid)
    )]
    UnknownLid { file: String, line: usize, guid: u64, switch_lid: Option<u16>, lid: u16 },
    #[error(
        "{file}:{line}: switch {guid:#018x} has LID {dump_lid:#06x} in the dump but {fabric_lid:#06x} in the topology"
    )]
    SwitchLidMismatch { file: String, line: usize, guid: u64, dump_lid: u16, fabric_lid: u16 },
}

fn opt_lid(l: Option<u16>) -> String {
    l.map_or_else(|| "unknown".to_string(), |l| format!("{l:#06x}"))
}

/// Parses `0x`-prefixed hex (or plain decimal) into a u64.
fn parse_num(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) if !h.is_empty() => u64::from_str_radix(h, 16).ok(),
        Some(_) => None,
        None => s.parse().ok(),
    }
}

fn parse_lid(s: &str) -> Option<u16> {
    parse_num(s).and_then(|v| u16::try_from(v).ok())
}

/// `Unicast lids [A-B] of switch <who> guid 0x<G> (<desc>):`, where <desc>
/// is `'text'` (OpenSM) or bare text (ibroute).
fn parse_header(line: &str) -> Result<(DumpFormat, u16, Option<u16>, u64, String), String> {
    let rest = line.strip_prefix("Unicast lids [").ok_or("expected `Unicast lids [`")?;
    let (range, rest) = rest.split_once(']').ok_or("no `]` after the LID range")?;
    let (_, top) = range.split_once('-').ok_or_else(|| format!("LID range `{range}` is not `A-B`"))?;
    let format = if top.starts_with("0x") { DumpFormat::Ibroute } else { DumpFormat::OpenSm };
    let top = parse_lid(top).ok_or_else(|| format!("LID range end `{top}` is not a LID"))?;
    let rest = rest.strip_prefix(" of switch ").ok_or("expected ` of switch ` after the range")?;
    let (who, rest) = rest.split_once(" guid ").ok_or("no ` guid ` in the header")?;
    let lid = match who.strip_prefix("Lid ") {
        Some(l) => Some(parse_lid(l).ok_or_else(|| format!("switch LID `{l}` is not a LID"))?),
        None if who.starts_with("DR path") => None,
        None => return Err(format!("`{who}` names no switch LID or directed route")),
    };
    let (guid, rest) = rest.split_once(' ').ok_or("no description after the GUID")?;
    let guid = parse_num(guid).filter(|_| guid.starts_with("0x")).ok_or_else(|| format!("`{guid}` is not a GUID"))?;
    let desc = rest.strip_suffix(':').ok_or("the header does not end in `:`")?;
    let desc = desc.strip_prefix('(').and_then(|d| d.strip_suffix(')')).ok_or("the description is not in `( )`")?;
    let desc = desc.strip_prefix('\'').and_then(|d| d.strip_suffix('\'')).unwrap_or(desc);
    Ok((format, top, lid, guid, desc.to_string()))
}

/// `<Kind> portguid 0x<G>: '<desc>'`, `path #N out of M: portguid 0x<G>`,
/// or anything else (no owner).
fn parse_dest(comment: &str) -> Result<Option<DumpDest>, String> {
    let kinds = [NodeTypeText::ChannelAdapter, NodeTypeText::Switch, NodeTypeText::Router];
    let (kind, rest) = match kinds.iter().find_map(|k| comment.strip_prefix(k.as_str()).map(|r| (Some(*k), r))) {
        Some((k, r)) if r.starts_with(" portguid ") => (k, &r[" portguid ".len()..]),
        _ => match comment.starts_with("path #").then(|| comment.split_once(": portguid ")).flatten() {
            Some((_, r)) => (None, r),
            None => return Ok(None),
        },
    };
    let (guid, desc) = match rest.split_once(':') {
        Some((g, d)) => (g, d.trim()),
        None => (rest.trim(), ""),
    };
    let port_guid = parse_num(guid).ok_or_else(|| format!("`{guid}` is not a port GUID"))?;
    let desc = desc.strip_prefix('\'').and_then(|d| d.strip_suffix('\'')).unwrap_or(desc);
    Ok(Some(DumpDest { kind, port_guid, desc: desc.to_string() }))
}

/// `0x<lid> <port> # comment` (OpenSM) or `0x<lid> <port> : (info)` (ibroute).
fn parse_entry(line: &str, format: DumpFormat) -> Result<(u16, u8, Option<DumpDest>), String> {
    let mut words = line.splitn(3, ' ');
    let lid = words.next().unwrap_or("");
    let lid = parse_lid(lid).ok_or_else(|| format!("`{lid}` is not a LID"))?;
    let port = words.next().ok_or("no port after the LID")?;
    let port: u8 = port.parse().map_err(|_| format!("`{port}` is not a port number (0-255)"))?;
    let rest = words.next().unwrap_or("").trim();
    let comment = match format {
        DumpFormat::OpenSm => match rest.strip_prefix('#') {
            Some(c) => c.trim(),
            None if rest.is_empty() => "",
            None => return Err(format!("expected `# ...` after the port, found `{rest}`")),
        },
        DumpFormat::Ibroute => match rest.strip_prefix(':') {
            Some(c) => {
                let c = c.trim();
                c.strip_prefix('(').and_then(|c| c.strip_suffix(')')).unwrap_or(c)
            }
            None if rest.is_empty() => "",
            None => return Err(format!("expected `: (...)` after the port, found `{rest}`")),
        },
    };
    Ok((lid, port, parse_dest(comment)?))
}

impl LftDump {
    /// Parses OpenSM's dump or ibroute output (told apart by the header's
    /// LID range: decimal for OpenSM, hex for ibroute). `file` only names
    /// the input in errors. Never panics; every error names its line.
    pub fn parse(text: &str, file: &str) -> Result<LftDump, DumpError> {
        let syntax = |line: usize, problem: String| DumpError::Syntax { file: file.to_string(), line, problem };
        let mut format = None;
        let mut switches: Vec<DumpSwitch> = Vec::new();
        let mut first_line: BTreeMap<u64, usize> = BTreeMap::new();
        // The block being read; closed by its footer.
        let mut open = false;
        for (i, raw) in text.lines().enumerate() {
            let n = i + 1;
            let line = raw.trim_end();
            if line.trim().is_empty() {
                continue;
            }
            if line.starts_with("Unicast lids") {
                if open {
                    return Err(syntax(n, "a new switch starts before the previous one's `lids dumped` line".into()));
                }
                let (f, top, lid, guid, desc) = parse_header(line).map_err(|p| syntax(n, p))?;
                if *format.get_or_insert(f) != f {
                    return Err(syntax(n, "OpenSM and ibroute headers mixed in one file".into()));
                }
                if let Some(&first) = first_line.get(&guid) {
                    return Err(DumpError::DuplicateSwitch {
                        file: file.to_string(),
                        line: n,
                        guid,
                        first_line: first,
                    });
                }
                first_line.insert(guid, n);
                switches.push(DumpSwitch { guid, lid, desc, top, line: n, entries: Vec::new() });
                open = true;
                continue;
            }
            let Some(sw) = switches.last_mut().filter(|_| open) else {
                return Err(syntax(n, format!("`{}` outside a switch table", clip(line))));
            };
            let fmt = format.unwrap_or(DumpFormat::OpenSm);
            let trimmed = line.trim();
            if trimmed.ends_with("lids dumped") {
                let count = trimmed.split(' ').next().unwrap_or("");
                count.parse::<u32>().map_err(|_| syntax(n, format!("`{count}` is not a count of LIDs")))?;
                open = false;
                continue;
            }
            if fmt == DumpFormat::Ibroute
                && (trimmed.starts_with("Lid ") && trimmed.contains("Out") || trimmed.starts_with("Port "))
            {
                continue;
            }
            if !trimmed.starts_with("0x") {
                return Err(syntax(n, format!("expected a `0x<lid> <port>` entry, found `{}`", clip(line))));
            }
            let (lid, port, dest) = parse_entry(trimmed, fmt).map_err(|p| syntax(n, p))?;
            if lid > sw.top {
                return Err(syntax(n, format!("LID {lid:#06x} is past the table's range 0-{}", sw.top)));
            }
            if sw.entries.last().is_some_and(|e| e.lid >= lid) {
                return Err(syntax(n, format!("LID {lid:#06x} is out of order or repeated")));
            }
            sw.entries.push(DumpEntry { lid, port, line: n, dest });
        }
        if open {
            let n = text.lines().count();
            return Err(syntax(n, "the last switch table has no `lids dumped` line (truncated file?)".into()));
        }
        match format {
            Some(format) => Ok(LftDump { format, switches }),
            None => Err(DumpError::Empty { file: file.to_string() }),
        }
    }

    /// The LIDs each port has according to the dump: the switches' own
    /// LIDs from the headers and every LID whose comment names a port GUID.
    /// Two GUIDs for one LID is an error naming the line.
    pub fn lid_claims(&self, file: &str) -> Result<Vec<LidClaim>, DumpError> {
        let mut owner: BTreeMap<u16, (u64, usize)> = BTreeMap::new();
        let mut claim = |lid: u16, guid: u64, line: usize| -> Result<(), DumpError> {
            match owner.get(&lid) {
                Some(&(g, first_line)) if g != guid => Err(DumpError::LidConflict {
                    file: file.to_string(),
                    line,
                    lid,
                    first: g,
                    first_line,
                    second: guid,
                }),
                Some(_) => Ok(()),
                None => {
                    owner.insert(lid, (guid, line));
                    Ok(())
                }
            }
        };
        for sw in &self.switches {
            if let Some(lid) = sw.lid {
                claim(lid, sw.guid, sw.line)?;
            }
            for e in &sw.entries {
                if let Some(d) = &e.dest {
                    claim(e.lid, d.port_guid, e.line)?;
                }
            }
        }
        let mut by_guid: BTreeMap<u64, LidClaim> = BTreeMap::new();
        for (lid, (guid, line)) in owner {
            let c = by_guid.entry(guid).or_insert(LidClaim { guid, lids: Vec::new(), line });
            c.lids.push(lid);
            c.line = c.line.min(line);
        }
        Ok(by_guid.into_values().collect())
    }

    /// The tables of the dump as [`Routes`] of `fabric` (indexed by its
    /// switches, each covering `0..=fabric.max_lid()`). Every switch of the
    /// dump must be in the fabric and the other way round; every routed
    /// entry must name a LID some node of the fabric has, and a cabled port
    /// of the switch (or port 0). Entries of 255 are unrouted.
    pub fn to_routes(&self, fabric: &RoutingFabric, file: &str) -> Result<Routes, DumpError> {
        let by_guid: BTreeMap<u64, SwitchId> = fabric.switch_ids().map(|s| (fabric.switch(s).guid, s)).collect();
        let mut lfts: Vec<Option<Lft>> = vec![None; fabric.num_switches()];
        for sw in &self.switches {
            let Some(&s) = by_guid.get(&sw.guid) else {
                return Err(DumpError::UnknownSwitch {
                    file: file.to_string(),
                    line: sw.line,
                    guid: sw.guid,
                    lid: sw.lid,
                });
            };
            let fsw = fabric.switch(s);
            if let Some(lid) = sw.lid {
                if lid != fsw.base_lid {
                    return Err(DumpError::SwitchLidMismatch {
                        file: file.to_string(),
                        line: sw.line,
                        guid: sw.guid,
                        dump_lid: lid,
                        fabric_lid: fsw.base_lid,
                    });
                }
            }
            let mut lft = Lft::unrouted(fabric.max_lid());
            for e in &sw.entries {
                if e.port == UNROUTED {
                    continue;
                }
                let ctx = (file.to_string(), e.line, sw.guid, sw.lid, e.lid);
                if e.lid > fabric.max_lid() || fabric.lid_owner(e.lid).is_none() {
                    let (file, line, guid, switch_lid, lid) = ctx;
                    return Err(DumpError::UnknownLid { file, line, guid, switch_lid, lid });
                }
                if e.port > fsw.num_ports {
                    let (file, line, guid, switch_lid, lid) = ctx;
                    return Err(DumpError::PortOutOfRange {
                        file,
                        line,
                        guid,
                        switch_lid,
                        lid,
                        port: e.port,
                        num_ports: fsw.num_ports,
                    });
                }
                if e.port != 0 && fabric.switch_peer(s, e.port).is_none() {
                    let (file, line, guid, switch_lid, lid) = ctx;
                    return Err(DumpError::NotCabled { file, line, guid, switch_lid, lid, port: e.port });
                }
                lft.set(e.lid, e.port);
            }
            lfts[s.index()] = Some(lft);
        }
        let mut out = Vec::with_capacity(lfts.len());
        for (i, l) in lfts.into_iter().enumerate() {
            match l {
                Some(l) => out.push(l),
                None => {
                    let sw = fabric.switch(SwitchId(i as u32));
                    return Err(DumpError::MissingSwitch { file: file.to_string(), guid: sw.guid, lid: sw.base_lid });
                }
            }
        }
        Ok(Routes { lfts: out, sl: None })
    }
}

fn clip(s: &str) -> String {
    const MAX: usize = 60;
    match s.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_string(),
    }
}

/// Writes `routes` in OpenSM's `opensm-lfts.dump` format: switches in
/// ascending GUID order, switch and end-port names as descriptions, every
/// end port called a Channel Adapter. See [`write_opensm_dump_with`].
pub fn write_opensm_dump(fabric: &RoutingFabric, routes: &Routes) -> String {
    write_opensm_dump_with(fabric, routes, &|_| NodeTypeText::ChannelAdapter)
}

/// [`write_opensm_dump`] with the node type of each end port (routers).
pub fn write_opensm_dump_with(
    fabric: &RoutingFabric,
    routes: &Routes,
    end_kind: &dyn Fn(EndPortId) -> NodeTypeText,
) -> String {
    let mut order: Vec<SwitchId> = fabric.switch_ids().collect();
    order.sort_by_key(|&s| fabric.switch(s).guid);
    let mut out = String::new();
    for s in order {
        let sw = fabric.switch(s);
        let empty = Lft::default();
        let lft = routes.lft(s).unwrap_or(&empty);
        let top = lft.linear_fdb_top().0;
        // Writing to a String cannot fail.
        let _ = writeln!(
            out,
            "Unicast lids [0-{top}] of switch Lid {} guid 0x{:016x} ('{}'):",
            sw.base_lid, sw.guid, sw.name
        );
        for (lid, &port) in lft.ports.iter().enumerate() {
            if port > sw.num_ports {
                continue;
            }
            let lid = lid as u16;
            let _ = write!(out, "0x{lid:04x} {port:03} # ");
            let _ = match fabric.lid_owner(lid) {
                Some(NodeRef::Switch(o)) => {
                    let o = fabric.switch(o);
                    writeln!(out, "Switch portguid 0x{:016x}: '{}'", o.guid, o.name)
                }
                Some(NodeRef::End(e)) => {
                    let ep = fabric.end_port(e);
                    writeln!(out, "{} portguid 0x{:016x}: '{}'", end_kind(e).as_str(), ep.port_guid, ep.name)
                }
                None => writeln!(out, "unknown node and type"),
            };
        }
        let _ = writeln!(out, "{top} lids dumped");
    }
    out
}

impl fmt::Display for DumpFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DumpFormat::OpenSm => "opensm-lfts.dump",
            DumpFormat::Ibroute => "ibroute",
        })
    }
}

// --- Path SLs ----------------------------------------------------------------

/// The first line of a path-SL file.
pub const PATH_SL_HEADER: &str =
    "# ibsm path SLs: <source LID> <first DLID>[-<last DLID>] <SL>; unlisted pairs use SL 0";

/// The comment line before per-hop SL-to-VL tables in a path-SL file.
pub const PATH_SL_VL_HEADER: &str = "# vl <switch LID> <in port> <out port> <VL of SL 0..15 as 16 hex digits>; \
     unlisted tables map every SL to VL 0";

/// Writes the non-zero SLs of `sl` as runs of destination LIDs per source
/// switch (named by its LID), switches in ascending GUID order. Dumps carry
/// no SLs, so engines that use VLs need this next to their tables. Per-hop
/// SL-to-VL tables ([`PathSl::hop_vls`]) follow as `vl` lines, one per
/// (switch, input port, output port) whose table is not all zero.
pub fn write_path_sl(fabric: &RoutingFabric, sl: &PathSl) -> String {
    let mut order: Vec<SwitchId> = fabric.switch_ids().collect();
    order.sort_by_key(|&s| fabric.switch(s).guid);
    let mut out = String::new();
    let _ = writeln!(out, "{PATH_SL_HEADER}");
    for &s in &order {
        let src = fabric.switch(s).base_lid;
        let Some(row) = sl.by_source_switch.get(s.index()) else { continue };
        let mut lid = 0usize;
        while lid < row.len() {
            let v = row[lid];
            let start = lid;
            while lid < row.len() && row[lid] == v {
                lid += 1;
            }
            if v == 0 {
                continue;
            }
            let _ = if lid - start == 1 {
                writeln!(out, "0x{src:04x} 0x{start:04x} {v}")
            } else {
                writeln!(out, "0x{src:04x} 0x{start:04x}-0x{:04x} {v}", lid - 1)
            };
        }
    }
    if let Some(h) = &sl.hop_vls {
        let _ = writeln!(out, "{PATH_SL_VL_HEADER}");
        for s in order {
            let lid = fabric.switch(s).base_lid;
            let ports = fabric.switch(s).num_ports;
            for in_port in 0..=ports {
                for out_port in 0..=ports {
                    let t = h.table(s, in_port, out_port);
                    if t != [0; SL_COUNT] {
                        let hex: String =
                            t.iter().map(|&v| char::from_digit(u32::from(v), 16).unwrap_or('?')).collect();
                        let _ = writeln!(out, "vl 0x{lid:04x} {in_port} {out_port} {hex}");
                    }
                }
            }
        }
    }
    out
}

/// Reads a path-SL file against `fabric`. A source LID stands for the
/// switch that owns it or that its end port hangs off (the SA answers per
/// port; the tables route per source switch). Lines are `<source LID>
/// <DLID>[-<DLID>] <SL>`, or `vl <switch LID> <in port> <out port> <16 hex
/// VLs>` for a per-hop SL-to-VL table (any such line makes
/// [`PathSl::hop_vls`] `Some`; a switch LID that is no switch's, a port
/// the switch lacks, a VL above 14 or a table given twice differently is
/// an error naming the line); `#` starts a comment. A source LID or DLID the
/// fabric lacks, an SL above 15, or two SLs for one (source LID, DLID) is
/// an error naming the line. Two source LIDs of one switch with different
/// SLs towards a DLID (two ports) are both kept: see [`PathSl::more`].
pub fn parse_path_sl(text: &str, file: &str, fabric: &RoutingFabric) -> Result<PathSl, DumpError> {
    let top = usize::from(fabric.max_lid());
    let mut rows: Vec<Vec<u8>> = vec![vec![0; top + 1]; fabric.num_switches()];
    // The line and SL that set each (source LID, DLID), to report
    // contradictions; which (switch, DLID) hold an SL in `rows` already.
    let mut set_by: BTreeMap<(u16, u16), (usize, u8)> = BTreeMap::new();
    let mut primary: BTreeSet<(u32, u16)> = BTreeSet::new();
    let mut more: Vec<(u16, u32, u8)> = Vec::new();
    let mut hop_vls: Option<HopVls> = None;
    let mut vl_set_by: BTreeMap<(u32, u8, u8), usize> = BTreeMap::new();
    for (i, raw) in text.lines().enumerate() {
        let n = i + 1;
        let syntax = |problem: String| DumpError::Syntax { file: file.to_string(), line: n, problem };
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        if words.first() == Some(&"vl") {
            let h = hop_vls.get_or_insert_with(|| HopVls::new(fabric));
            parse_vl_line(&words, fabric, h, &mut vl_set_by, n).map_err(syntax)?;
            continue;
        }
        let [src, dlids, sl] = words[..] else {
            return Err(syntax(format!("expected `<source LID> <DLID>[-<DLID>] <SL>`, found `{}`", clip(line))));
        };
        let src = parse_lid(src).ok_or_else(|| syntax(format!("`{src}` is not a LID")))?;
        let (first, last) = match dlids.split_once('-') {
            Some((a, b)) => (parse_lid(a), parse_lid(b)),
            None => (parse_lid(dlids), parse_lid(dlids)),
        };
        let (Some(first), Some(last)) = (first, last) else {
            return Err(syntax(format!("`{dlids}` is not a LID or LID range")));
        };
        if last < first {
            return Err(syntax(format!("LID range `{dlids}` ends before it starts")));
        }
        let sl: u8 =
            sl.parse().ok().filter(|&v| v <= 15).ok_or_else(|| syntax(format!("`{sl}` is not an SL (0-15)")))?;
        let s = match fabric.lid_owner(src) {
            Some(NodeRef::Switch(s)) => s,
            Some(NodeRef::End(e)) => match fabric.attached_switch(e) {
                Some((s, _)) => s,
                None => return Err(syntax(format!("source LID {src:#06x} hangs off no switch"))),
            },
            None => return Err(syntax(format!("source LID {src:#06x} belongs to no port of the topology"))),
        };
        if usize::from(last) > top {
            return Err(syntax(format!("LID {last:#06x} is past the topology's top LID {top:#06x}")));
        }
        for lid in first..=last {
            match set_by.get(&(src, lid)) {
                Some(&(prev, prev_sl)) if prev_sl != sl => {
                    return Err(syntax(format!(
                        "source LID {src:#06x}, LID {lid:#06x}: SL {sl} here, SL {prev_sl} at line {prev}"
                    )))
                }
                Some(_) => continue,
                None => {
                    set_by.insert((src, lid), (n, sl));
                }
            }
            // Another port of the same switch may use another SL (the SA
            // answers per port): both paths count.
            let slot = &mut rows[s.index()][usize::from(lid)];
            if primary.insert((s.0, lid)) {
                *slot = sl;
            } else if *slot != sl {
                more.push((lid, s.0, sl));
            }
        }
    }
    more.sort_unstable();
    more.dedup();
    Ok(PathSl { by_source_switch: rows, more, hop_vls })
}

/// One `vl <switch LID> <in port> <out port> <16 hex VLs>` line into `h`;
/// `set_by` holds the line that set each (switch, in, out) so far.
fn parse_vl_line(
    words: &[&str],
    fabric: &RoutingFabric,
    h: &mut HopVls,
    set_by: &mut BTreeMap<(u32, u8, u8), usize>,
    line: usize,
) -> Result<(), String> {
    let [_, lid, in_port, out_port, vls] = words[..] else {
        return Err(format!(
            "expected `vl <switch LID> <in port> <out port> <16 hex VLs>`, found `{}`",
            clip(&words.join(" "))
        ));
    };
    let lid_num = parse_lid(lid).ok_or_else(|| format!("`{lid}` is not a LID"))?;
    let Some(NodeRef::Switch(s)) = fabric.lid_owner(lid_num) else {
        return Err(format!("LID {lid_num:#06x} is no switch's LID in the topology"));
    };
    let ports = fabric.switch(s).num_ports;
    let port = |w: &str| -> Result<u8, String> {
        w.parse::<u8>()
            .ok()
            .filter(|&p| p <= ports)
            .ok_or_else(|| format!("`{w}` is not a port of switch {:#018x} (0-{ports})", fabric.switch(s).guid))
    };
    let (i, o) = (port(in_port)?, port(out_port)?);
    let digits: Vec<u32> = vls.chars().filter_map(|c| c.to_digit(16)).collect();
    if vls.chars().count() != SL_COUNT || digits.len() != SL_COUNT || digits.iter().any(|&v| v > 14) {
        return Err(format!("`{}` is not 16 hex digits, one data VL (0-e) per SL", clip(vls)));
    }
    let mut table = [0u8; SL_COUNT];
    for (t, &v) in table.iter_mut().zip(&digits) {
        *t = v as u8;
    }
    if let Some(prev) = set_by.insert((s.0, i, o), line) {
        if h.table(s, i, o) != table {
            return Err(format!("switch LID {lid_num:#06x} ports {i} -> {o}: another table at line {prev}"));
        }
    }
    h.set(s, i, o, table);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::minhop::minhop;
    use crate::testfab;

    const OPENSM: &str = "\
Unicast lids [0-4] of switch Lid 4 guid 0x0000000000200002 ('L0'):
0x0001 003 # Switch portguid 0x0000000000200000: 'S0'
0x0002 001 # Channel Adapter portguid 0x0000000000100001: 'H0_0'
0x0003 004 # unknown node and type
0x0004 000 # Switch portguid 0x0000000000200002: 'L0'
4 lids dumped
";

    const IBROUTE: &str = "\
Unicast lids [0x0-0xe] of switch Lid 7 guid 0x0000000000200004 (spine0):
  Lid  Out   Destination
       Port     Info 
0x0000 255 : (path #0 - illegal port)
0x0001 001 : (Channel Adapter portguid 0x0000000000100001: 'leaf0-h0')
0x0007 000 : (Switch portguid 0x0000000000200004: 'spine0')
0x0008 002 : (path #1 out of 2: portguid 0x0000000000100005)
15 lids dumped 
Unicast lids [0x0-0xe] of switch DR path slid 65535; dlid 65535; 0,1,3 guid 0x0000000000200005 (spine1):
  Lid  Out   Destination
       Port     Info 
0x0001 001 : (Channel Adapter portguid 0x0000000000100001: 'leaf0-h0')
1 valid lids dumped 
";

    #[test]
    fn parses_opensm_text() {
        let d = LftDump::parse(OPENSM, "x").unwrap();
        assert_eq!(d.format, DumpFormat::OpenSm);
        let sw = &d.switches[0];
        assert_eq!((sw.guid, sw.lid, sw.desc.as_str(), sw.top, sw.line), (0x200002, Some(4), "L0", 4, 1));
        assert_eq!(sw.entries.len(), 4);
        assert_eq!(sw.entries[1].port, 1);
        assert_eq!(
            sw.entries[1].dest,
            Some(DumpDest { kind: Some(NodeTypeText::ChannelAdapter), port_guid: 0x100001, desc: "H0_0".into() })
        );
        assert_eq!(sw.entries[2].dest, None);
        let claims = d.lid_claims("x").unwrap();
        assert_eq!(
            claims.iter().map(|c| (c.guid, c.lids.clone())).collect::<Vec<_>>(),
            vec![(0x100001, vec![2]), (0x200000, vec![1]), (0x200002, vec![4])]
        );
    }

    #[test]
    fn parses_ibroute_text() {
        let d = LftDump::parse(IBROUTE, "ib").unwrap();
        assert_eq!(d.format, DumpFormat::Ibroute);
        assert_eq!(d.switches.len(), 2);
        assert_eq!(d.switches[0].entries[0].port, UNROUTED);
        assert_eq!(d.switches[0].entries[3].dest.as_ref().unwrap().port_guid, 0x100005);
        assert_eq!(d.switches[0].entries[3].dest.as_ref().unwrap().kind, None);
        assert_eq!(d.switches[1].lid, None);
        assert_eq!(d.switches[1].desc, "spine1");
        let claims = d.lid_claims("ib").unwrap();
        assert!(claims.iter().any(|c| c.guid == 0x200004 && c.lids == vec![7]));
    }

    #[test]
    fn syntax_errors_name_the_line() {
        let cases: &[(&str, usize, &str)] = &[
            ("Unicast lids [0-4] of switch Lid 4 guid 0x10 ('a'):\n0x0001 3x # x\n4 lids dumped\n", 2, "port"),
            ("Unicast lids [0-4] of switch Lid 4 guid 0x10 ('a'):\n0x0009 003 #\n4 lids dumped\n", 2, "range"),
            ("Unicast lids [0-4] of switch Lid 4 guid 0x10 ('a'):\n0x0002 003 #\n0x0001 003 #\n", 3, "order"),
            ("Unicast lids [0-4] of switch Lid 4 guid 0x10 ('a'):\n0x0001 003 #\n", 2, "truncated"),
            ("0x0001 003 #\n", 1, "outside"),
            ("Unicast lids [0-4] of switch Lid x guid 0x10 ('a'):\n", 1, "not a LID"),
            ("Unicast lids [0-4] of switch Lid 4 guid 0x10 'a':\n", 1, "( )"),
            ("Unicast lids [0-4] of switch Lid 4 guid 0x10 ('a'):\nhello\n", 2, "hello"),
            (
                "Unicast lids [0-4] of switch Lid 4 guid 0x10 ('a'):\n0x0001 003 # Switch portguid 0xzz: 'q'\n",
                2,
                "0xzz",
            ),
            ("Unicast lids [0-4] of switch Lid 4 guid 0x10 ('a'):\n0x0001 003 # x\nmany lids dumped\n", 3, "count"),
        ];
        for &(text, line, needle) in cases {
            match LftDump::parse(text, "f.dump") {
                Err(e @ DumpError::Syntax { line: l, .. }) => {
                    assert_eq!(l, line, "{text:?}: {e}");
                    let msg = e.to_string();
                    assert!(msg.starts_with(&format!("f.dump:{line}: ")), "{msg}");
                    assert!(msg.contains(needle), "{text:?}: {msg}");
                }
                other => panic!("{text:?}: {other:?}"),
            }
        }
        assert_eq!(LftDump::parse("\n\n", "e"), Err(DumpError::Empty { file: "e".into() }));
        let twice = format!("{OPENSM}{OPENSM}");
        assert!(matches!(
            LftDump::parse(&twice, "t"),
            Err(DumpError::DuplicateSwitch { line: 7, guid: 0x200002, first_line: 1, .. })
        ));
    }

    #[test]
    fn conflicting_comments_are_an_error() {
        // LID 4 is the header's switch 0x200002 (line 1) and, by line 5's
        // comment, port 0x100009.
        let text = OPENSM.replace(
            "0x0004 000 # Switch portguid 0x0000000000200002",
            "0x0004 000 # Switch portguid 0x0000000000100009",
        );
        let d = LftDump::parse(&text, "c").unwrap();
        let e = d.lid_claims("c").unwrap_err();
        assert!(
            matches!(
                e,
                DumpError::LidConflict { lid: 4, first: 0x200002, first_line: 1, second: 0x100009, line: 5, .. }
            ),
            "{e:?}"
        );
        assert!(e.to_string().starts_with("c:5: LID 0x0004"), "{e}");
    }

    #[test]
    fn round_trips_minhop_tables() {
        for f in [testfab::FatTree::new(8, 2, 20).build(), testfab::ring(5, 2), testfab::spine_leaf(2, 3, 2, 3)] {
            let r = minhop(&f).unwrap();
            let text = write_opensm_dump(&f, &r);
            let d = LftDump::parse(&text, "rt").unwrap();
            assert_eq!(d.switches.len(), f.num_switches());
            let back = d.to_routes(&f, "rt").unwrap();
            assert_eq!(back, r);
            assert_eq!(write_opensm_dump(&f, &back), text);
            // Every LID of every node is claimed by its GUID.
            let claims = d.lid_claims("rt").unwrap();
            let total: usize = claims.iter().map(|c| c.lids.len()).sum();
            let lids = (1..=f.max_lid()).filter(|&l| f.lid_owner(l).is_some()).count();
            assert_eq!(total, lids);
        }
    }

    #[test]
    fn path_sls_round_trip_and_are_checked() {
        let f = testfab::ring(4, 2);
        let top = usize::from(f.max_lid()) + 1;
        let mut rows = vec![vec![0u8; top]; f.num_switches()];
        rows[1][3..7].fill(2);
        rows[2][5] = 15;
        let sl = PathSl::per_switch(rows);
        let text = write_path_sl(&f, &sl);
        assert!(text.starts_with(PATH_SL_HEADER));
        assert_eq!(text.lines().count(), 3, "{text}");
        assert_eq!(parse_path_sl(&text, "p", &f).unwrap(), sl);

        // An end port's LID stands for its switch.
        let e = f.end_port_ids().next().unwrap();
        let (s, _) = f.attached_switch(e).unwrap();
        let host = f.end_port(e).base_lid;
        let p = parse_path_sl(&format!("{host} 0x0003 4 # comment\n"), "p", &f).unwrap();
        assert_eq!(p.sl(s, 3), Some(4));

        let bad = |t: &str| parse_path_sl(t, "p", &f).unwrap_err().to_string();
        assert!(bad("1 2\n").starts_with("p:1: expected"));
        assert!(bad("\n1 2 16\n").starts_with("p:2: `16` is not an SL"));
        assert!(bad("0x7777 2 1\n").contains("belongs to no port"));
        assert!(bad("1 5-3 1\n").contains("ends before"));
        assert!(bad("1 0x9999 1\n").contains("past the topology's top LID"));
        let sw_lid = f.switch(s).base_lid;
        let e2 = bad(&format!("{host} 3 1\n{host} 3 2\n"));
        assert!(e2.starts_with("p:2: source LID") && e2.contains("SL 1 at line 1"), "{e2}");
        // Two ports of one switch with different SLs: both are kept.
        let two = parse_path_sl(&format!("{host} 3 1\n{sw_lid} 3 2\n{sw_lid} 4 1\n"), "p", &f).unwrap();
        assert_eq!(two.sl(s, 3), Some(1));
        assert_eq!(two.more, vec![(3, s.0, 2)]);
        assert_eq!(two.more_for(3).collect::<Vec<_>>(), vec![(s.0, 2)]);
        assert_eq!(two.more_for(4).count(), 0);
    }

    #[test]
    fn hop_vls_round_trip_as_vl_lines() {
        let f = testfab::grid(&[5, 3], &[true, false], 1, 1);
        let sl = crate::dor::dor(&f, &crate::EngineOptions { max_vls: 2, ..Default::default() }).unwrap().sl.unwrap();
        let h = sl.hop_vls.as_ref().expect("a 5-ring has a dateline");
        let text = write_path_sl(&f, &sl);
        let vl_lines: Vec<&str> = text.lines().filter(|l| l.starts_with("vl ")).collect();
        assert!(text.contains(PATH_SL_VL_HEADER));
        // Only tables that are not all zero: every table is the same for
        // every input port, so count per (switch, ring port) x inputs.
        let nonzero: usize = f
            .switch_ids()
            .map(|s| {
                let p = f.switch(s).num_ports;
                (0..=p).flat_map(|i| (0..=p).map(move |o| (i, o))).filter(|&(i, o)| h.table(s, i, o) != [0; 16]).count()
            })
            .sum();
        assert!(nonzero > 0);
        assert_eq!(vl_lines.len(), nonzero);
        assert!(vl_lines.iter().all(|l| l.rsplit(' ').next().unwrap().chars().all(|c| c == '0' || c == '1')));
        let back = parse_path_sl(&text, "p", &f).unwrap();
        assert_eq!(back, sl);

        // Old files (no vl lines) still parse, without tables.
        let old: String = text.lines().filter(|l| !l.starts_with("vl ")).map(|l| format!("{l}\n")).collect();
        assert_eq!(parse_path_sl(&old, "p", &f).unwrap().hop_vls, None);

        let s0 = f.switch_ids().next().unwrap();
        let lid = f.switch(s0).base_lid;
        let host = f.end_port(f.end_port_ids().next().unwrap()).base_lid;
        let bad = |t: &str| parse_path_sl(t, "q", &f).unwrap_err().to_string();
        let ones = "0101010101010101";
        assert!(parse_path_sl(&format!("vl {lid} 0 1 {ones}\n"), "q", &f).unwrap().hop_vl(s0, 0, 1, 1) == 1);
        assert!(bad(&format!("1 1 1\nvl {lid} 0 1\n")).starts_with("q:2: expected `vl"));
        assert!(bad(&format!("vl {host} 0 1 {ones}\n")).contains("no switch's LID"));
        assert!(bad(&format!("vl {lid} 0 99 {ones}\n")).contains("`99` is not a port"));
        assert!(bad(&format!("vl {lid} 0 1 010101010101010\n")).contains("not 16 hex digits"));
        assert!(bad(&format!("vl {lid} 0 1 f101010101010101\n")).contains("not 16 hex digits"));
        let twice = bad(&format!("vl {lid} 0 1 {ones}\n# x\nvl {lid} 0 1 1{}\n", &ones[1..]));
        assert!(twice.starts_with("q:3: switch LID") && twice.contains("line 1"), "{twice}");
    }
}
