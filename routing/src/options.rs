//! What engines may use beyond the fabric itself. Its own module so that
//! the engines and the engine table in [`crate::engine`] both depend on it,
//! and not on each other.

use std::borrow::Cow;
use std::collections::{HashMap, HashSet};

use crate::error::RoutingError;
use crate::fabric::RoutingFabric;
use crate::guidfile::{check_known, GuidEntry, GuidKind};

/// The most data VLs a port can have (IBA 14.2.5.6, PortInfo:VLCap 1-15).
pub const MAX_DATA_VLS: u8 = 15;

/// Engine inputs other than the fabric.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineOptions {
    /// Data VLs every port supports (1-15): the budget for deadlock
    /// avoidance layers (dfsssp, nue, dor on tori).
    pub max_vls: u8,
    /// Root switches (updn, dnup, ftree); empty = detect automatically.
    pub root_guids: Vec<u64>,
    /// Compute-node port GUIDs (ftree, dfsssp); empty = every end port. A
    /// CA's or router's node GUID stands for its end ports (see
    /// [`EngineOptions::with_port_guids`]).
    pub cn_guids: Vec<u64>,
    /// I/O-node port GUIDs (ftree); node GUIDs as for `cn_guids`.
    pub io_guids: Vec<u64>,
    /// How much work the engines may spend balancing their tables.
    pub effort: Effort,
}

/// How much the engines that search for balance (updn, nue on one VL) may
/// spend: the searches cost tens to hundreds of milliseconds where
/// the routing itself costs a few.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Effort {
    /// Every search: a start, a heavy sweep.
    #[default]
    Full,
    /// No search: up*/down* from the detected roots only, Nue from its own
    /// tables alone (no up*/down* or dragonfly start), refined on a tenth
    /// of the budget. For a fabric that just lost a part its tables could
    /// not be repaired around: traffic waits on these tables, and the
    /// part's return brings back the tables of the last full run.
    Quick,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions {
            max_vls: 8,
            root_guids: Vec::new(),
            cn_guids: Vec::new(),
            io_guids: Vec::new(),
            effort: Effort::Full,
        }
    }
}

impl EngineOptions {
    /// Refuses a VL budget no port can have: 0, or above 15.
    pub fn check(&self) -> Result<(), RoutingError> {
        if self.max_vls == 0 || self.max_vls > MAX_DATA_VLS {
            return Err(RoutingError::VlBudget { given: self.max_vls });
        }
        Ok(())
    }

    /// Checks every GUID list against `fabric`: `root_guids` must name
    /// switches, `cn_guids` and `io_guids` end ports by port GUID or by
    /// their node's GUID (what [`check_known`] accepts in a GUID file).
    ///
    /// The first GUID that names nothing of the right kind is
    /// [`RoutingError::Input`] with `file` the option's name (`root_guids`,
    /// `cn_guids`, `io_guids`), `line` its 1-based place in the list and a
    /// problem naming the GUID: a GUID the operator listed that the fabric
    /// lacks is a typo or a stale file, and routing as if it were not there
    /// would hide that. GUIDs of every connected part count, so a root in
    /// a part an engine does not route passes here.
    ///
    /// Free when the lists are empty; O(N + G) for N nodes and G listed
    /// GUIDs otherwise.
    pub fn check_against(&self, fabric: &RoutingFabric) -> Result<(), RoutingError> {
        let entries = |guids: &[u64]| -> Vec<GuidEntry> {
            guids.iter().enumerate().map(|(i, &guid)| GuidEntry { line: i + 1, guid }).collect()
        };
        for (list, name, kind) in [
            (&self.root_guids, "root_guids", GuidKind::Switch),
            (&self.cn_guids, "cn_guids", GuidKind::EndPort),
            (&self.io_guids, "io_guids", GuidKind::EndPort),
        ] {
            if !list.is_empty() {
                check_known(&entries(list), fabric, name, kind)?;
            }
        }
        Ok(())
    }

    /// The options with every node GUID in `cn_guids` and `io_guids`
    /// replaced by the port GUIDs of that node's end ports, since the
    /// engines match port GUIDs. A GUID that is some end port's port GUID,
    /// or no GUID of the fabric at all, stays as it is (and each GUID stays
    /// once). Borrows `self` when nothing changes, always when both lists
    /// are empty. O(N + G).
    pub fn with_port_guids(&self, fabric: &RoutingFabric) -> Cow<'_, EngineOptions> {
        if self.cn_guids.is_empty() && self.io_guids.is_empty() {
            return Cow::Borrowed(self);
        }
        let ports: HashSet<u64> = fabric.end_ports().iter().map(|e| e.port_guid).collect();
        let mut ports_of_node: HashMap<u64, Vec<u64>> = HashMap::new();
        for e in fabric.end_ports() {
            ports_of_node.entry(e.node_guid).or_default().push(e.port_guid);
        }
        let is_node = |g: &u64| !ports.contains(g) && ports_of_node.contains_key(g);
        if !self.cn_guids.iter().chain(&self.io_guids).any(is_node) {
            return Cow::Borrowed(self);
        }
        let to_ports = |guids: &[u64]| -> Vec<u64> {
            let mut seen = HashSet::new();
            guids
                .iter()
                .flat_map(|g| if is_node(g) { ports_of_node[g].clone() } else { vec![*g] })
                .filter(|g| seen.insert(*g))
                .collect()
        };
        Cow::Owned(EngineOptions {
            cn_guids: to_ports(&self.cn_guids),
            io_guids: to_ports(&self.io_guids),
            ..self.clone()
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vl_budget_outside_one_to_fifteen_is_refused() {
        for bad in [0u8, 16, 255] {
            let e = EngineOptions { max_vls: bad, ..EngineOptions::default() }.check().unwrap_err();
            assert_eq!(e, RoutingError::VlBudget { given: bad });
            assert!(e.to_string().contains(&format!("{bad}")), "{e}");
        }
        for good in [1u8, 8, 15] {
            assert!(EngineOptions { max_vls: good, ..EngineOptions::default() }.check().is_ok());
        }
    }

    /// A switch and a two-port CA (node 0xc0, ports 0xc1 and 0xc2).
    fn two_port_ca() -> RoutingFabric {
        use crate::fabric::{EndPort, PortEnd, Switch};
        let mut b = RoutingFabric::builder();
        let s = b.add_switch(Switch::new(0xa0, 4, 1)).unwrap();
        for (i, port) in [(1u8, 0xc1), (2, 0xc2)] {
            let e = b.add_end_port(EndPort::new(0xc0, port, i, 1 + u16::from(i))).unwrap();
            b.connect(PortEnd::End(e), PortEnd::Switch(s, i)).unwrap();
        }
        b.build().unwrap()
    }

    #[test]
    fn node_guids_stand_for_every_port_of_the_node() {
        let f = two_port_ca();
        let o = EngineOptions { cn_guids: vec![0xc2, 0xc0], io_guids: vec![0xc0], ..EngineOptions::default() };
        assert!(o.check_against(&f).is_ok());
        let p = o.with_port_guids(&f);
        assert_eq!((p.cn_guids.as_slice(), p.io_guids.as_slice()), ([0xc2, 0xc1].as_slice(), [0xc1, 0xc2].as_slice()));
        // Port GUIDs only: nothing to change, nothing copied.
        let o = EngineOptions { cn_guids: vec![0xc1], ..EngineOptions::default() };
        assert!(matches!(o.with_port_guids(&f), Cow::Borrowed(_)));
    }

    #[test]
    fn guids_the_fabric_lacks_are_named_with_their_list_and_place() {
        let f = two_port_ca();
        let cases = [
            (EngineOptions { root_guids: vec![0xa0, 0xc0], ..EngineOptions::default() }, "root_guids", 2, "0xc0"),
            (EngineOptions { cn_guids: vec![0xc1, 0xc2, 0xa0], ..EngineOptions::default() }, "cn_guids", 3, "0xa0"),
            (EngineOptions { io_guids: vec![0x99], ..EngineOptions::default() }, "io_guids", 1, "0x99"),
        ];
        for (o, list, place, guid) in cases {
            let Err(RoutingError::Input { file, line, problem }) = o.check_against(&f) else { panic!("{list}") };
            assert_eq!((file.as_str(), line), (list, place));
            assert!(problem.contains(&format!("0x{:0>16}", &guid[2..])), "{problem}");
        }
    }
}
