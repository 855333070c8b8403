//! Channel dependency graphs on small hand-checked fabrics and tables.

use ibsm_routing::analysis::trace;
use ibsm_routing::cdg::{analyze_cdg, CdgScope, Channel};
use ibsm_routing::fabric::{EndPort, PortEnd, RoutingFabric, Switch, SwitchId};
use ibsm_routing::lft::{Lft, PathSl, Routes};
use ibsm_routing::testfab::{self, FatTree};
use ibsm_routing::{minhop, validate, NodeRef};

/// Checks that `cycle` is a cycle of channels (each arrives where the next
/// leaves, the last where the first leaves) and that every dependency in it
/// is taken by some path of the tables.
fn assert_real_cycle(f: &RoutingFabric, r: &Routes, cycle: &[Channel]) {
    assert!(cycle.len() >= 2, "{cycle:?}");
    let guid_to_switch =
        |g: u64| f.switch_ids().find(|&s| f.switch(s).guid == g).unwrap_or_else(|| panic!("no switch {g:#x}"));
    for (i, c) in cycle.iter().enumerate() {
        let next = cycle[(i + 1) % cycle.len()];
        assert_eq!(c.to, next.from, "channel {c} is not followed by {next}");
        // The cable exists as described.
        let s = guid_to_switch(c.from);
        assert_eq!(f.switch_peer(s, c.from_port), Some(PortEnd::Switch(guid_to_switch(c.to), c.to_port)));
        // Some (source switch, LID) path uses c then next.
        let used = f.switch_ids().any(|src| {
            (1..=f.max_lid()).any(|lid| {
                let t = trace(f, r, NodeRef::Switch(src), lid);
                t.hops.windows(2).any(|w| {
                    f.switch(w[0].0).guid == c.from
                        && w[0].1 == c.from_port
                        && f.switch(w[1].0).guid == next.from
                        && w[1].1 == next.from_port
                })
            })
        });
        assert!(used, "no path takes {c} then {next}");
    }
}

#[test]
fn minhop_on_a_ring_is_cyclic_and_the_cycle_is_printed() {
    let f = testfab::ring(5, 1);
    let r = minhop(&f).unwrap();
    assert!(validate(&f, &r).is_clean());
    let rep = analyze_cdg(&f, &r, CdgScope::default());
    assert!(!rep.deadlock_free(), "{rep}");
    assert_eq!(rep.fabric_channels, 10);
    let vl = rep.first_cycle().unwrap();
    assert_eq!(vl.vl, 0);
    let cycle = vl.cycle.as_ref().unwrap();
    // Two-hop paths all go the short way round: the shortest cycle is the
    // ring itself, in one direction.
    assert_eq!(cycle.len(), 5, "{rep}");
    assert_real_cycle(&f, &r, cycle);
    let text = rep.to_string();
    assert!(text.contains("CYCLIC") && text.contains("cycle of 5 channels"), "{text}");
    for c in cycle {
        assert!(text.contains(&c.to_string()), "{text}");
    }
}

/// Six switches in a ring (port 1 clockwise, port 2 counter-clockwise), one
/// host each; the tables are written by hand.
fn ring6() -> RoutingFabric {
    let mut b = RoutingFabric::builder();
    let s: Vec<SwitchId> = (0..6).map(|i| b.add_switch(Switch::new(0x100 + i, 3, 7 + i as u16)).unwrap()).collect();
    for i in 0..6 {
        b.connect(PortEnd::Switch(s[i], 1), PortEnd::Switch(s[(i + 1) % 6], 2)).unwrap();
        let h = b.add_end_port(EndPort::new(0x200 + 2 * i as u64, 0x201 + 2 * i as u64, 1, 1 + i as u16)).unwrap();
        b.connect(PortEnd::End(h), PortEnd::Switch(s[i], 3)).unwrap();
    }
    b.build().unwrap()
}

/// Switch i delivers its host's LID (1 + i) on port 3, its own LID (7 + i)
/// on port 0, and sends LIDs of switch j by `dir(i, j)`.
fn ring6_tables(f: &RoutingFabric, dir: impl Fn(usize, usize) -> u8) -> Routes {
    let mut lfts = Vec::new();
    for i in 0..6 {
        let mut l = Lft::unrouted(f.max_lid());
        for j in 0..6 {
            let (host, sw) = (1 + j as u16, 7 + j as u16);
            if i == j {
                l.set(host, 3);
                l.set(sw, 0);
            } else {
                l.set(host, dir(i, j));
                l.set(sw, dir(i, j));
            }
        }
        lfts.push(l);
    }
    Routes { lfts, sl: None }
}

#[test]
fn all_clockwise_is_a_full_ring_cycle() {
    let f = ring6();
    let r = ring6_tables(&f, |_, _| 1);
    assert!(validate(&f, &r).is_clean());
    let rep = analyze_cdg(&f, &r, CdgScope::default());
    let cycle = rep.first_cycle().and_then(|v| v.cycle.clone()).expect("cyclic");
    assert_eq!(cycle.len(), 6, "{rep}");
    assert!(cycle.iter().all(|c| c.from_port == 1 && c.to_port == 2), "clockwise channels only: {rep}");
    assert_real_cycle(&f, &r, &cycle);
}

#[test]
fn a_line_inside_the_ring_is_acyclic() {
    // Never use the cable between switch 5 and switch 0: higher switches go
    // counter-clockwise (port 2), lower ones clockwise (port 1).
    let f = ring6();
    let r = ring6_tables(&f, |i, j| if j > i { 1 } else { 2 });
    let v = validate(&f, &r);
    assert!(v.is_clean(), "{v}");
    assert!(!v.all_minimal(), "the detours are longer than shortest paths");
    let rep = analyze_cdg(&f, &r, CdgScope::default());
    assert!(rep.deadlock_free(), "{rep}");
    // Dependencies: clockwise s0..s4 chain (3 between 4 channels) and the
    // same counter-clockwise.
    assert_eq!(rep.vls[0].dependencies, 8, "{rep}");
    assert_eq!(rep.vls[0].channels, 8, "{rep}");
}

#[test]
fn paths_across_a_dateline_on_their_own_vl_break_the_cycle() {
    let f = ring6();
    // Shortest direction, clockwise on ties: clockwise paths are up to 3
    // cables long, counter-clockwise ones up to 2.
    let cw = |i: usize, j: usize| (j + 6 - i) % 6 <= 3;
    let r0 = ring6_tables(&f, |i, j| if cw(i, j) { 1 } else { 2 });
    assert!(!analyze_cdg(&f, &r0, CdgScope::default()).deadlock_free());
    // Paths that cross the cable between s5 and s0 (either way) go on SL 1.
    // A path carries one SL end to end, so this only works because no path
    // is long enough to wrap: VL1's clockwise paths all contain s5 -> s0
    // and span at most three channels around it.
    let crosses = |i: usize, j: usize| if cw(i, j) { j < i } else { j > i };
    let mut by_source_switch = vec![vec![0u8; usize::from(f.max_lid()) + 1]; 6];
    let mut on_vl1 = 0;
    for (i, row) in by_source_switch.iter_mut().enumerate() {
        for j in (0..6).filter(|&j| j != i && crosses(i, j)) {
            row[1 + j] = 1;
            row[7 + j] = 1;
            on_vl1 += 1;
        }
    }
    let r = Routes { lfts: r0.lfts.clone(), sl: Some(PathSl::per_switch(by_source_switch)) };
    let rep = analyze_cdg(&f, &r, CdgScope::default());
    assert!(rep.deadlock_free(), "{rep}");
    assert_eq!(rep.vls.iter().map(|v| v.vl).collect::<Vec<_>>(), vec![0, 1]);
    assert_eq!(rep.vls[1].paths, on_vl1);
    assert_eq!(rep.vls[0].paths + rep.vls[1].paths, 36, "6 source switches x 6 host LIDs");
    // Put one long clockwise path (s1 -> s0's host, five cables) on VL1 as
    // well and VL1 wraps all the way round.
    let mut lfts = r.lfts.clone();
    for l in lfts.iter_mut().skip(1) {
        l.set(1, 1);
    }
    let mut sl = r.sl.clone().unwrap();
    sl.by_source_switch[1][1] = 1;
    let bad = Routes { lfts, sl: Some(sl) };
    assert!(validate(&f, &bad).is_clean());
    let rep = analyze_cdg(&f, &bad, CdgScope::default());
    let v = rep.first_cycle().expect("cyclic");
    assert_eq!(v.vl, 1, "{rep}");
    assert_real_cycle(&f, &bad, v.cycle.as_ref().unwrap());
}

#[test]
fn fat_trees_with_minhop_are_acyclic() {
    for ft in [FatTree::full(8, 2), FatTree::full(4, 3), FatTree::new(8, 3, 40)] {
        let f = ft.build();
        let r = minhop(&f).unwrap();
        // End-port traffic goes up, then down: no down-to-up turn. (Paths
        // between switches may turn, e.g. spine to spine through a leaf,
        // which is why they are out of the default scope.)
        let rep = analyze_cdg(&f, &r, CdgScope::default());
        assert!(rep.deadlock_free(), "{ft:?}: {rep}");
        assert!(rep.vls[0].dependencies > 0);
    }
}

#[test]
fn switch_sources_add_paths_only_with_the_scope_flag() {
    // A line of three switches with hosts on the ends only: the middle
    // switch sources nothing unless switches count.
    let mut b = RoutingFabric::builder();
    let s: Vec<SwitchId> = (0..3).map(|i| b.add_switch(Switch::new(0x10 + i, 3, 10 + i as u16)).unwrap()).collect();
    b.connect(PortEnd::Switch(s[0], 1), PortEnd::Switch(s[1], 1)).unwrap();
    b.connect(PortEnd::Switch(s[1], 2), PortEnd::Switch(s[2], 1)).unwrap();
    let h0 = b.add_end_port(EndPort::new(0x20, 0x21, 1, 1)).unwrap();
    let h1 = b.add_end_port(EndPort::new(0x30, 0x31, 1, 2)).unwrap();
    b.connect(PortEnd::End(h0), PortEnd::Switch(s[0], 3)).unwrap();
    b.connect(PortEnd::End(h1), PortEnd::Switch(s[2], 3)).unwrap();
    let f = b.build().unwrap();
    let r = minhop(&f).unwrap();
    let hosts_only = analyze_cdg(&f, &r, CdgScope::default());
    // Two source switches x two host LIDs (a switch's path to its own
    // host counts; it just has no channel).
    assert_eq!(hosts_only.vls[0].paths, 4);
    assert_eq!(hosts_only.vls[0].dependencies, 2, "s0->s1->s2 and back");
    let all = analyze_cdg(&f, &r, CdgScope { include_switches: true });
    // 3 switch sources x 5 LIDs, minus each switch's own LID.
    assert_eq!(all.vls[0].paths, 12);
    assert!(all.deadlock_free());
}
