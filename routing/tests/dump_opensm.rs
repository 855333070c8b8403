//! OpenSM's own dumps (fixtures/lfts, made by fixtures/lfts/capture.sh on
//! ibsim): parsed, checked against the fabric they came from, written back
//! byte for byte, and refused when they do not match.

use std::collections::BTreeMap;

use ibsm_routing::dump::{write_opensm_dump, DumpError, DumpFormat, LftDump};
use ibsm_routing::fabric::{EndPort, PortEnd, RoutingFabric, Switch};
use ibsm_routing::{analyze, validate, AnalysisOptions, UNROUTED};

fn fixture(name: &str) -> String {
    let path = format!("{}/../fixtures/lfts/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// fixtures/lfts/ft2-r4.net by hand, with ibsim's GUIDs (switches from
/// 0x200000 in file order, CA i node GUID 0x100000 + 2i, port GUID + 1)
/// and the LIDs `lids` gives each GUID. `cut` drops leaf3[4] - spine1[4];
/// `drop_host` leaves out leaf3-h1.
fn ft2_r4(lids: &BTreeMap<u64, u16>, cut: bool, drop_host: bool) -> RoutingFabric {
    let lid = |g: u64| lids.get(&g).copied().unwrap_or(0);
    let mut b = RoutingFabric::builder();
    let names = ["leaf0", "leaf1", "leaf2", "leaf3", "spine0", "spine1"];
    let sw: Vec<_> = names
        .iter()
        .enumerate()
        .map(|(i, n)| {
            let g = 0x200000 + i as u64;
            b.add_switch(Switch::new(g, 4, lid(g)).with_name(*n)).unwrap()
        })
        .collect();
    for leaf in 0..4 {
        for h in 0..2u8 {
            if drop_host && leaf == 3 && h == 1 {
                continue;
            }
            let node = 0x100000 + 2 * (2 * leaf as u64 + u64::from(h));
            let e = b
                .add_end_port(EndPort::new(node, node + 1, 1, lid(node + 1)).with_name(format!("leaf{leaf}-h{h}")))
                .unwrap();
            b.connect(PortEnd::End(e), PortEnd::Switch(sw[leaf], 1 + h)).unwrap();
        }
        for spine in 0..2 {
            if cut && leaf == 3 && spine == 1 {
                continue;
            }
            b.connect(PortEnd::Switch(sw[leaf], 3 + spine as u8), PortEnd::Switch(sw[4 + spine], 1 + leaf as u8))
                .unwrap();
        }
    }
    b.build().unwrap()
}

fn lids_of(d: &LftDump) -> BTreeMap<u64, u16> {
    d.lid_claims("fixture").unwrap().into_iter().map(|c| (c.guid, c.lids[0])).collect()
}

#[test]
fn opensm_minhop_dump_round_trips_byte_for_byte() {
    let text = fixture("ft2-r4-minhop.lfts.dump");
    let d = LftDump::parse(&text, "ft2-r4-minhop.lfts.dump").unwrap();
    assert_eq!(d.format, DumpFormat::OpenSm);
    assert_eq!(d.switches.len(), 6);
    let lids = lids_of(&d);
    // OpenSM ran on leaf0-h0: the SM port gets LID 1.
    assert_eq!(lids[&0x100001], 1);
    assert_eq!(lids.len(), 14, "6 switches + 8 hosts");
    let f = ft2_r4(&lids, false, false);
    let r = d.to_routes(&f, "ft2-r4-minhop.lfts.dump").unwrap();
    assert_eq!(write_opensm_dump(&f, &r), text);

    let a = analyze(&f, &r, &AnalysisOptions::default());
    assert!(a.summary.valid, "{a}");
    assert!(a.summary.deadlock_free, "{a}");
    assert_eq!(a.summary.max_stretch, 0, "{a}");
}

#[test]
fn ibroute_of_the_same_fabric_gives_the_same_tables() {
    let dump = LftDump::parse(&fixture("ft2-r4-minhop.lfts.dump"), "dump").unwrap();
    let ib = LftDump::parse(&fixture("ft2-r4-minhop.ibroute"), "ibroute").unwrap();
    assert_eq!(ib.format, DumpFormat::Ibroute);
    assert_eq!(lids_of(&ib), lids_of(&dump));
    let f = ft2_r4(&lids_of(&dump), false, false);
    assert_eq!(ib.to_routes(&f, "ibroute").unwrap(), dump.to_routes(&f, "dump").unwrap());
}

#[test]
fn opensm_updn_on_a_cut_tree_is_valid_and_acyclic() {
    let text = fixture("ft2-r4-cut-updn.lfts.dump");
    let d = LftDump::parse(&text, "cut").unwrap();
    let f = ft2_r4(&lids_of(&d), true, false);
    let r = d.to_routes(&f, "cut").unwrap();
    assert_eq!(write_opensm_dump(&f, &r), text);
    let a = analyze(&f, &r, &AnalysisOptions::default());
    assert!(a.summary.valid && a.summary.deadlock_free, "{a}");
}

#[test]
fn a_dump_that_does_not_match_the_topology_is_refused() {
    let text = fixture("ft2-r4-minhop.lfts.dump");
    let d = LftDump::parse(&text, "m.dump").unwrap();
    let lids = lids_of(&d);

    // The full tree's tables on the cut tree: leaf3 sends LIDs up port 4.
    let cut = ft2_r4(&lids, true, false);
    let e = d.to_routes(&cut, "m.dump").unwrap_err();
    match &e {
        DumpError::NotCabled { guid, switch_lid, port: 4, .. } => {
            assert!([0x200003, 0x200005].contains(guid), "{e}");
            assert_eq!(*switch_lid, Some(lids[guid]));
        }
        other => panic!("{other:?}"),
    }
    let msg = e.to_string();
    assert!(msg.starts_with("m.dump:") && msg.contains("no cable"), "{msg}");

    // A host the topology does not have: its LID maps to nothing.
    let fewer = ft2_r4(&lids, false, true);
    let e = d.to_routes(&fewer, "m.dump").unwrap_err();
    let lost = lids[&0x10000f];
    assert!(matches!(e, DumpError::UnknownLid { lid, guid: 0x200000, line: 15, .. } if lid == lost), "{e:?}");
    assert!(e.to_string().contains("switch 0x0000000000200000 (LID 0x0002)"), "{e}");

    // A switch GUID the topology does not have.
    let text2 = text.replace("guid 0x0000000000200005", "guid 0x0000000000abcdef");
    let d2 = LftDump::parse(&text2, "m.dump").unwrap();
    let e = d2.to_routes(&ft2_r4(&lids, false, false), "m.dump").unwrap_err();
    assert!(matches!(e, DumpError::UnknownSwitch { guid: 0xabcdef, lid: Some(9), .. }), "{e:?}");
    assert!(e.to_string().contains("0x0000000000abcdef"), "{e}");

    // A port beyond the switch's four.
    let text3 = text.replacen("0x0003 003 #", "0x0003 009 #", 1);
    let d3 = LftDump::parse(&text3, "m.dump").unwrap();
    let e = d3.to_routes(&ft2_r4(&lids, false, false), "m.dump").unwrap_err();
    assert!(
        matches!(e, DumpError::PortOutOfRange { guid: 0x200000, lid: 3, port: 9, num_ports: 4, line: 4, .. }),
        "{e:?}"
    );

    // A switch LID that differs from the topology's plan.
    let mut other = lids.clone();
    other.insert(0x200000, 40);
    let e = d.to_routes(&ft2_r4(&other, false, false), "m.dump").unwrap_err();
    assert!(matches!(e, DumpError::SwitchLidMismatch { guid: 0x200000, dump_lid: 2, fabric_lid: 40, .. }), "{e:?}");

    // Missing a switch's table.
    let cut_at = text.find("Unicast lids [0-14] of switch Lid 9").unwrap();
    let d5 = LftDump::parse(&text[..cut_at], "m.dump").unwrap();
    let e = d5.to_routes(&ft2_r4(&lids, false, false), "m.dump").unwrap_err();
    assert!(matches!(e, DumpError::MissingSwitch { guid: 0x200005, lid: 9, .. }), "{e:?}");
}

#[test]
fn unrouted_entries_black_hole_in_the_analysis() {
    // ibroute -a lists unrouted LIDs as port 255: read as unrouted, not an
    // error, and the analysis sees the hole.
    let text = fixture("ft2-r4-minhop.ibroute").replacen("0x0003 003 :", "0x0003 255 :", 1);
    let d = LftDump::parse(&text, "a").unwrap();
    let f = ft2_r4(&lids_of(&LftDump::parse(&fixture("ft2-r4-minhop.lfts.dump"), "x").unwrap()), false, false);
    let r = d.to_routes(&f, "a").unwrap();
    assert_eq!(r.lfts[0].port(3), UNROUTED);
    let v = validate(&f, &r);
    assert!(!v.is_clean() && v.black_holes > 0, "{v}");
}
