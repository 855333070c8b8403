//! LID manager: restarts, takeover from OpenSM, guid2lid use, conflicts,
//! LMC, reservations, exhaustion, scale.

use std::collections::BTreeMap;
use std::path::Path;
use std::time::Instant;

use ibsm::lid::{
    assign_lids, Decision, Guid2Lid, LidAssignment, LidError, LidPolicy, LidRange, PortRole, RangeError, SweptPort,
    Unused,
};
use ibsm::{Guid, Lid};
use proptest::prelude::*;

const SWITCH: PortRole = PortRole::SwitchPort0 { enhanced: false };
const ESP0: PortRole = PortRole::SwitchPort0 { enhanced: true };

fn port(guid: u64, role: PortRole, lid: u16, lmc: u8) -> SweptPort {
    SweptPort { guid: Guid(guid), role, lid: Lid(lid), lmc }
}
fn ca(guid: u64, lid: u16) -> SweptPort {
    port(guid, PortRole::EndPort, lid, 0)
}
fn sw(guid: u64, lid: u16) -> SweptPort {
    port(guid, SWITCH, lid, 0)
}
fn range(base: u16, lmc: u8) -> LidRange {
    LidRange::new(Lid(base), lmc).unwrap()
}
fn lmc(l: u8) -> LidPolicy {
    LidPolicy::new(l).unwrap()
}
fn map(entries: &[(u64, u16, u8)]) -> Guid2Lid {
    let mut m = Guid2Lid::new();
    for &(g, base, l) in entries {
        m.insert(Guid(g), range(base, l)).unwrap();
    }
    m
}
fn bases(a: &LidAssignment) -> Vec<(u64, u16)> {
    a.ranges.iter().map(|(g, r)| (g.0, r.base().0)).collect()
}
/// The ports as they are after the SM programmed `a`.
fn apply(ports: &[SweptPort], a: &LidAssignment) -> Vec<SweptPort> {
    ports
        .iter()
        .map(|p| match a.ranges.get(&p.guid) {
            Some(r) => SweptPort { lid: r.base(), lmc: r.lmc(), ..*p },
            None => *p,
        })
        .collect()
}
fn changed(a: &LidAssignment) -> Vec<u64> {
    a.changes.iter().map(|c| c.guid.0).collect()
}

/// The ibsim fabric of fixtures/guid2lid (net.2sw2path4hca2port): the SM
/// runs on Hca1 port 1.
const SM: u64 = 0x100001;
fn fabric(lid_of: impl Fn(u64) -> u16) -> Vec<SweptPort> {
    let mut v: Vec<SweptPort> = [0x100001, 0x100002, 0x100004, 0x100005].iter().map(|&g| ca(g, lid_of(g))).collect();
    v.extend([0x200000, 0x200001].iter().map(|&g| sw(g, lid_of(g))));
    v
}
fn opensm_file(name: &str) -> Guid2Lid {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/guid2lid").join(name);
    let (m, w) = Guid2Lid::read(&path).unwrap();
    assert!(w.is_empty());
    m
}

#[test]
fn new_fabric_sm_port_first_then_guid_order() {
    let ports = fabric(|_| 0);
    let a = assign_lids(&ports, &Guid2Lid::new(), Guid(0x100004), &lmc(0));
    assert_eq!(
        bases(&a),
        vec![(0x100001, 2), (0x100002, 3), (0x100004, 1), (0x100005, 4), (0x200000, 5), (0x200001, 6)]
    );
    assert_eq!(changed(&a).len(), 6);
    assert_eq!(a.max_lid, Lid(6));
    assert_eq!(a.error, None);
    assert_eq!(a.map.iter().collect::<BTreeMap<_, _>>(), a.ranges);
    assert_eq!(
        a.decision(Guid(0x100004)),
        Some(&Decision::Fresh { port: Guid(0x100004), range: range(1, 0), current: Unused::None, file: Unused::None })
    );
}

#[test]
fn restart_keeps_every_lid_whatever_the_file_says() {
    let first = assign_lids(&fabric(|_| 0), &Guid2Lid::new(), Guid(SM), &lmc(0));
    let running = apply(&fabric(|_| 0), &first);

    // Same file, lost file, and a file that maps every GUID to another
    // port's LID (stale, or from another fabric): nothing is renumbered.
    let rotated = {
        let v: Vec<(Guid, LidRange)> = first.map.iter().collect();
        let mut m = Guid2Lid::new();
        for (i, (g, _)) in v.iter().enumerate() {
            m.insert(*g, v[(i + 1) % v.len()].1).unwrap();
        }
        m
    };
    for file in [first.map.clone(), Guid2Lid::new(), rotated] {
        let again = assign_lids(&running, &file, Guid(SM), &lmc(0));
        assert!(again.changes.is_empty());
        assert_eq!(again.ranges, first.ranges);
        assert_eq!(again.map, first.map);
        assert!(again.decisions.iter().all(|d| matches!(d, Decision::KeptCurrent { .. })), "{:?}", again.decisions);
    }
}

#[test]
fn takes_over_lids_opensm_assigned() {
    for (name, l) in [("opensm-net.guid2lid", 0), ("opensm-net-lmc2.guid2lid", 2)] {
        let theirs = opensm_file(name);
        let ports: Vec<SweptPort> = fabric(|g| theirs.get(Guid(g)).unwrap().base().0)
            .into_iter()
            .map(|p| SweptPort { lmc: if p.role == SWITCH { 0 } else { l }, ..p })
            .collect();
        for file in [Guid2Lid::new(), theirs.clone()] {
            let a = assign_lids(&ports, &file, Guid(SM), &lmc(l));
            assert!(a.changes.is_empty(), "{name}: {:?}", a.changes);
            assert_eq!(a.map, theirs, "{name}");
            assert_eq!(a.max_lid, theirs.iter().map(|(_, r)| r.max()).max().unwrap());
        }
    }
}

#[test]
fn lmc_change_keeps_bases_and_reprograms_lmc() {
    // OpenSM ran with LMC 2; we run with LMC 0: bases stay, CA LMCs change.
    let theirs = opensm_file("opensm-net-lmc2.guid2lid");
    let ports: Vec<SweptPort> = fabric(|g| theirs.get(Guid(g)).unwrap().base().0)
        .into_iter()
        .map(|p| SweptPort { lmc: if p.role == SWITCH { 0 } else { 2 }, ..p })
        .collect();
    let a = assign_lids(&ports, &theirs, Guid(SM), &lmc(0));
    assert_eq!(changed(&a), vec![0x100001, 0x100002, 0x100004, 0x100005]);
    assert!(a.changes.iter().all(|c| c.old_lid == c.new.base() && c.old_lmc == 2 && c.new.lmc() == 0));
    assert_eq!(a.max_lid, Lid(20));
}

#[test]
fn raising_lmc_keeps_aligned_bases_and_moves_the_rest() {
    let ports = vec![ca(1, 4), ca(2, 5), sw(3, 6), ca(4, 8)];
    let a = assign_lids(&ports, &Guid2Lid::new(), Guid(1), &lmc(2));
    // 4 and 8 are aligned to 4: kept (with a new LMC). 5 is not: moved to the
    // first free aligned block. The switch keeps its single LID 6, which is
    // inside 4..7 held by port 1, so it moves too.
    assert_eq!(bases(&a), vec![(1, 4), (2, 12), (3, 1), (4, 8)]);
    assert_eq!(
        a.decision(Guid(2)),
        Some(&Decision::Fresh {
            port: Guid(2),
            range: range(12, 2),
            current: Unused::Invalid { lid: Lid(5), error: RangeError::Unaligned { base: 5, len: 4 } },
            file: Unused::None
        })
    );
    assert_eq!(
        a.decision(Guid(3)),
        Some(&Decision::Fresh {
            port: Guid(3),
            range: range(1, 0),
            current: Unused::HeldBy { lid: Lid(6), holder: Guid(1), holder_range: range(4, 2) },
            file: Unused::None
        })
    );
    assert_eq!(changed(&a), vec![1, 2, 3, 4]);
}

#[test]
fn file_used_when_ports_come_up_with_lid_zero() {
    let file = opensm_file("opensm-net.guid2lid");
    let a = assign_lids(&fabric(|_| 0), &file, Guid(SM), &lmc(0));
    assert_eq!(a.map, file);
    assert_eq!(changed(&a).len(), 6);
    assert!(a.decisions.iter().all(|d| matches!(d, Decision::FromFile { current: Unused::None, .. })));

    // Half the hosts rebooted (LID 0), the rest still hold their LIDs.
    let ports = fabric(|g| if g % 2 == 0 { file.get(Guid(g)).unwrap().base().0 } else { 0 });
    let a = assign_lids(&ports, &file, Guid(SM), &lmc(0));
    assert_eq!(a.map, file);
    assert_eq!(changed(&a), vec![0x100001, 0x100005, 0x200001]);
}

#[test]
fn rebooted_host_whose_lid_was_taken_gets_a_fresh_one() {
    // Host 2 is in the file at LID 3, but port 9 now holds 3 (given by
    // another SM while we were away). Port 9 is running: it keeps 3.
    let file = map(&[(1, 1, 0), (2, 3, 0)]);
    let a = assign_lids(&[ca(1, 1), ca(2, 0), ca(9, 3)], &file, Guid(1), &lmc(0));
    assert_eq!(bases(&a), vec![(1, 1), (2, 2), (9, 3)]);
    assert_eq!(
        a.decision(Guid(2)),
        Some(&Decision::Fresh {
            port: Guid(2),
            range: range(2, 0),
            current: Unused::None,
            file: Unused::HeldBy { lid: Lid(3), holder: Guid(9), holder_range: range(3, 0) }
        })
    );
}

#[test]
fn merged_fabrics_file_owner_wins_then_lower_guid() {
    // Fabric A (ours, in guid2lid) and fabric B (another SM's) both use LIDs
    // 1..=16. B's GUIDs are lower, yet A keeps its LIDs because the file
    // says they are A's.
    let a_guids: Vec<u64> = (0xA00..0xA10).collect();
    let b_guids: Vec<u64> = (0x100..0x110).collect();
    let file = map(&a_guids.iter().enumerate().map(|(i, &g)| (g, i as u16 + 1, 0)).collect::<Vec<_>>());
    let mut ports: Vec<SweptPort> = a_guids.iter().enumerate().map(|(i, &g)| ca(g, i as u16 + 1)).collect();
    ports.extend(b_guids.iter().enumerate().map(|(i, &g)| ca(g, i as u16 + 1)));
    let res = assign_lids(&ports, &file, Guid(0xA00), &lmc(0));
    for (i, &g) in a_guids.iter().enumerate() {
        assert_eq!(res.ranges[&Guid(g)], range(i as u16 + 1, 0));
    }
    for (i, &g) in b_guids.iter().enumerate() {
        assert_eq!(res.ranges[&Guid(g)], range(i as u16 + 17, 0));
        assert_eq!(
            res.decision(Guid(g)),
            Some(&Decision::Fresh {
                port: Guid(g),
                range: range(i as u16 + 17, 0),
                current: Unused::HeldBy {
                    lid: Lid(i as u16 + 1),
                    holder: Guid(a_guids[i]),
                    holder_range: range(i as u16 + 1, 0)
                },
                file: Unused::None
            })
        );
    }
    assert_eq!(changed(&res), b_guids);

    // Without a file, the lower GUID wins.
    let res = assign_lids(&ports, &Guid2Lid::new(), Guid(0xA00), &lmc(0));
    assert_eq!(changed(&res), a_guids);
    assert!(b_guids.iter().enumerate().all(|(i, &g)| res.ranges[&Guid(g)] == range(i as u16 + 1, 0)));
}

#[test]
fn reassign_all_ignores_current_lids_and_file() {
    let file = map(&[(0x10, 1, 0), (0x77, 2, 0) /* absent */]);
    let ports = vec![ca(0x10, 1), ca(0x20, 0x40), sw(0x30, 0x41), ca(0x40, 0)];
    let policy = lmc(0).with_reassign_all(true);
    let a = assign_lids(&ports, &file, Guid(0x30), &policy);
    assert_eq!(bases(&a), vec![(0x10, 2), (0x20, 3), (0x30, 1), (0x40, 4)]);
    assert_eq!(a.map.get(Guid(0x77)), None, "absent entries are forgotten");
    assert_eq!(changed(&a), vec![0x10, 0x20, 0x30, 0x40]);
    assert_eq!(
        a.decision(Guid(0x10)),
        Some(&Decision::Fresh {
            port: Guid(0x10),
            range: range(2, 0),
            current: Unused::Ignored { lid: Lid(1) },
            file: Unused::Ignored { lid: Lid(1) }
        })
    );
}

#[test]
fn absent_ports_keep_their_lids_reserved() {
    // Hosts 0x50 and 0x60 are down; their LIDs 1 and 3 must wait for them.
    let file = map(&[(0x50, 1, 0), (0x60, 3, 0)]);
    let a = assign_lids(&[ca(0x10, 0), ca(0x20, 0), ca(0x30, 0)], &file, Guid(0x10), &lmc(0));
    assert_eq!(bases(&a), vec![(0x10, 2), (0x20, 4), (0x30, 5)]);
    assert_eq!(a.map.get(Guid(0x50)), Some(range(1, 0)));
    assert_eq!(a.map.get(Guid(0x60)), Some(range(3, 0)));
    assert_eq!(a.max_lid, Lid(5), "reservations are not routed");

    // When host 0x50 comes back, it gets LID 1 again.
    let back = assign_lids(&[ca(0x50, 0)], &a.map, Guid(0x10), &lmc(0));
    assert_eq!(back.ranges[&Guid(0x50)], range(1, 0));
}

#[test]
fn a_running_port_on_a_reserved_lid_keeps_it() {
    let file = map(&[(0x50, 4, 2)]);
    let a = assign_lids(&[ca(0x10, 5)], &file, Guid(0x10), &lmc(0));
    assert!(a.changes.is_empty());
    assert_eq!(a.map.get(Guid(0x50)), None);
    assert!(a.decisions.contains(&Decision::ReservationDropped {
        absent: Guid(0x50),
        range: range(4, 2),
        holder: Guid(0x10)
    }));
}

#[test]
fn exhaustion_reports_the_ports_left_out() {
    // LMC 7: 383 blocks of 128 (the block at 0 holds the reserved LID 0).
    let ports: Vec<SweptPort> = (1..=400).map(|g| ca(g, 0)).collect();
    let a = assign_lids(&ports, &Guid2Lid::new(), Guid(400), &lmc(7));
    assert_eq!(a.ranges.len(), 383);
    assert_eq!(a.ranges[&Guid(400)], range(128, 7), "the SM port is served first");
    assert_eq!(a.max_lid, Lid(0xBFFF));
    let left: Vec<Guid> = (383..400).map(Guid).collect();
    assert_eq!(a.error, Some(LidError::Exhausted { unassigned: left.clone() }));
    for g in left {
        assert_eq!(a.decision(g), Some(&Decision::Unassigned { port: g, current: Unused::None, file: Unused::None }));
    }
    assert!(a
        .error
        .unwrap()
        .to_string()
        .starts_with("unicast LID space exhausted: 17 port(s) left without LIDs: 0x000000000000017f,"));
}

#[test]
fn exhaustion_reclaims_reservations_lowest_guid_first() {
    // 10 absent hosts reserve 128-blocks; 380 new ports need 380 of the 383
    // blocks, so the 7 lowest-GUID reservations are reclaimed.
    let absent: Vec<(u64, u16, u8)> = (0..10).map(|i| (0xF000 - i as u64, 0x400 + 0x80 * i, 7)).collect();
    let file = map(&absent);
    let ports: Vec<SweptPort> = (1..=380).map(|g| ca(g, 0)).collect();
    let a = assign_lids(&ports, &file, Guid(1), &lmc(7));
    assert_eq!(a.error, None);
    let reclaimed: Vec<u64> = a
        .decisions
        .iter()
        .filter_map(|d| match d {
            Decision::ReservationReclaimed { absent, .. } => Some(absent.0),
            _ => None,
        })
        .collect();
    let mut lowest: Vec<u64> = absent.iter().map(|e| e.0).collect();
    lowest.sort();
    assert_eq!(reclaimed, lowest[..7]);
    for &g in &lowest[7..] {
        assert!(a.map.get(Guid(g)).is_some(), "{g:#x} keeps its reservation");
        assert!(a.ranges.values().all(|r| !r.overlaps(file.get(Guid(g)).unwrap())));
    }
    let text: Vec<String> = a
        .decisions
        .iter()
        .filter(|d| matches!(d, Decision::ReservationReclaimed { .. }))
        .map(|d| d.to_string())
        .collect();
    assert!(text[0].contains("LID space exhausted, its reserved LIDs"), "{}", text[0]);
}

#[test]
fn switch_port0_lmc() {
    let ports = vec![ca(1, 0), sw(2, 0), port(3, ESP0, 0, 0)];
    let a = assign_lids(&ports, &Guid2Lid::new(), Guid(1), &lmc(2));
    assert_eq!(a.ranges.values().map(|r| r.lmc()).collect::<Vec<_>>(), vec![2, 0, 0]);
    let a = assign_lids(&ports, &Guid2Lid::new(), Guid(1), &lmc(2).with_lmc_esp0(true));
    assert_eq!(a.ranges.values().map(|r| r.lmc()).collect::<Vec<_>>(), vec![2, 0, 2]);
    // A base port 0 reporting some LMC is not reprogrammed for it.
    let a = assign_lids(&[port(2, SWITCH, 7, 3)], &Guid2Lid::new(), Guid(1), &lmc(2));
    assert!(a.changes.is_empty());
}

#[test]
fn bad_current_lids_and_duplicate_input() {
    let ports = vec![ca(1, 0xC001), ca(2, 0xFFFF), ca(3, 7), ca(3, 9)];
    let a = assign_lids(&ports, &Guid2Lid::new(), Guid(1), &lmc(0));
    assert_eq!(bases(&a), vec![(1, 1), (2, 2), (3, 7)]);
    assert_eq!(
        a.decision(Guid(1)),
        Some(&Decision::Fresh {
            port: Guid(1),
            range: range(1, 0),
            current: Unused::Invalid { lid: Lid(0xC001), error: RangeError::NotUnicast(0xC001) },
            file: Unused::None
        })
    );
    assert!(a.decisions.contains(&Decision::DuplicateInput { port: Guid(3) }));
    assert!(LidPolicy::new(8).is_err());
}

#[test]
fn decisions_read_as_log_lines() {
    let file = map(&[(2, 8, 0), (0x99, 9, 0)]);
    let a = assign_lids(&[ca(1, 5), ca(2, 0), ca(3, 5), ca(4, 0)], &file, Guid(1), &lmc(0));
    let lines: Vec<String> = a.decisions.iter().map(|d| d.to_string()).collect();
    assert_eq!(
        lines,
        vec![
            "0x0000000000000001: keeps its current LIDs 5",
            "0x0000000000000002: LIDs 8 from guid2lid (current LID: none)",
            "0x0000000000000003: new LIDs 1 (current LID: 5 conflicts with 0x0000000000000001, which holds 5; guid2lid: none)",
            "0x0000000000000004: new LIDs 2 (current LID: none; guid2lid: none)",
        ]
    );
}

/// The sizes an SM must handle: 50,000 ports is more than the 49,151
/// unicast LIDs, so the surplus is reported, not looped on.
#[test]
fn fifty_thousand_ports() {
    let ports: Vec<SweptPort> = (1..=50_000u64).map(|g| ca(g * 7919, 0)).collect();
    let t = Instant::now();
    let a = assign_lids(&ports, &Guid2Lid::new(), Guid(7919), &lmc(0));
    let fresh = t.elapsed();
    assert_eq!(a.ranges.len(), 0xBFFF);
    assert!(matches!(&a.error, Some(LidError::Exhausted { unassigned }) if unassigned.len() == 50_000 - 0xBFFF));

    // Restart over the running fabric with the stored map: nothing moves.
    let running = apply(&ports, &a);
    let t = Instant::now();
    let again = assign_lids(&running, &a.map, Guid(7919), &lmc(0));
    let restart = t.elapsed();
    assert!(again.changes.is_empty());
    assert_eq!(again.ranges, a.ranges);

    // 40,000 hosts up (10,000 rebooted to LID 0), 9,000 absent with
    // reservations, LMC 0: all served without touching a reservation.
    let mut file = Guid2Lid::new();
    let mut ports = Vec::new();
    for i in 0..49_000u64 {
        let g = Guid(0x1000 + i);
        let lid = Lid(i as u16 + 1);
        file.insert(g, LidRange::single(lid).unwrap()).unwrap();
        match i % 49 {
            0..=9 => ports.push(SweptPort { guid: g, role: PortRole::EndPort, lid: Lid(0), lmc: 0 }),
            10..=18 => {}
            _ => ports.push(SweptPort { guid: g, role: PortRole::EndPort, lid, lmc: 0 }),
        }
    }
    let t = Instant::now();
    let mixed = assign_lids(&ports, &file, Guid(0x1000), &lmc(0));
    let mixed_t = t.elapsed();
    assert_eq!(mixed.error, None);
    assert_eq!(mixed.map, file);
    assert_eq!(mixed.changes.len(), 10_000);
    eprintln!("fresh 50k: {fresh:?}, restart 49k: {restart:?}, mixed 40k+9k absent: {mixed_t:?}");
}

// ---------------------------------------------------------------------------
// Properties over random fabrics.

#[derive(Debug, Clone)]
struct Case {
    ports: Vec<SweptPort>,
    file: Guid2Lid,
    sm: Guid,
    policy: LidPolicy,
}

fn arb_case() -> impl Strategy<Value = Case> {
    // GUIDs from a small pool so the file mixes present and absent ports;
    // current LIDs below 0x2000 so they collide often yet can fragment at
    // most 64 of the 383 128-blocks, leaving room for every port.
    let role = prop_oneof![Just(PortRole::EndPort), Just(SWITCH), Just(ESP0)];
    let swept = (1u64..300, role, prop_oneof![Just(0u16), 1u16..0x2000, 0xBF00u16..=0xFFFF], 0u8..=7)
        .prop_map(|(g, role, lid, l)| port(g, role, lid, l));
    (
        prop::collection::vec(swept, 0..150),
        prop::collection::vec((1u64..300, 1u16..0x3000, 0u8..=7), 0..150),
        0u64..300,
        0u8..=7,
        any::<bool>(),
        prop::bool::weighted(0.15),
    )
        .prop_map(|(ports, entries, sm, l, lmc_esp0, reassign_all)| {
            let mut file = Guid2Lid::new();
            for (g, lid, el) in entries {
                if let Ok(r) = LidRange::new(Lid(lid & !((1 << el) - 1)), el) {
                    let _ = file.insert(Guid(g), r);
                }
            }
            Case { ports, file, sm: Guid(sm), policy: lmc(l).with_lmc_esp0(lmc_esp0).with_reassign_all(reassign_all) }
        })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn assignments_are_aligned_disjoint_complete_and_stable(c in arb_case()) {
        let a = assign_lids(&c.ports, &c.file, c.sm, &c.policy);
        let mut present: BTreeMap<Guid, SweptPort> = BTreeMap::new();
        for p in &c.ports {
            present.entry(p.guid).or_insert(*p);
        }

        // Every port gets a range of the right size, aligned, unicast.
        prop_assert_eq!(&a.error, &None);
        prop_assert_eq!(a.ranges.len(), present.len());
        for (g, r) in &a.ranges {
            prop_assert_eq!(r.lmc(), c.policy.lmc_for(present[g].role));
            prop_assert_eq!(r.base().0 % r.len(), 0);
            prop_assert!(r.base().0 >= 1 && r.max().0 <= 0xBFFF);
        }
        // Pairwise disjoint (sorted by base, each ends before the next starts).
        let mut sorted: Vec<LidRange> = a.ranges.values().copied().collect();
        sorted.sort_by_key(|r| r.base());
        prop_assert!(sorted.windows(2).all(|w| w[0].max() < w[1].min()));
        prop_assert_eq!(a.max_lid, sorted.last().map_or(Lid(0), |r| r.max()));

        // The map persists every present port, and absent entries only as
        // they were, unless a decision says why they went.
        for (g, r) in a.map.iter() {
            match a.ranges.get(&g) {
                Some(own) => prop_assert_eq!(*own, r),
                None => {
                    prop_assert!(!c.policy.reassign_all);
                    prop_assert_eq!(c.file.get(g), Some(r));
                }
            }
        }
        for (g, r) in c.file.iter().filter(|(g, _)| !present.contains_key(g)) {
            let gone = a.decisions.iter().any(|d| matches!(d,
                Decision::ReservationDropped { absent, .. } | Decision::ReservationReclaimed { absent, .. } if *absent == g));
            prop_assert_eq!(a.map.get(g).is_none(), gone || c.policy.reassign_all, "{} {}", g, r);
            // A new range never lands on a live reservation.
            if a.map.get(g).is_some() {
                prop_assert!(a.ranges.values().all(|own| !own.overlaps(r)));
            }
        }

        // A port whose current LIDs are valid and collide with no one's keeps them.
        if !c.policy.reassign_all {
            let claims: Vec<(Guid, LidRange)> = present.values()
                .filter_map(|p| LidRange::new(p.lid, c.policy.lmc_for(p.role)).ok().map(|r| (p.guid, r)))
                .collect();
            for (g, r) in &claims {
                if claims.iter().all(|(h, s)| h == g || !s.overlaps(*r)) {
                    prop_assert_eq!(a.ranges[g], *r);
                }
            }
        }

        // Changes are exactly the ports whose base or (programmable) LMC moves.
        for (g, r) in &a.ranges {
            let p = present[g];
            let lmc_moves = p.role != SWITCH && p.lmc != r.lmc();
            prop_assert_eq!(a.changes.iter().any(|ch| ch.guid == *g), p.lid != r.base() || lmc_moves);
        }

        // Idempotent: once programmed, the next sweep changes nothing.
        let running = apply(&c.ports, &a);
        let policy = c.policy.with_reassign_all(false);
        let b = assign_lids(&running, &a.map, c.sm, &policy);
        prop_assert!(b.changes.is_empty(), "{:?}", b.changes);
        prop_assert_eq!(&b.ranges, &a.ranges);
        prop_assert_eq!(&b.map, &a.map);
    }
}
