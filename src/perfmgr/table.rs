//! Every polled port's every counter as one tab-separated table: the full
//! detail `/dump/port-counters` serves while `/metrics` exports only what
//! `[perfmgr] port_series` chooses (a scrape of every port of a large
//! fabric is more than a Prometheus server should take every 15 s).

use std::fmt::Write as _;

use super::core::PerfSnapshot;
use super::counters::Counter;

/// One header line, then one line per port in GUID and port order: the
/// node GUID, the port, the node description (tabs and line breaks as
/// spaces), then each counter's total in the IBA's name and unit (data
/// in 4-byte words, as PortXmitData counts), `-` for one never read.
pub fn port_counters(snap: &PerfSnapshot) -> String {
    let mut out = String::with_capacity(64 + snap.ports.len() * 160);
    out.push_str("node_guid\tport\tnode_desc");
    for c in Counter::ALL {
        out.push('\t');
        out.push_str(c.iba_name());
    }
    out.push('\n');
    let mut order: Vec<usize> = (0..snap.ports.len()).collect();
    order.sort_by_key(|&i| (snap.ports[i].node_guid.0, snap.ports[i].port));
    for i in order {
        let p = &snap.ports[i];
        let desc: String = p.node_desc.chars().map(|c| if c == '\t' || c.is_control() { ' ' } else { c }).collect();
        let _ = write!(out, "{}\t{}\t{}", p.node_guid, p.port, desc);
        for c in Counter::ALL {
            match p.totals[c.index()] {
                Some(v) => {
                    let _ = write!(out, "\t{v}");
                }
                None => out.push_str("\t-"),
            }
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;
    use crate::perfmgr::core::PortTotals;
    use crate::perfmgr::counters::COUNTERS;
    use crate::types::Guid;

    #[test]
    fn one_line_per_port_in_guid_order_every_counter_named() {
        let mut a = [None; COUNTERS];
        a[Counter::SymbolErrors.index()] = Some(7);
        a[Counter::XmitData.index()] = Some(1 << 40);
        let ports = vec![
            PortTotals { node_guid: Guid(0x20), node_desc: Arc::from("leaf\t2\nx"), port: 3, totals: a },
            PortTotals { node_guid: Guid(0x10), node_desc: Arc::from("host"), port: 1, totals: [Some(0); COUNTERS] },
        ];
        let t = port_counters(&PerfSnapshot { ports, ..Default::default() });
        let lines: Vec<&str> = t.lines().collect();
        assert_eq!(lines.len(), 3);
        let header: Vec<&str> = lines[0].split('\t').collect();
        assert_eq!(header.len(), 3 + COUNTERS);
        assert_eq!((header[3], header[16]), ("SymbolErrorCounter", "PortXmitData"));
        assert!(lines[1].starts_with("0x0000000000000010\t1\thost\t0\t"), "{}", lines[1]);
        let leaf: Vec<&str> = lines[2].split('\t').collect();
        assert_eq!(leaf.len(), 3 + COUNTERS, "a tab in the description does not add a column");
        assert_eq!((leaf[2], leaf[3], leaf[4], leaf[16]), ("leaf 2 x", "7", "-", "1099511627776"));
    }
}
