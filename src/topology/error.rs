//! Errors of the topology layer: reading net files, checking a model,
//! writing it back, parsing generator specs.
//!
//! A `Problem` is what is wrong with a fabric description as such (a port
//! cabled twice, a duplicate GUID); it names nodes by name so the message is
//! useful without the model at hand. The reader wraps a `Problem` with the
//! file and line of the declaration that caused it.

use std::path::PathBuf;

use crate::types::Guid;

/// Something wrong with a fabric description, independent of its source.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    // Nodes.
    #[error("node name is empty (node #{index})")]
    EmptyName { index: usize },
    #[error("node name `{name}` is defined twice")]
    DuplicateName { name: String },
    #[error("node `{node}` declares {num_ports} ports (1..=254 allowed)")]
    BadPortCount { node: String, num_ports: u32 },
    #[error("GUID {guid} is the node GUID of both `{first}` and `{second}`")]
    DuplicateNodeGuid { guid: Guid, first: String, second: String },
    #[error("GUID {guid} is the port GUID of both `{first}` and `{second}`")]
    DuplicatePortGuid { guid: Guid, first: String, second: String },
    #[error("node `{node}` has {found} port GUIDs, a {kind} with {num_ports} ports needs {expected}")]
    PortGuidCount { node: String, kind: &'static str, num_ports: u8, expected: usize, found: usize },

    // Links.
    #[error("link #{link} refers to node index {index}, there are {nodes} nodes")]
    NodeIndexOutOfRange { link: usize, index: usize, nodes: usize },
    #[error("`{node}` port {port} links to `{remote}`, which is not defined")]
    DanglingLink { node: String, port: u8, remote: String },
    #[error("`{node}` port {port} is beyond its {num_ports} ports")]
    PortOutOfRange { node: String, port: u32, num_ports: u8 },
    #[error("`{node}` port 0 cannot be cabled (it is a switch's management port or absent on a CA)")]
    PortZero { node: String },
    #[error("`{node}` port {port} is cabled twice")]
    PortCabledTwice { node: String, port: u8 },
    #[error("`{node}` port {port} is cabled to itself")]
    PortLoop { node: String, port: u8 },
    #[error(
        "`{node}` port {port} says it links to `{remote}` port {remote_port}, \
         but `{remote}` lists nothing on that port (ibsim rejects one-sided links)"
    )]
    OneSidedLink { node: String, port: u8, remote: String, remote_port: u8 },
    #[error(
        "`{node}` port {port} says it links to `{remote}` port {remote_port}, \
         but `{remote}` port {remote_port} says it links to `{remote_says}` port {remote_says_port}"
    )]
    ContradictoryLink {
        node: String,
        port: u8,
        remote: String,
        remote_port: u8,
        remote_says: String,
        remote_says_port: u8,
    },
    #[error("link `{node}` port {port}: the two ends enable no common {what} (masks {ours:#x} and {theirs:#x})")]
    NoCommonRate { node: String, port: u8, what: &'static str, ours: u8, theirs: u8 },
    #[error("link `{node}` port {port}: {what} code {value:#x} is not a single valid IBA value")]
    BadLinkRate { node: String, port: u8, what: &'static str, value: u8 },
}

impl Problem {
    /// The node a problem is best reported at (the later of two).
    pub fn node_name(&self) -> Option<&str> {
        use Problem::*;
        match self {
            EmptyName { .. } | NodeIndexOutOfRange { .. } => None,
            DuplicateName { name } => Some(name),
            DuplicateNodeGuid { second, .. } | DuplicatePortGuid { second, .. } => Some(second),
            BadPortCount { node, .. }
            | PortGuidCount { node, .. }
            | DanglingLink { node, .. }
            | PortOutOfRange { node, .. }
            | PortZero { node }
            | PortCabledTwice { node, .. }
            | PortLoop { node, .. }
            | OneSidedLink { node, .. }
            | ContradictoryLink { node, .. }
            | NoCommonRate { node, .. }
            | BadLinkRate { node, .. } => Some(node),
        }
    }
}

/// Why a topology could not be read, generated or written.
#[derive(Debug, thiserror::Error)]
pub enum TopologyError {
    // Reading.
    #[error("{}: {source}", file.display())]
    Io { file: PathBuf, source: std::io::Error },
    #[error("{}:{line}: expected {expected}, found `{found}`", file.display())]
    Parse { file: PathBuf, line: usize, expected: &'static str, found: String },
    #[error("{}:{line}: {what} is not supported", file.display())]
    Unsupported { file: PathBuf, line: usize, what: &'static str },
    #[error("{}:{line}: include of `{}`: {reason}", file.display(), target.display())]
    Include { file: PathBuf, line: usize, target: PathBuf, reason: String },
    #[error("{}:{line}: {problem}", file.display())]
    Semantic { file: PathBuf, line: usize, problem: Problem },

    // Checking a model.
    #[error("invalid topology: {0}")]
    Invalid(#[from] Problem),

    // Writing.
    #[error("node `{node}` cannot be written in ibsim's net format: {reason}")]
    Unrepresentable { node: String, reason: String },

    // Generating.
    #[error(transparent)]
    Spec(#[from] SpecError),
}

/// A generator spec string that could not be understood or built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SpecError {
    #[error("unknown generator `{kind}` (expected one of: {known})")]
    UnknownKind { kind: String, known: &'static str },
    #[error("{kind}: unknown key `{key}` (accepted: {accepted})")]
    UnknownKey { kind: &'static str, key: String, accepted: &'static str },
    #[error("{kind}: key `{key}` given twice")]
    DuplicateKey { kind: &'static str, key: String },
    #[error("{kind}: missing `{key}`")]
    MissingKey { kind: &'static str, key: &'static str },
    #[error("{kind}: `{key}={value}`: {reason}")]
    BadValue { kind: &'static str, key: &'static str, value: String, reason: String },
    #[error("{kind}: `{item}` is not `key=value`")]
    Malformed { kind: &'static str, item: String },
    #[error("{kind}: {reason}")]
    Infeasible { kind: &'static str, reason: String },
}
