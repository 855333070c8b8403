//! Reading what `saquery` and the infiniband-diags print, for the SA
//! interop tests.
//!
//! saquery prints each record as a header at column 0 (`NodeRecord dump:`,
//! `SA ClassPortInfo:`, `IsSM ports`) followed by indented
//! `name.......value` lines (PortInfoRecord's embedded PortInfo as
//! `Name:.....value`, exactly as smpquery prints a PortInfo, both being
//! libibmad's dump). Lines that are not of that shape (capability names,
//! `RID`, the LFT's `lid<TAB>port` rows, the `SL: 0| 1|` tables) are kept
//! in order for the record's table readers.

#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet};

/// One record as saquery printed it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    /// The header without a trailing ` dump:` / `:`, e.g. `NodeRecord`.
    pub kind: String,
    /// `name....value` lines, in order (names are not unique: a
    /// VLArbTableRecord repeats `VL`/`Weight`, so tables use `lines`).
    pub fields: Vec<(String, String)>,
    /// Every other non-empty line, trimmed.
    pub lines: Vec<String>,
}

impl Record {
    /// The first field called `name`.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.fields.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }

    /// The field `name`, which must be there.
    pub fn field(&self, name: &str) -> &str {
        self.get(name).unwrap_or_else(|| panic!("{} has no field `{name}`: {self:#?}", self.kind))
    }

    /// The field `name` read as a number (decimal or 0x-hex).
    pub fn num(&self, name: &str) -> u64 {
        let v = self.field(name);
        parse_num(v).unwrap_or_else(|| panic!("{}.{name} = `{v}` is not a number", self.kind))
    }
}

/// Splits a `name....value` (or `Name:.....value`) line; None for any
/// other line. The name ends at the first run of two dots (or at a colon
/// followed by a dot).
pub fn field_line(line: &str) -> Option<(String, String)> {
    let t = line.trim();
    // `Name:.0` has a single dot after the colon.
    let at = match (t.find(".."), t.find(":.")) {
        (Some(a), Some(b)) => a.min(b),
        (a, b) => a.or(b)?,
    };
    if at == 0 {
        return None;
    }
    let name = t[..at].trim_end_matches(':').trim();
    let value = t[at..].trim_start_matches(':').trim_start_matches('.').trim();
    Some((name.to_string(), value.to_string()))
}

/// `0x1A`, `26`, `0x000000a1`: a number in either base.
pub fn parse_num(s: &str) -> Option<u64> {
    let s = s.trim();
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(hex) => u64::from_str_radix(hex, 16).ok(),
        None => s.parse().ok(),
    }
}

/// Every record of a saquery output, in order.
pub fn records(text: &str) -> Vec<Record> {
    let mut out: Vec<Record> = Vec::new();
    for raw in text.lines() {
        if raw.trim().is_empty() || raw.starts_with("ibwarn:") {
            continue;
        }
        if !raw.starts_with([' ', '\t']) {
            let kind = raw.trim().trim_end_matches(':').trim_end_matches(" dump").trim().to_string();
            out.push(Record { kind, fields: Vec::new(), lines: Vec::new() });
            continue;
        }
        let Some(rec) = out.last_mut() else { continue };
        match field_line(raw) {
            Some(f) => rec.fields.push(f),
            None => rec.lines.push(raw.trim().to_string()),
        }
    }
    out
}

/// The `n| n| n|` cells after `label:` on the record's line starting
/// with `label` (the `index`th such line).
fn bar_row(rec: &Record, label: &str, index: usize) -> Vec<u64> {
    let line = rec
        .lines
        .iter()
        .filter(|l| l.split(':').next().map(str::trim) == Some(label))
        .nth(index)
        .unwrap_or_else(|| panic!("{} has no {index}th `{label}:` row: {rec:#?}", rec.kind));
    let (_, cells) = line.split_once(':').unwrap();
    cells
        .split('|')
        .map(str::trim)
        .filter(|c| !c.is_empty())
        .map(|c| parse_num(c).unwrap_or_else(|| panic!("`{c}` in `{line}`")))
        .collect()
}

/// An SL2VLTableRecord's VL for each SL 0..15.
pub fn sl2vl(rec: &Record) -> Vec<u8> {
    bar_row(rec, "VL", 0).into_iter().map(|v| v as u8).collect()
}

/// A VLArbTableRecord's 32 (VL, weight) entries.
pub fn vlarb(rec: &Record) -> Vec<(u8, u8)> {
    let mut out = Vec::new();
    for i in 0..2 {
        let vls = bar_row(rec, "VL", i);
        let weights = bar_row(rec, "Weight", i);
        out.extend(vls.into_iter().zip(weights).map(|(v, w)| (v as u8, w as u8)));
    }
    out
}

/// An LFT Record's (LID, port) rows.
pub fn lft(rec: &Record) -> BTreeMap<u16, u8> {
    rec.lines
        .iter()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let lid = w.next()?.parse().ok()?;
            let port = w.next()?.parse().ok()?;
            w.next().is_none().then_some((lid, port))
        })
        .collect()
}

/// A PKeyTableRecord's 32 P_Keys.
pub fn pkeys(rec: &Record) -> Vec<u16> {
    rec.lines
        .iter()
        .filter(|l| l.starts_with("0x"))
        .flat_map(|l| l.split_whitespace().map(|w| parse_num(w).unwrap() as u16))
        .collect()
}

/// A GUIDInfo Record's eight GUIDs.
pub fn guids(rec: &Record) -> Vec<u64> {
    (0..8).map(|i| rec.num(&format!("GUID {i}"))).collect()
}

// ---------------------------------------------------------------------------
// The diags

/// One port line of `ibnetdiscover -p`:
/// `SW     2  4 0x0000000000200000 4x SDR - SW     6  1 0x0000000000200003 ( 'leaf0' - 'spine0' )`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PortLine {
    pub switch: bool,
    pub lid: u16,
    pub port: u8,
    pub guid: u64,
    pub name: String,
    /// The far end: switch, LID, port, GUID, name.
    pub peer: Option<(bool, u16, u8, u64, String)>,
}

pub fn ibnetdiscover_ports(text: &str) -> Vec<PortLine> {
    let mut out = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 4 || !matches!(f[0], "CA" | "SW") {
            continue;
        }
        let num = |s: &str| s.parse::<u64>().unwrap_or_else(|_| panic!("`{s}` in `{line}`"));
        let guid = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
        let names: Vec<&str> = line.split('\'').skip(1).step_by(2).collect();
        let peer = f.iter().position(|&w| w == "-").and_then(|d| {
            let p = &f[d + 1..];
            (p.len() >= 4 && matches!(p[0], "CA" | "SW")).then(|| {
                (p[0] == "SW", num(p[1]) as u16, num(p[2]) as u8, guid(p[3]), names.get(1).unwrap_or(&"").to_string())
            })
        });
        out.push(PortLine {
            switch: f[0] == "SW",
            lid: num(f[1]) as u16,
            port: num(f[2]) as u8,
            guid: guid(f[3]),
            name: names.first().unwrap_or(&"").to_string(),
            peer,
        });
    }
    out
}

/// `ibroute <lid>`: `0x0005 002 : (Channel Adapter portguid ...)` rows.
pub fn ibroute_lft(text: &str) -> BTreeMap<u16, u8> {
    text.lines()
        .filter_map(|l| {
            let mut w = l.split_whitespace();
            let lid = u16::from_str_radix(w.next()?.strip_prefix("0x")?, 16).ok()?;
            let port = w.next()?.parse().ok()?;
            (w.next()? == ":").then_some((lid, port))
        })
        .collect()
}

/// `ibroute -M <lid>`: the MLIDs it lists (`0xc000 ...` rows).
pub fn ibroute_mlids(text: &str) -> Vec<u16> {
    text.lines()
        .filter_map(|l| u16::from_str_radix(l.split_whitespace().next()?.strip_prefix("0x")?, 16).ok())
        .filter(|&m| m >= 0xC000)
        .collect()
}

/// `ibroute -M <lid>` in its default column form: for each MLID row, the
/// ports whose column holds an `x`.
///
/// ```text
/// Multicast mlids [0xc000-0xc3ff] of switch Lid 10 guid 0x0000000000200002 (sw2):
///             0                   1                   2
///      Ports: 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0
///  MLid
/// 0xc000                            x           x
/// 2 valid mlids dumped
/// ```
///
/// Each port takes two columns from port 0 on; the `Ports:` line carries
/// the units digit (the line above it the tens), which is checked against
/// every column read, so a changed layout fails loudly instead of shifting
/// ports.
pub fn ibroute_mft(text: &str) -> BTreeMap<u16, BTreeSet<u8>> {
    let header = text
        .lines()
        .find(|l| l.trim_start().starts_with("Ports:"))
        .unwrap_or_else(|| panic!("no `Ports:` line in ibroute -M output:\n{text}"));
    let after = header.find("Ports:").unwrap() + "Ports:".len();
    let first = after + header[after..].find(|c: char| c.is_ascii_digit()).expect("port 0 in the Ports: line");
    let units = header.as_bytes();
    let mut out = BTreeMap::new();
    for line in text.lines() {
        let Some(first_word) = line.split_whitespace().next() else { continue };
        let Some(hex) = first_word.strip_prefix("0x") else { continue };
        let mlid = u16::from_str_radix(hex, 16).unwrap_or_else(|_| panic!("`{line}`: not an MLID row"));
        let start = line.find(first_word).unwrap() + first_word.len();
        let mut ports = BTreeSet::new();
        for (col, ch) in line.char_indices().skip_while(|&(i, _)| i < start) {
            match ch {
                ' ' => {}
                'x' => {
                    assert!(col >= first && (col - first).is_multiple_of(2), "`{line}`: an `x` between port columns");
                    let port = (col - first) / 2;
                    assert_eq!(
                        units.get(col).map(|&b| b as char),
                        Some(char::from_digit((port % 10) as u32, 10).unwrap()),
                        "`{line}`: column {col} is not port {port}'s in `{header}`"
                    );
                    ports.insert(u8::try_from(port).expect("a port number"));
                }
                other => panic!("`{line}`: unexpected `{other}` in an MLID row"),
            }
        }
        out.insert(mlid, ports);
    }
    out
}

/// MFTs as read with `ibroute -M`: switch LID -> MLID -> output ports.
pub type Mfts = BTreeMap<u16, BTreeMap<u16, BTreeSet<u8>>>;

/// Floods a packet to `mlid` from each member (a CA port GUID) through
/// the switches' MFTs over the cables `ibnetdiscover -p` lists, as the
/// switches would forward it: out of every port of the entry but the one
/// it came in by (port 0 is the switch itself). Returns what is wrong:
/// a flood that enters a switch twice (a loop, or two paths), reaches a
/// non-member or a member twice, misses a member, or leaves by an
/// uncabled port; and switches holding an entry for `mlid` that no flood
/// from a member passes through (with no members, any entry at all).
pub fn mcast_flood_errors(ports: &[PortLine], mfts: &Mfts, mlid: u16, members: &BTreeSet<u64>) -> Vec<String> {
    let mut errors = Vec::new();
    let cable = |lid: u16, port: u8| {
        ports.iter().find(|p| p.switch && p.lid == lid && p.port == port).and_then(|p| p.peer.clone())
    };
    let entry = |lid: u16| mfts.get(&lid).and_then(|t| t.get(&mlid)).cloned().unwrap_or_default();
    let mut visited = BTreeSet::new();
    for &from in members {
        let Some(ca) = ports.iter().find(|p| !p.switch && p.guid == from) else {
            errors.push(format!("member {from:#x} is no CA port of the fabric"));
            continue;
        };
        let Some((true, sw, in_port, _, _)) = ca.peer.clone() else {
            errors.push(format!("member {from:#x} is not cabled to a switch"));
            continue;
        };
        let mut entered = BTreeSet::new();
        let mut reached = BTreeSet::new();
        let mut queue = vec![(sw, in_port)];
        while let Some((sw, in_port)) = queue.pop() {
            if !entered.insert(sw) {
                errors.push(format!("MLID {mlid:#06x}: the flood from {from:#x} enters switch LID {sw} twice"));
                continue;
            }
            visited.insert(sw);
            for out in entry(sw) {
                if out == 0 || out == in_port {
                    continue;
                }
                match cable(sw, out) {
                    None => errors.push(format!(
                        "MLID {mlid:#06x}: switch LID {sw} forwards out of port {out}, which has no cable"
                    )),
                    Some((true, lid, port, _, _)) => queue.push((lid, port)),
                    Some((false, _, _, guid, name)) => {
                        if !members.contains(&guid) {
                            errors.push(format!(
                                "MLID {mlid:#06x}: the flood from {from:#x} reaches non-member {guid:#x} ({name})"
                            ));
                        } else if !reached.insert(guid) {
                            errors.push(format!("MLID {mlid:#06x}: the flood from {from:#x} reaches {guid:#x} twice"));
                        }
                    }
                }
            }
        }
        let others: BTreeSet<u64> = members.iter().copied().filter(|&g| g != from).collect();
        for missed in others.difference(&reached) {
            errors.push(format!("MLID {mlid:#06x}: the flood from {from:#x} misses member {missed:#x}"));
        }
    }
    for (&sw, table) in mfts {
        if table.get(&mlid).is_some_and(|p| !p.is_empty()) && !visited.contains(&sw) {
            errors.push(format!(
                "MLID {mlid:#06x}: switch LID {sw} holds {:?}, which no flood from a member passes",
                table[&mlid]
            ));
        }
    }
    errors
}

/// `smpquery sl2vl <lid> [port]` rows: (in port, out port) -> VL per SL.
pub fn smp_sl2vl(text: &str) -> BTreeMap<(u8, u8), Vec<u8>> {
    text.lines()
        .filter_map(|l| {
            let rest = l.strip_prefix("ports: in")?;
            let (ports, cells) = rest.split_once(':')?;
            let (i, o) = ports.split_once(", out")?;
            let vls = cells.split('|').map(str::trim).filter(|c| !c.is_empty()).map(|c| c.parse().unwrap()).collect();
            Some(((i.trim().parse().ok()?, o.trim().parse().ok()?), vls))
        })
        .collect()
}

/// (VL, weight) entries of a VL arbitration table.
pub type VlArbTable = Vec<(u8, u8)>;

/// `smpquery vlarb <lid> <port>`: the low and the high table, for the
/// entries the port has.
pub fn smp_vlarb(text: &str) -> (VlArbTable, VlArbTable) {
    let row = |l: &str| -> Vec<u8> {
        l.split_once(':')
            .unwrap()
            .1
            .split('|')
            .map(str::trim)
            .filter(|c| !c.is_empty())
            .map(|c| parse_num(c).unwrap() as u8)
            .collect()
    };
    let vls: Vec<Vec<u8>> = text.lines().filter(|l| l.starts_with("VL")).map(row).collect();
    let ws: Vec<Vec<u8>> = text.lines().filter(|l| l.starts_with("WEIGHT")).map(row).collect();
    assert_eq!((vls.len(), ws.len()), (2, 2), "vlarb output: {text}");
    let zip = |i: usize| vls[i].iter().copied().zip(ws[i].iter().copied()).collect();
    (zip(0), zip(1))
}

/// `   0: 0xffff 0x0000 ...` rows of `smpquery pkeys` / `smpquery GI`.
pub fn smp_words(text: &str) -> Vec<u64> {
    text.lines()
        .filter_map(|l| {
            let (at, rest) = l.split_once(':')?;
            at.trim().parse::<u32>().ok()?;
            Some(rest.split_whitespace().map(|w| parse_num(w).unwrap()).collect::<Vec<_>>())
        })
        .flatten()
        .collect()
}

/// One hop of `ibtracert <slid> <dlid>`: `[out] -> switch port {guid}[in] lid 2-2 "leaf0"`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hop {
    pub out_port: u8,
    pub switch: bool,
    pub guid: u64,
    pub in_port: u8,
    pub lid: u16,
}

pub fn ibtracert_hops(text: &str) -> Vec<Hop> {
    text.lines()
        .filter_map(|l| {
            let l = l.trim();
            let out_port = l.strip_prefix('[')?.split(']').next()?.parse().ok()?;
            let (_, rest) = l.split_once("-> ")?;
            let switch = rest.starts_with("switch");
            let guid =
                u64::from_str_radix(rest.split('{').nth(1)?.split('}').next()?.trim_start_matches("0x"), 16).ok()?;
            let in_port = rest.split("}[").nth(1)?.split(']').next()?.parse().ok()?;
            let lid = rest.split(" lid ").nth(1)?.split('-').next()?.parse().ok()?;
            Some(Hop { out_port, switch, guid, in_port, lid })
        })
        .collect()
}

/// `sminfo: sm lid 1 sm guid 0x100001, activity count 349 priority 0 state 3 SMINFO_MASTER`:
/// (lid, guid, activity count, priority, state).
pub fn sminfo(text: &str) -> Option<(u16, u64, u64, u8, u8)> {
    let line = text.lines().find(|l| l.starts_with("sminfo: sm lid"))?;
    let words: Vec<&str> = line.split_whitespace().map(|w| w.trim_end_matches(',')).collect();
    let after = |key: &str| words.iter().position(|&w| w == key).and_then(|i| words.get(i + 1)).copied();
    Some((
        after("lid")?.parse().ok()?,
        parse_num(after("guid")?)?,
        after("count")?.parse().ok()?,
        after("priority")?.parse().ok()?,
        after("state")?.parse().ok()?,
    ))
}

#[cfg(test)]
mod reader_tests {
    use super::*;

    #[test]
    fn saquery_records_and_tables_are_read() {
        let text = "NodeRecord dump:\n\t\tlid.....................5\n\t\tNodeDescription.........leaf0-h1\n\
                    SL2VLTableRecord dump:\n\t\tLID........................2\n\
                    \t\tSL: 0| 1| 2| 3| 4| 5| 6| 7| 8| 9|10|11|12|13|14|15|\n\
                    \t\tVL: 0| 1| 2| 3| 4| 5| 6| 7| 8| 9|10|11|12|13|14| 7|\n\
                    PortInfoRecord dump:\n\tRID\n\t\tEndPortLid..............5\n\tPortInfo dump:\n\
                    \t\tCapMask:.........................0x50c048\n\t\t\t\tIsTrapSupported\n\
                    LFT Record dump:\n\t\tLID........................2\n\t\tLFT:\n\t\tLID\tPort Number\n\t\t0\t255\n\t\t1\t1\n";
        let r = records(text);
        assert_eq!(
            r.iter().map(|r| r.kind.as_str()).collect::<Vec<_>>(),
            ["NodeRecord", "SL2VLTableRecord", "PortInfoRecord", "LFT Record"]
        );
        assert_eq!((r[0].num("lid"), r[0].field("NodeDescription")), (5, "leaf0-h1"));
        assert_eq!(sl2vl(&r[1])[15], 7);
        assert_eq!(r[2].num("CapMask"), 0x50c048);
        assert!(r[2].lines.contains(&"IsTrapSupported".to_string()));
        assert_eq!(lft(&r[3]).into_iter().collect::<Vec<_>>(), [(0, 255), (1, 1)]);
        assert_eq!(
            field_line("\t\tLifeTimeValue/PortStateChange/OpSL2VL...0x90"),
            Some(("LifeTimeValue/PortStateChange/OpSL2VL".into(), "0x90".into()))
        );
        assert_eq!(field_line("\t\tNodeDescription........."), Some(("NodeDescription".into(), "".into())));
        assert_eq!(
            field_line("McastPkeyTrapSuppressionEnabled:.0"),
            Some(("McastPkeyTrapSuppressionEnabled".into(), "0".into()))
        );
    }

    #[test]
    fn diags_are_read() {
        let p = ibnetdiscover_ports(
            "SW     2  4 0x0000000000200000 4x SDR - SW     6  1 0x0000000000200003 ( 'leaf0' - 'spine0' )\n\
             SW     2  8 0x0000000000200000 4x SDR                                    'leaf0'\n",
        );
        assert_eq!(p[0].peer, Some((true, 6, 1, 0x200003, "spine0".into())));
        assert_eq!((p[1].port, p[1].peer.is_none(), p[1].name.as_str()), (8, true, "leaf0"));
        let hops = ibtracert_hops("From ca {0x0000000000100002} portnum 1 lid 5-5 \"leaf0-h1\"\n[1] -> switch port {0x0000000000200000}[2] lid 2-2 \"leaf0\"\n[1] -> ca port {0x000000000010000d}[1] lid 12-12 \"leaf2-h0\"\n");
        assert_eq!(hops.len(), 2);
        assert_eq!(hops[0], Hop { out_port: 1, switch: true, guid: 0x200000, in_port: 2, lid: 2 });
        assert!(!hops[1].switch);
        assert_eq!(
            ibroute_lft("0x0005 002 : (Channel Adapter portguid 0x1: 'x')\n14 valid lids dumped\n").get(&5),
            Some(&2)
        );
        assert_eq!(
            sminfo("sminfo: sm lid 1 sm guid 0x100001, activity count 349 priority 0 state 3 SMINFO_MASTER"),
            Some((1, 0x100001, 349, 0, 3))
        );
        let sl = smp_sl2vl("ports: in  1, out  4: | 0| 1| 2| 3| 4| 5| 6| 7| 8| 9|10|11|12|13|14| 7|\n");
        assert_eq!(sl[&(1, 4)][15], 7);
        assert_eq!(smp_words("   0: 0xffff 0x0000\n64 pkeys capacity for this port\n"), [0xffff, 0]);
    }

    #[test]
    fn ibroute_multicast_columns_are_read() {
        // Real `ibroute -M` output of a 20-port ibsim switch (ports 11 and 17).
        let text = "Multicast mlids [0xc000-0xc3ff] of switch Lid 10 guid 0x0000000000200002 (sw2):\n            0                   1                   2 \n     Ports: 0 1 2 3 4 5 6 7 8 9 0 1 2 3 4 5 6 7 8 9 0 \n MLid\n0xc000                            x           x       \n0xc006                                        x       \n2 valid mlids dumped \n";
        let t = ibroute_mft(text);
        assert_eq!(t[&0xc000], BTreeSet::from([11, 17]));
        assert_eq!(t[&0xc006], BTreeSet::from([17]));
        assert_eq!(t.len(), 2);
        let small = "Multicast mlids [0xc000-0xc3ff] of switch Lid 5 guid 0x0000000000200000 (Switch1):\n     Ports: 0 1 2 3 4 5 6 7 8 \n MLid\n0xc001          x x           \n5 valid mlids dumped \n";
        assert_eq!(ibroute_mft(small)[&0xc001], BTreeSet::from([2, 3]));
        assert!(ibroute_mft("     Ports: 0 1 2 \n MLid\n0 valid mlids dumped \n").is_empty());

        // Two switches (LIDs 1, 2) cabled 1/3 - 2/3, hosts A (0xa) on 1/1,
        // B (0xb) on 2/1, C (0xc) on 2/2.
        let ports = ibnetdiscover_ports(
            "SW 1 1 0x100 4x SDR - CA 3 1 0xa ( 's1' - 'A' )\nSW 1 3 0x100 4x SDR - SW 2 3 0x200 ( 's1' - 's2' )\n\
             SW 2 3 0x200 4x SDR - SW 1 3 0x100 ( 's2' - 's1' )\nSW 2 1 0x200 4x SDR - CA 4 1 0xb ( 's2' - 'B' )\n\
             SW 2 2 0x200 4x SDR - CA 5 1 0xc ( 's2' - 'C' )\nCA 3 1 0xa 4x SDR - SW 1 1 0x100 ( 'A' - 's1' )\n\
             CA 4 1 0xb 4x SDR - SW 2 1 0x200 ( 'B' - 's2' )\nCA 5 1 0xc 4x SDR - SW 2 2 0x200 ( 'C' - 's2' )\n",
        );
        let mfts = |a: &[u8], b: &[u8]| -> Mfts {
            BTreeMap::from([
                (1, BTreeMap::from([(0xc000, a.iter().copied().collect())])),
                (2, BTreeMap::from([(0xc000, b.iter().copied().collect())])),
            ])
        };
        let ab = BTreeSet::from([0xa, 0xb]);
        assert!(mcast_flood_errors(&ports, &mfts(&[1, 3], &[1, 3]), 0xc000, &ab).is_empty());
        let e = mcast_flood_errors(&ports, &mfts(&[1, 3], &[1, 2, 3]), 0xc000, &ab);
        assert!(e.iter().any(|e| e.contains("non-member 0xc")), "{e:?}");
        let e = mcast_flood_errors(&ports, &mfts(&[1], &[1, 3]), 0xc000, &ab);
        assert!(e.iter().any(|e| e.contains("misses member 0xb")), "{e:?}");
        let e = mcast_flood_errors(&ports, &mfts(&[1, 3, 4], &[1, 3]), 0xc000, &ab);
        assert!(e.iter().any(|e| e.contains("no cable")), "{e:?}");
        let e = mcast_flood_errors(&ports, &mfts(&[], &[1, 2]), 0xc000, &BTreeSet::from([0xa]));
        assert!(e.iter().any(|e| e.contains("no flood")), "{e:?}");
    }
}
