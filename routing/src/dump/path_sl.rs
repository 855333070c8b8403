//! The path-SL file: the SL of every (source switch, DLID) path, and the
//! per-hop SL-to-VL tables, next to a dump that carries no SLs.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

use super::text::{clip, parse_lid};
use super::DumpError;
use crate::fabric::{NodeRef, RoutingFabric, SwitchId};
use crate::lft::{HopVls, PathSl, SlRows, SL_COUNT};

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
    Ok(PathSl { by_source_switch: SlRows::per_switch(rows), more, hop_vls })
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
    use crate::testfab;

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
