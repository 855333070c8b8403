//! The shift pattern on full two-level fat trees: hand-made tables with
//! values worked out on paper, and minhop checked against a flow-by-flow
//! count through `trace`.

use std::collections::HashMap;

use ibsm_routing::analysis::{shift_balance, trace, ShiftOrder, TraceEnd};
use ibsm_routing::fabric::{EndPortId, NodeRef, PortEnd, RoutingFabric, SwitchId};
use ibsm_routing::lft::Routes;
use ibsm_routing::testfab::FatTree;
use ibsm_routing::{analyze, minhop, AnalysisOptions};

/// Leaves (switches with hosts) and spines, each sorted by GUID.
fn levels(f: &RoutingFabric) -> (Vec<SwitchId>, Vec<SwitchId>) {
    let mut leaves: Vec<SwitchId> = Vec::new();
    let mut spines: Vec<SwitchId> = Vec::new();
    for s in f.switch_ids() {
        if f.switch_ports(s).iter().any(|p| matches!(p, Some(PortEnd::End(_)))) {
            leaves.push(s);
        } else {
            spines.push(s);
        }
    }
    leaves.sort_by_key(|&s| f.switch(s).guid);
    spines.sort_by_key(|&s| f.switch(s).guid);
    (leaves, spines)
}

/// Minhop's tables with every host LID rerouted: a leaf sends a host on
/// another leaf up to spine `spine_for(position of the host on its leaf)`,
/// a spine sends it down to its leaf.
fn up_down_tables(f: &RoutingFabric, spine_for: impl Fn(usize) -> usize) -> Routes {
    let mut r = minhop(f).unwrap();
    let (_, spines) = levels(f);
    let mut hosts_by_leaf: HashMap<SwitchId, Vec<EndPortId>> = HashMap::new();
    for e in f.end_port_ids() {
        let (s, _) = f.attached_switch(e).unwrap();
        hosts_by_leaf.entry(s).or_default().push(e);
    }
    for hs in hosts_by_leaf.values_mut() {
        hs.sort_by_key(|&e| f.end_port(e).port_guid);
    }
    for (&leaf, hs) in &hosts_by_leaf {
        for (pos, &e) in hs.iter().enumerate() {
            let lid = f.end_port(e).base_lid;
            let down = f.attached_switch(e).unwrap().1;
            let spine = spines[spine_for(pos) % spines.len()];
            for s in f.switch_ids() {
                let port = if s == leaf {
                    down
                } else if spines.contains(&s) {
                    // The cable from this spine to the destination leaf.
                    f.switch_neighbors(s).iter().find(|n| n.neighbor == leaf).unwrap().port
                } else {
                    f.switch_neighbors(s).iter().find(|n| n.neighbor == spine).unwrap().port
                };
                r.lfts[s.index()].set(lid, port);
            }
        }
    }
    r
}

/// The busiest link of every shift, counted flow by flow with `trace`.
fn brute_force(f: &RoutingFabric, r: &Routes, order: ShiftOrder) -> Vec<u64> {
    let mut ports: Vec<EndPortId> = f.end_port_ids().collect();
    ports.sort_by_key(|&e| match order {
        ShiftOrder::Guid => f.end_port(e).port_guid,
        ShiftOrder::Lid => u64::from(f.end_port(e).base_lid),
    });
    let n = ports.len();
    (1..n)
        .map(|k| {
            let mut load: HashMap<(SwitchId, u8), u64> = HashMap::new();
            for i in 0..n {
                let (src, dst) = (ports[i], ports[(i + k) % n]);
                let t = trace(f, r, NodeRef::End(src), f.end_port(dst).base_lid);
                assert_eq!(t.end, TraceEnd::Delivered(NodeRef::End(dst)));
                for hop in t.hops {
                    *load.entry(hop).or_default() += 1;
                }
            }
            load.values().copied().max().unwrap_or(0)
        })
        .collect()
}

#[test]
fn d_mod_k_on_a_full_tree_is_contention_free_for_every_shift() {
    // 8 leaves x 4 hosts, 4 spines. Host at position p of its leaf is
    // reached through spine p: the four hosts of a leaf send to four
    // consecutive hosts, which sit at four different positions, so each
    // uplink carries at most one flow, and each downlink carries only the
    // flow to the one host it serves.
    let f = FatTree::full(8, 2).build();
    let r = up_down_tables(&f, |pos| pos);
    for order in [ShiftOrder::Guid, ShiftOrder::Lid] {
        let b = shift_balance(&f, &r, order, None);
        assert_eq!((b.end_ports, b.shifts, b.sampled), (32, 31, false));
        assert_eq!((b.worst_max, b.best_max, b.mean_max), (1, 1, 1.0), "{b}");
        assert_eq!(b.worst_shift, 1);
        assert_eq!(b.undelivered, 0);
    }
}

#[test]
fn one_spine_for_everything_loads_shifts_by_how_many_flows_leave_a_leaf() {
    // Every host reached through spine 0. With shift k a leaf's four hosts
    // p = 0..3 leave the leaf when p + k crosses a leaf boundary: k flows
    // for k = 1..3, all four for k = 4..28, 32 - k for k = 29..31; spine 0's
    // uplink and its downlinks carry exactly those.
    let f = FatTree::full(8, 2).build();
    let r = up_down_tables(&f, |_| 0);
    let b = shift_balance(&f, &r, ShiftOrder::Guid, None);
    let expected: Vec<u64> = (1..32u64).map(|k| k.min(4).min(32 - k)).collect();
    assert_eq!(brute_force(&f, &r, ShiftOrder::Guid), expected);
    assert_eq!((b.worst_max, b.worst_shift, b.best_max), (4, 4, 1), "{b}");
    let mean = expected.iter().sum::<u64>() as f64 / 31.0;
    assert!((b.mean_max - mean).abs() < 1e-12, "{b}");
    // The worst link is an uplink to spine 0 or one of its downlinks.
    let (_, spines) = levels(&f);
    let spine0 = f.switch(spines[0]).guid;
    let l = b.worst_link.unwrap();
    assert!(l.from == spine0 || l.to == spine0, "{b}");
}

#[test]
fn minhop_matches_a_flow_by_flow_count() {
    for ft in [FatTree::full(8, 2), FatTree::full(4, 3), FatTree::new(8, 3, 48)] {
        let f = ft.build();
        let r = minhop(&f).unwrap();
        for order in [ShiftOrder::Guid, ShiftOrder::Lid] {
            let per_k = brute_force(&f, &r, order);
            let b = shift_balance(&f, &r, order, None);
            let worst = *per_k.iter().max().unwrap();
            assert_eq!(b.worst_max, worst, "{ft:?} {b}");
            assert_eq!(b.worst_shift, 1 + per_k.iter().position(|&m| m == worst).unwrap());
            assert_eq!(b.best_max, *per_k.iter().min().unwrap());
            let mean = per_k.iter().sum::<u64>() as f64 / per_k.len() as f64;
            assert!((b.mean_max - mean).abs() < 1e-9, "{ft:?} {b}");
            // On two levels every link is a leaf's uplink or downlink, and
            // a leaf has radix/2 hosts sending and receiving one flow each.
            if ft.levels == 2 {
                assert!(b.worst_max <= u64::from(ft.radix / 2), "{ft:?} {b}");
            }
        }
    }
}

#[test]
fn sampling_takes_evenly_spaced_shifts() {
    let f = FatTree::full(8, 2).build();
    let r = up_down_tables(&f, |_| 0);
    let b = shift_balance(&f, &r, ShiftOrder::Guid, Some(3));
    // k = 1, 11, 21.
    assert_eq!((b.shifts, b.sampled), (3, true));
    assert_eq!(b.worst_shift, 11);
    assert!((b.mean_max - 9.0 / 3.0).abs() < 1e-12, "{b}");
}

#[test]
fn broken_tables_count_undelivered_flows() {
    let f = FatTree::full(8, 2).build();
    let mut r = minhop(&f).unwrap();
    // The first host's LID is dropped everywhere but on its own leaf.
    let victim = f.end_port_ids().min_by_key(|&e| f.end_port(e).port_guid).unwrap();
    let (leaf, _) = f.attached_switch(victim).unwrap();
    let lid = f.end_port(victim).base_lid;
    for s in f.switch_ids().filter(|&s| s != leaf) {
        r.lfts[s.index()].set(lid, ibsm_routing::UNROUTED);
    }
    let b = shift_balance(&f, &r, ShiftOrder::Guid, None);
    // Per shift, one flow goes to the victim; it arrives only from the
    // victim's leaf mates (shifts 29..31 bring the other three hosts of
    // leaf 0 to it, each once).
    assert_eq!(b.undelivered, 31 - 3, "{b}");
    let a = analyze(&f, &r, &AnalysisOptions::default());
    assert!(!a.summary.valid);
    assert!(a.to_string().contains("NOT delivered"), "{a}");
}
