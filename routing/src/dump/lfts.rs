//! The LFT dump: OpenSM's `opensm-lfts.dump` read and written, `ibroute`
//! output read (see [`super`] for both formats).

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};

use super::text::{clip, parse_lid, parse_num};
use super::DumpError;
use crate::fabric::{EndPortId, NodeRef, RoutingFabric, SwitchId};
use crate::lft::{Lft, Routes, UNROUTED};

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
}
