//! [`validate`]: the outcome, length and stretch of every (source, LID)
//! pair, and the all-to-all link loads, from one memoised walk per LID (see
//! the module documentation of [`super`] for the method and its cost).

use super::loads::load_stats;
use super::walk::{Walker, K_BLACK_HOLE, K_DELIVERED, K_LOOP, NONE};
use super::{Failure, LinkLoads, LoadStats, Report, MAX_FAILURE_EXAMPLES};
use crate::fabric::{NodeRef, PortEnd, RoutingFabric, SwitchId};
use crate::lft::Routes;

/// Traces every (source, destination LID) pair through `routes`; see the
/// module documentation for the method and its cost.
pub fn validate(f: &RoutingFabric, routes: &Routes) -> Report {
    validate_with_loads(f, routes).0
}

/// [`validate`], also returning the all-to-all load of every directed link.
pub fn validate_with_loads(f: &RoutingFabric, routes: &Routes) -> (Report, LinkLoads) {
    let ns = f.num_switches();
    let ne = f.num_end_ports();

    // End ports hanging off each switch.
    let attached = f.end_ports_per_switch();

    // Destination LIDs grouped by the switch they hang off, so that one BFS
    // serves them all; LIDs of end ports that hang off no switch apart.
    let mut by_switch: Vec<Vec<(u16, NodeRef)>> = vec![Vec::new(); ns];
    let mut floating: Vec<(u16, NodeRef)> = Vec::new();
    let mut destination_lids = 0usize;
    for s in f.switch_ids() {
        for lid in f.switch(s).lids() {
            by_switch[s.index()].push((lid as u16, NodeRef::Switch(s)));
            destination_lids += 1;
        }
    }
    for e in f.end_port_ids() {
        for lid in f.end_port(e).lids() {
            let item = (lid as u16, NodeRef::End(e));
            match f.attached_switch(e) {
                Some((s, _)) => by_switch[s.index()].push(item),
                None => floating.push(item),
            }
            destination_lids += 1;
        }
    }

    let mut rep = Report {
        switches: ns,
        end_ports: ne,
        destination_lids,
        pairs: 0,
        delivered: 0,
        minimal: 0,
        no_path: 0,
        loops: 0,
        black_holes: 0,
        wrong_destination: 0,
        end_pairs: 0,
        end_delivered: 0,
        end_no_path: 0,
        max_stretch: 0,
        extra_hops: 0,
        hop_histogram: Vec::new(),
        inter_switch_load: LoadStats::default(),
        access_load: LoadStats::default(),
        failures: Vec::new(),
        failures_omitted: 0,
    };
    let mut failures: Vec<Failure> = Vec::new();
    let mut loads = LinkLoads { switch_ports: vec![0; f.num_switch_port_slots()], end_ports: vec![0; ne] };
    // All-to-all access links: paths leaving each switch's end ports.
    let mut delivered_from = vec![0u64; ns];
    let mut own_delivered = vec![0u64; ne];

    let mut w = Walker::new(ns);
    let mut dist = Vec::new();
    let mut queue = Vec::new();
    let mut flow = vec![0u64; ns];

    let hist = |h: &mut Vec<u64>, len: u32, n: u64| {
        if n == 0 {
            return;
        }
        let i = len as usize;
        if h.len() <= i {
            h.resize(i + 1, 0);
        }
        h[i] += n;
    };

    for d in f.switch_ids() {
        if by_switch[d.index()].is_empty() {
            continue;
        }
        f.switch_distances(d, &mut dist, &mut queue);
        // Switches and end ports that reach d by cable, the same for all of
        // d's LIDs.
        let reaching_ends: u64 = queue.iter().map(|&s| attached[s as usize]).sum();
        let reaching_nodes = queue.len() as u64 + reaching_ends;
        for &(dlid, owner) in &by_switch[d.index()] {
            w.begin();
            let to_end = matches!(owner, NodeRef::End(_));
            let owner_end = match owner {
                NodeRef::End(e) => Some(e),
                NodeRef::Switch(_) => None,
            };
            // Only switches that reach d by cable can deliver; the BFS queue
            // lists exactly those.
            for &s in &queue {
                if w.done[s as usize] != w.stamp {
                    w.walk(f, routes, Some(owner), dlid, s as usize);
                }
            }
            // Sources: every switch but the owner, every end port but the owner.
            rep.pairs += (ns + ne) as u64 - 1;
            let reachable_sources = reaching_nodes - 1;
            rep.no_path += (ns + ne) as u64 - 1 - reachable_sources;
            if to_end {
                let reachable_ends = reaching_ends - 1;
                rep.end_pairs += ne as u64 - 1;
                rep.end_no_path += ne as u64 - 1 - reachable_ends;
            }

            for &s in &queue {
                let s = s as usize;
                let is_owner_switch = owner == NodeRef::Switch(SwitchId(s as u32));
                let mut ends = attached[s];
                if s == d.index() && to_end {
                    ends -= 1;
                }
                let sw_src = u64::from(!is_owner_switch);
                let n = sw_src + ends;
                match w.kind[s] {
                    K_DELIVERED => {
                        let h = w.hops[s];
                        let shortest = dist[s] + u32::from(to_end);
                        let extra = h.saturating_sub(shortest);
                        rep.delivered += n;
                        if extra == 0 {
                            rep.minimal += n;
                        }
                        rep.max_stretch = rep.max_stretch.max(if n > 0 { extra } else { 0 });
                        rep.extra_hops += u64::from(extra) * n;
                        if to_end {
                            rep.end_delivered += ends;
                        }
                        hist(&mut rep.hop_histogram, h, sw_src);
                        hist(&mut rep.hop_histogram, h + 1, ends);
                    }
                    k => {
                        match k {
                            K_LOOP => rep.loops += n,
                            K_BLACK_HOLE => rep.black_holes += n,
                            _ => rep.wrong_destination += n,
                        }
                        match &mut w.terms[w.term[s] as usize] {
                            Failure::Loop { sources, .. }
                            | Failure::BlackHole { sources, .. }
                            | Failure::WrongDestination { sources, .. } => *sources += n,
                        }
                    }
                }
            }
            for t in w.terms.drain(..) {
                if t.sources() == 0 {
                    continue;
                }
                if failures.len() < MAX_FAILURE_EXAMPLES {
                    failures.push(t);
                } else {
                    rep.failures_omitted += 1;
                }
            }

            // All-to-all loads: end ports to this end port's base LID.
            if let Some(e) = owner_end {
                if u32::from(dlid) == f.end_port(e).lids().start {
                    for &s in &w.resolved {
                        let s = s as usize;
                        flow[s] = 0;
                        if w.kind[s] == K_DELIVERED && dist[s] != u32::MAX {
                            let mut own = attached[s];
                            if s == d.index() {
                                own -= 1;
                                own_delivered[e.index()] = 1;
                            }
                            flow[s] = own;
                            delivered_from[s] += 1;
                        }
                    }
                    for &s in w.resolved.iter().rev() {
                        let s = s as usize;
                        let fl = flow[s];
                        if fl == 0 || w.kind[s] != K_DELIVERED {
                            continue;
                        }
                        let port = routes.port(SwitchId(s as u32), dlid);
                        loads.switch_ports[f.switch_port_slot(SwitchId(s as u32), port)] += fl;
                        if w.next[s] != NONE {
                            flow[w.next[s] as usize] += fl;
                        }
                    }
                }
            }
        }
    }

    // End ports that hang off no switch: only a directly cabled peer
    // reaches them.
    for &(dlid, owner) in &floating {
        rep.pairs += (ns + ne) as u64 - 1;
        let NodeRef::End(e) = owner else { continue };
        rep.end_pairs += ne as u64 - 1;
        match f.end_peer(e) {
            Some(PortEnd::End(o)) => {
                rep.no_path += (ns + ne) as u64 - 2;
                rep.end_no_path += ne as u64 - 2;
                rep.end_delivered += 1;
                rep.delivered += 1;
                rep.minimal += 1;
                hist(&mut rep.hop_histogram, 1, 1);
                if u32::from(dlid) == f.end_port(e).lids().start {
                    loads.end_ports[o.index()] += 1;
                }
            }
            _ => {
                rep.no_path += (ns + ne) as u64 - 1;
                rep.end_no_path += ne as u64 - 1;
            }
        }
    }
    for e in f.end_port_ids() {
        if let Some((s, _)) = f.attached_switch(e) {
            loads.end_ports[e.index()] += delivered_from[s.index()] - own_delivered[e.index()];
        }
    }

    failures.sort_by_key(|x| x.lid());
    rep.failures = failures;
    let (isl, access) = load_stats(f, &loads);
    rep.inter_switch_load = isl;
    rep.access_load = access;
    (rep, loads)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{trace, BlackHoleReason, Trace, TraceEnd};
    use crate::fabric::{EndPort, EndPortId, Switch};
    use crate::lft::{Lft, UNROUTED};
    use crate::minhop::minhop;
    use crate::testfab;

    /// s0 -- s1 -- s2 in a line (s0 port 1 to s1 port 1, s1 port 2 to s2
    /// port 1), s0 also cabled to s2 (s0 port 3, s2 port 3) to close a
    /// triangle, a host on s0 port 2 (LID 10) and one on s2 port 2 (LID 11).
    fn triangle() -> (RoutingFabric, [SwitchId; 3], [EndPortId; 2]) {
        let mut b = RoutingFabric::builder();
        let s: Vec<SwitchId> = (0..3).map(|i| b.add_switch(Switch::new(0xa0 + i, 4, 1 + i as u16)).unwrap()).collect();
        let h0 = b.add_end_port(EndPort::new(0x100, 0x101, 1, 10)).unwrap();
        let h1 = b.add_end_port(EndPort::new(0x200, 0x201, 1, 11)).unwrap();
        b.connect(PortEnd::Switch(s[0], 1), PortEnd::Switch(s[1], 1)).unwrap();
        b.connect(PortEnd::Switch(s[1], 2), PortEnd::Switch(s[2], 1)).unwrap();
        b.connect(PortEnd::Switch(s[0], 3), PortEnd::Switch(s[2], 3)).unwrap();
        b.connect(PortEnd::End(h0), PortEnd::Switch(s[0], 2)).unwrap();
        b.connect(PortEnd::End(h1), PortEnd::Switch(s[2], 2)).unwrap();
        (b.build().unwrap(), [s[0], s[1], s[2]], [h0, h1])
    }

    #[test]
    fn exact_counts_on_one_switch() {
        let f = testfab::single_switch(2);
        let r = minhop(&f).unwrap();
        let (rep, loads) = validate_with_loads(&f, &r);
        // 3 LIDs, 2 sources each.
        assert_eq!((rep.destination_lids, rep.pairs, rep.delivered, rep.minimal), (3, 6, 6, 6));
        // switch->host x2, host->switch x2 are one cable; host->host two.
        assert_eq!(rep.hop_histogram, vec![0, 4, 2]);
        assert_eq!(rep.inter_switch_load.links, 0);
        assert_eq!(rep.access_load.links, 4);
        assert_eq!((rep.access_load.max, rep.access_load.at_max), (1, 4));
        assert_eq!(loads.end_ports, vec![1, 1]);
        assert_eq!(loads.switch_port(&f, SwitchId(0), 1), 1);
        let text = rep.to_string();
        assert!(text.contains("(clean)"), "{text}");
    }

    #[test]
    fn finds_black_holes_of_each_kind() {
        let (f, s, h) = triangle();
        let mut r = minhop(&f).unwrap();
        assert!(validate(&f, &r).is_clean());
        // s1 forwards LID 11 (h1) to nothing.
        r.lfts[1].set(11, UNROUTED);
        let rep = validate(&f, &r);
        // Only s1 itself uses that entry: s0 and s2 have direct routes.
        assert_eq!(rep.black_holes, 1, "{rep}");
        assert_eq!(
            rep.failures,
            vec![Failure::BlackHole {
                lid: 11,
                switch: 0xa1,
                port: UNROUTED,
                reason: BlackHoleReason::Unrouted,
                sources: 1
            }]
        );
        // s0 sends LID 11 to its empty port 4: s0 and h0 are hit.
        r.lfts[0].set(11, 4);
        let rep = validate(&f, &r);
        assert!(rep.failures.iter().any(|x| matches!(
            x,
            Failure::BlackHole { lid: 11, switch: 0xa0, port: 4, reason: BlackHoleReason::NotCabled, sources: 2 }
        )));
        assert_eq!(rep.black_holes, 3);
        // Port 9 on a 4-port switch.
        r.lfts[0].set(11, 9);
        let rep = validate(&f, &r);
        assert!(rep.failures.iter().any(|x| matches!(
            x,
            Failure::BlackHole { reason: BlackHoleReason::PortOutOfRange, port: 9, sources: 2, .. }
        )));
        assert_eq!(
            trace(&f, &r, NodeRef::End(h[0]), 11).end,
            TraceEnd::BlackHole { switch: s[0], port: 9, reason: BlackHoleReason::PortOutOfRange }
        );
        assert!(!rep.to_string().contains("(clean)"));
    }

    #[test]
    fn finds_loops_with_their_cycle() {
        let (f, s, h) = triangle();
        let mut r = minhop(&f).unwrap();
        // LID 11: s0 -> s1 (port 1), s1 -> s0 (port 1): a 2-cycle. s2
        // still delivers directly.
        r.lfts[0].set(11, 1);
        r.lfts[1].set(11, 1);
        let rep = validate(&f, &r);
        // Sources caught: s0, h0, s1.
        assert_eq!(rep.loops, 3, "{rep}");
        let cycles: Vec<&Vec<u64>> = rep
            .failures
            .iter()
            .filter_map(|x| match x {
                Failure::Loop { cycle, sources: 3, lid: 11 } => Some(cycle),
                _ => None,
            })
            .collect();
        assert_eq!(cycles.len(), 1, "{rep}");
        let mut c = cycles[0].clone();
        c.sort();
        assert_eq!(c, vec![0xa0, 0xa1]);
        let t = trace(&f, &r, NodeRef::End(h[0]), 11);
        assert_eq!(t.end, TraceEnd::Loop(s[0]));
        assert_eq!(t.hops, vec![(s[0], 1), (s[1], 1)]);
        // A longer cycle entered from outside: s2 -> s1 -> s0 -> s2 for LID 1 (s0's own LID).
        let mut r = minhop(&f).unwrap();
        r.lfts[0].set(1, 3);
        r.lfts[2].set(1, 1);
        r.lfts[1].set(1, 1);
        let rep = validate(&f, &r);
        // Sources: s1, s2, h0, h1 (s0 itself is the owner, not a source).
        assert_eq!(rep.loops, 4, "{rep}");
        assert!(rep.failures.iter().any(|x| matches!(x, Failure::Loop { cycle, .. } if cycle.len() == 3)));
    }

    #[test]
    fn finds_wrong_destinations_and_stretch() {
        let (f, s, h) = triangle();
        let mut r = minhop(&f).unwrap();
        // s0 hands LID 11 (h1's) to its own port 0.
        r.lfts[0].set(11, 0);
        let rep = validate(&f, &r);
        assert_eq!(rep.wrong_destination, 2, "{rep}");
        assert!(rep.failures.iter().any(|x| matches!(
            x,
            Failure::WrongDestination { lid: 11, switch: 0xa0, port: 0, reached: 0xa0, sources: 2 }
        )));
        assert_eq!(trace(&f, &r, NodeRef::Switch(s[0]), 11).end, TraceEnd::WrongDestination(NodeRef::Switch(s[0])));

        // s2 hands h0's LID 10 to h1: a wrong destination too.
        let mut r = minhop(&f).unwrap();
        r.lfts[2].set(10, 2);
        let rep = validate(&f, &r);
        assert!(rep.failures.iter().any(|x| matches!(x, Failure::WrongDestination { lid: 10, reached: 0x201, .. })));

        // A detour: s0 reaches LID 11 (on s2) through s1: one cable longer.
        let mut r = minhop(&f).unwrap();
        r.lfts[0].set(11, 1);
        let rep = validate(&f, &r);
        assert!(rep.is_clean());
        assert!(!rep.all_minimal());
        assert_eq!(rep.max_stretch, 1);
        assert_eq!(rep.delivered - rep.minimal, 2, "s0 and h0");
        assert_eq!(rep.extra_hops, 2, "one extra cable each");
        assert!((rep.mean_stretch() - 2.0 / rep.delivered as f64).abs() < 1e-12);
        assert_eq!(
            trace(&f, &r, NodeRef::End(h[0]), 11),
            Trace { hops: vec![(s[0], 1), (s[1], 2), (s[2], 2)], end: TraceEnd::Delivered(NodeRef::End(h[1])) }
        );
    }

    #[test]
    fn path_lengths_count_only_real_sources() {
        // s0 - s1 - s2, one host on s0: the longest path is s2 -> host
        // (3 cables); s2 has no end ports whose path would be one longer.
        let mut b = RoutingFabric::builder();
        let s: Vec<SwitchId> = (0..3).map(|i| b.add_switch(Switch::new(0xa0 + i, 4, 1 + i as u16)).unwrap()).collect();
        let h = b.add_end_port(EndPort::new(0x100, 0x101, 1, 10)).unwrap();
        b.connect(PortEnd::Switch(s[0], 1), PortEnd::Switch(s[1], 1)).unwrap();
        b.connect(PortEnd::Switch(s[1], 2), PortEnd::Switch(s[2], 1)).unwrap();
        b.connect(PortEnd::End(h), PortEnd::Switch(s[0], 2)).unwrap();
        let f = b.build().unwrap();
        let rep = validate(&f, &minhop(&f).unwrap());
        assert!(rep.is_clean() && rep.all_minimal());
        assert_eq!(rep.max_hops(), 3, "{rep}");
        // 4 LIDs x 3 sources; lengths: s0<->s1, s1<->s2, h->s0, s0->h: 1 cable
        // (6 pairs); s0<->s2, h->s1, s1->h: 2 (4 pairs); h->s2, s2->h: 3.
        assert_eq!(rep.hop_histogram, vec![0, 6, 4, 2]);
    }

    #[test]
    fn end_port_validity_ignores_switch_lids() {
        let (f, _, _) = triangle();
        let mut r = minhop(&f).unwrap();
        // s0 drops s2's own LID 3: switch traffic only.
        r.lfts[0].set(3, UNROUTED);
        let rep = validate(&f, &r);
        assert!(!rep.is_valid());
        assert!(rep.end_ports_valid(), "{rep}");
        assert_eq!((rep.end_pairs, rep.end_delivered, rep.end_no_path), (2, 2, 0));
        // s0 drops h1's LID 11: h0 no longer reaches h1.
        r.lfts[0].set(11, UNROUTED);
        let rep = validate(&f, &r);
        assert!(!rep.end_ports_valid());
        assert_eq!(rep.end_delivered, 1);
    }

    #[test]
    fn missing_tables_black_hole_everything() {
        let (f, _, _) = triangle();
        let r = Routes { lfts: vec![Lft::default(); 1], sl: None };
        let rep = validate(&f, &r);
        assert_eq!(rep.delivered, 0);
        // 5 LIDs, 4 sources each: every source enters the switches, and no
        // switch routes anything.
        assert_eq!(rep.black_holes, 5 * 4);
        assert_eq!(rep.pairs, 20);
    }

    #[test]
    fn failure_examples_are_capped_but_counts_complete() {
        let f = testfab::FatTree::new(8, 2, 32).build();
        let mut r = minhop(&f).unwrap();
        for l in &mut r.lfts {
            l.ports.iter_mut().for_each(|p| *p = UNROUTED);
        }
        let rep = validate(&f, &r);
        assert_eq!(rep.black_holes, rep.pairs - rep.no_path);
        assert_eq!(rep.failures.len(), MAX_FAILURE_EXAMPLES);
        assert!(rep.failures_omitted > 0);
        assert!(rep.failures.iter().map(Failure::sources).sum::<u64>() <= rep.black_holes);
    }

    #[test]
    fn all_to_all_loads_on_a_line() {
        // h0 - s0 - s1 - s2 - h1 through the triangle with the s0-s2 cable
        // unused: route via s1 on purpose.
        let (f, s, _) = triangle();
        let mut r = minhop(&f).unwrap();
        r.lfts[0].set(11, 1);
        r.lfts[2].set(10, 1);
        let (rep, loads) = validate_with_loads(&f, &r);
        assert_eq!(loads.switch_port(&f, s[0], 1), 1);
        assert_eq!(loads.switch_port(&f, s[1], 2), 1);
        assert_eq!(loads.switch_port(&f, s[1], 1), 1);
        assert_eq!(loads.switch_port(&f, s[0], 3), 0);
        assert_eq!(rep.inter_switch_load.links, 6);
        assert_eq!(rep.inter_switch_load.max, 1);
        assert_eq!(rep.inter_switch_load.at_max, 4);
        assert!((rep.inter_switch_load.mean - 4.0 / 6.0).abs() < 1e-9);
    }
}
