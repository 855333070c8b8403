//! What changed in a fabric between two looks at it: the typed change set
//! a reaction to traps or to a light sweep computes (what the ports say now
//! against what the SM knew), each change naming the node, the port and
//! the directed path it concerns. A change set that cannot be bounded
//! (something unknown where a known thing stood) says why, and the SM
//! sweeps the fabric whole instead.

use std::fmt;

use crate::mad::DrPath;
use crate::types::Guid;

/// What asked the SM to look.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Trigger {
    /// Trap 128 (link state change) from a switch.
    LinkStateTrap,
    /// Trap 144 (capability, system image GUID or link speed change) from
    /// an end port.
    PortChangeTrap,
    /// The light sweep found SwitchInfo.PortStateChange set.
    LightSweep,
    /// A flapping cable was put on hold, or its hold ended: its ends are
    /// looked at again.
    FlapDamping,
    /// The last reaction routed quickly around a loss
    /// ([`crate::subnet::RoutingRun::quick`]) and the fabric has been quiet
    /// since: routed again with every balance search.
    Rebalance,
}

impl fmt::Display for Trigger {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Trigger::LinkStateTrap => "trap 128",
            Trigger::PortChangeTrap => "trap 144",
            Trigger::LightSweep => "light sweep",
            Trigger::FlapDamping => "flap damping",
            Trigger::Rebalance => "rebalance",
        })
    }
}

/// One node the SM knows, where to look.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Suspect {
    pub guid: Guid,
    /// An end port that trapped; `None`: every port of the node (a switch).
    pub port: Option<u8>,
    /// It did not answer over the path the SM knew (a cable on that path
    /// may be what went down): read once the other suspects' changes have
    /// given it a path that works, and gone if none is left.
    pub silent: bool,
}

/// What happened at one place.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ChangeKind {
    /// The cable at this port went down (`peer`: who was at its far end).
    LinkDown,
    /// A cable came up between two known ports (`peer`: the far end).
    LinkUp,
    /// The link went down and came back (`peer`: the far end, which may
    /// have rebooted).
    LinkRetrained,
    /// The node was reset: a switch found with LinearFDBTop 0, its tables
    /// lost.
    NodeReset,
    /// The node cannot be reached any more and leaves the subnet.
    NodeGone,
    /// A node the subnet did not hold was found behind a port (`peer`: the
    /// port it was found through), and read as a discovery reads it.
    NodeNew,
    /// The port's PortInfo differs in something other than its link.
    PortChanged,
    /// A known node answered behind this port (`peer`: its port) though
    /// it was cabled elsewhere (`was`: its old far end, whose link is
    /// down): a cable moved, or something answering with another node's
    /// GUID. Logged as a warning and counted.
    Moved,
}

impl ChangeKind {
    pub const ALL: [ChangeKind; 8] = [
        ChangeKind::LinkDown,
        ChangeKind::LinkUp,
        ChangeKind::LinkRetrained,
        ChangeKind::NodeReset,
        ChangeKind::NodeGone,
        ChangeKind::NodeNew,
        ChangeKind::PortChanged,
        ChangeKind::Moved,
    ];

    /// A name for logs, metrics labels and `/status`.
    pub fn label(self) -> &'static str {
        match self {
            ChangeKind::LinkDown => "link_down",
            ChangeKind::LinkUp => "link_up",
            ChangeKind::LinkRetrained => "link_retrained",
            ChangeKind::NodeReset => "node_reset",
            ChangeKind::NodeGone => "node_gone",
            ChangeKind::NodeNew => "node_new",
            ChangeKind::PortChanged => "port_changed",
            ChangeKind::Moved => "moved",
        }
    }
}

/// One change, with the node, port and path it concerns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Change {
    pub kind: ChangeKind,
    pub guid: Guid,
    pub name: String,
    pub port: u8,
    pub path: DrPath,
    pub peer: Option<(Guid, u8)>,
    /// For [`ChangeKind::Moved`]: where `peer` was cabled before.
    pub was: Option<(Guid, u8)>,
}

impl fmt::Display for Change {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let what = match self.kind {
            ChangeKind::LinkDown => "link down",
            ChangeKind::LinkUp => "link up",
            ChangeKind::LinkRetrained => "link retrained",
            ChangeKind::NodeReset => "node reset",
            ChangeKind::NodeGone => "node gone",
            ChangeKind::NodeNew => "node new",
            ChangeKind::PortChanged => "port changed",
            ChangeKind::Moved => "known node found here",
        };
        write!(f, "{what}: {} '{}' port {} at {}", self.guid, self.name, self.port, self.path)?;
        if let Some((g, p)) = self.peer {
            write!(f, " (far end {g} port {p})")?;
        }
        if let Some((g, p)) = self.was {
            write!(f, ", cabled to {g} port {p} before: a cable moved, or another node answering with its GUID")?;
        }
        Ok(())
    }
}

/// What a reaction found: the changes, or why they cannot be bounded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ChangeSet {
    pub changes: Vec<Change>,
    /// Why the SM must sweep the fabric whole instead (the first reason).
    pub unbounded: Option<String>,
    /// SMPs the reaction read (Gets).
    pub reads: usize,
    /// Ports cabled to another switch not read, because that switch's
    /// SwitchInfo reported no port state change.
    pub vouched: usize,
}

impl ChangeSet {
    pub fn count(&self, kind: ChangeKind) -> usize {
        self.changes.iter().filter(|c| c.kind == kind).count()
    }

    /// One line: how many of each kind.
    pub fn summary(&self) -> String {
        let kinds = [
            (ChangeKind::LinkDown, "links down"),
            (ChangeKind::LinkUp, "links up"),
            (ChangeKind::LinkRetrained, "links retrained"),
            (ChangeKind::NodeReset, "nodes reset"),
            (ChangeKind::NodeGone, "nodes gone"),
            (ChangeKind::NodeNew, "nodes new"),
            (ChangeKind::PortChanged, "ports changed"),
            (ChangeKind::Moved, "nodes moved"),
        ];
        let parts: Vec<String> = kinds
            .iter()
            .filter_map(|&(k, name)| {
                let n = self.count(k);
                (n > 0).then(|| format!("{n} {name}"))
            })
            .collect();
        if parts.is_empty() {
            "no change".into()
        } else {
            parts.join(", ")
        }
    }
}

/// How a sweep that programmed came about: a heavy sweep, or a reaction to
/// a bounded change set.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum SweepKind {
    #[default]
    Heavy,
    Reaction {
        trigger: Trigger,
        changes: ChangeSet,
    },
}
