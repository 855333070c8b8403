//! Link loads: the all-to-all paths per directed link and their statistics
//! per class of link (switch-to-switch, end-port access).

use serde::Serialize;

use crate::fabric::{PortEnd, RoutingFabric, SwitchId};

/// A directed cable: leaves `from` by `port`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
pub struct DirectedLink {
    pub from: u64,
    pub port: u8,
    pub to: u64,
}

/// Load statistics over a class of directed links.
#[derive(Debug, Clone, PartialEq, Serialize, Default)]
pub struct LoadStats {
    /// Directed links in the class (two per cable).
    pub links: usize,
    /// The edge forwarding index: the most paths through one link.
    pub max: u64,
    pub mean: f64,
    /// How many links carry `max`.
    pub at_max: usize,
    /// The first link (in switch, port order) carrying `max`.
    pub max_link: Option<DirectedLink>,
}

/// Paths per directed link for all-to-all among end ports (base LIDs).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LinkLoads {
    /// Indexed by [`RoutingFabric::switch_port_slot`].
    pub switch_ports: Vec<u64>,
    /// Indexed by end port: paths leaving the end port.
    pub end_ports: Vec<u64>,
}

impl LinkLoads {
    pub fn switch_port(&self, f: &RoutingFabric, s: SwitchId, port: u8) -> u64 {
        self.switch_ports[f.switch_port_slot(s, port)]
    }
}

pub(super) fn load_stats(f: &RoutingFabric, loads: &LinkLoads) -> (LoadStats, LoadStats) {
    #[derive(Default)]
    struct Acc {
        stats: LoadStats,
        sum: u64,
    }
    impl Acc {
        fn add(&mut self, load: u64, link: DirectedLink) {
            let s = &mut self.stats;
            s.links += 1;
            self.sum += load;
            if load > s.max || s.max_link.is_none() {
                s.max = load;
                s.at_max = 1;
                s.max_link = Some(link);
            } else if load == s.max {
                s.at_max += 1;
            }
        }
        fn finish(mut self) -> LoadStats {
            if self.stats.links > 0 {
                self.stats.mean = self.sum as f64 / self.stats.links as f64;
            }
            self.stats
        }
    }
    let mut isl = Acc::default();
    let mut access = Acc::default();
    for s in f.switch_ids() {
        let from = f.switch(s).guid;
        for (port, peer) in f.switch_ports(s).iter().enumerate() {
            let Some(peer) = *peer else { continue };
            let load = loads.switch_ports[f.switch_port_slot(s, port as u8)];
            match peer {
                PortEnd::Switch(n, _) => isl.add(load, DirectedLink { from, port: port as u8, to: f.switch(n).guid }),
                PortEnd::End(e) => {
                    access.add(load, DirectedLink { from, port: port as u8, to: f.end_port(e).port_guid })
                }
            }
        }
    }
    for e in f.end_port_ids() {
        let Some(peer) = f.end_peer(e) else { continue };
        let ep = f.end_port(e);
        let to = match peer {
            PortEnd::Switch(s, _) => f.switch(s).guid,
            PortEnd::End(o) => f.end_port(o).port_guid,
        };
        access.add(loads.end_ports[e.index()], DirectedLink { from: ep.port_guid, port: ep.port_num, to });
    }
    (isl.finish(), access.finish())
}
