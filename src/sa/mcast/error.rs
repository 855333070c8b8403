//! Why the group manager refuses a join or a leave, and the SA status
//! each refusal answers (IBA 15.2.1.2, Table 192).

use crate::mad::sa::sa_status;
use crate::types::Guid;

/// Which bound a request ran into.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cap {
    Groups,
    MembersPerGroup,
    GroupsPerPort,
    Members,
    /// No free MLID in the range.
    Mlids,
}

/// Why a join or a leave was refused; [`McError::status`] is the SA
/// status it answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum McError {
    // ---- Incomplete (ERR_REQ_INSUFFICIENT_COMPONENTS).
    /// The components missing from the mask.
    Insufficient {
        missing: u64,
    },

    // ---- The requester (ERR_REQ_INVALID_GID, ERR_REQ_DENIED).
    /// The PortGID's subnet prefix is not its port's.
    PortGidPrefix {
        asked: u64,
        port: u64,
    },
    /// A proxy join or leave by an untrusted requester for a port of
    /// another node, or one it shares no partition with.
    ProxyDenied {
        requester: Guid,
        port: Guid,
    },

    // ---- The request (ERR_REQ_INVALID).
    UnknownPort(Guid),
    /// An MTU or Rate value that is no code.
    BadCode {
        field: &'static str,
        value: u8,
    },
    JoinStateZero,
    BadMgid([u8; 16]),
    /// P_Key 0 or 0x8000 (no partition).
    BadPKey(u16),
    /// A new group needs FullMember or SendOnlyFullMember.
    CreateNeedsFullMember {
        join_state: u8,
    },
    NoSuchGroup([u8; 16]),
    NotMember(Guid),
    /// Leave bits none of, or not all of, the member's.
    LeaveBits {
        asked: u8,
        held: u8,
    },
    NotInPartition {
        port: Guid,
        pkey: u16,
    },
    /// An IPoIB group whose partition has no broadcast group.
    NoBroadcastGroup([u8; 16]),
    /// A masked parameter differs from the group's (or, creating an IPoIB
    /// group, from its broadcast group's).
    Mismatch {
        field: &'static str,
        asked: u32,
        group: u32,
    },
    /// A selector the group (or, creating it, the port) cannot satisfy.
    Unrealizable {
        field: &'static str,
        selector: u8,
        asked: u8,
        have: u8,
    },
    /// The port's link cannot carry the group's MTU or Rate.
    PortTooSlow {
        field: &'static str,
        port: u8,
        group: u8,
    },
    /// o15-0.2.1: a member that joined itself is changed only by itself.
    NotOwner(Guid),

    // ---- ERR_NO_RESOURCES.
    Full(Cap),
}

impl McError {
    /// The SA status code (IBA 15.2.1.2, Table 192) of the refusal.
    pub fn status(self) -> u16 {
        match self {
            McError::Insufficient { .. } => sa_status::INSUFFICIENT_COMPONENTS,
            McError::PortGidPrefix { .. } => sa_status::INVALID_GID,
            McError::ProxyDenied { .. } => sa_status::DENIED,
            McError::Full(_) => sa_status::NO_RESOURCES,
            _ => sa_status::REQ_INVALID,
        }
    }
}

impl std::fmt::Display for McError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let gid = |g: &[u8; 16]| std::net::Ipv6Addr::from(*g);
        match self {
            McError::Insufficient { missing } => write!(f, "component mask lacks {missing:#x}"),
            McError::PortGidPrefix { asked, port } => {
                write!(f, "PortGID prefix {asked:#018x} is not the port's {port:#018x}")
            }
            McError::ProxyDenied { requester, port } => write!(f, "port {requester} may not join or leave for {port}"),
            McError::UnknownPort(g) => write!(f, "no port {g} in the fabric"),
            McError::BadCode { field, value } => write!(f, "{field} {value} is no code"),
            McError::JoinStateZero => write!(f, "JoinState 0"),
            McError::BadMgid(g) => write!(f, "MGID {} may not be requested", gid(g)),
            McError::BadPKey(p) => write!(f, "P_Key {p:#06x} names no partition"),
            McError::CreateNeedsFullMember { join_state } => {
                write!(f, "JoinState {join_state:#x} cannot create a group (needs full or send-only full)")
            }
            McError::NoSuchGroup(g) => write!(f, "no group {}", gid(g)),
            McError::NotMember(p) => write!(f, "port {p} is no member"),
            McError::LeaveBits { asked, held } => write!(f, "leave JoinState {asked:#x}, member holds {held:#x}"),
            McError::NotInPartition { port, pkey } => write!(f, "port {port} is not in partition {pkey:#06x}"),
            McError::NoBroadcastGroup(g) => write!(f, "IPoIB group without broadcast group {}", gid(g)),
            McError::Mismatch { field, asked, group } => write!(f, "{field} {asked:#x} asked, group has {group:#x}"),
            McError::Unrealizable { field, selector, asked, have } => {
                write!(f, "{field} selector {selector} value {asked} cannot be met by {have}")
            }
            McError::PortTooSlow { field, port, group } => write!(f, "port {field} {port} below the group's {group}"),
            McError::NotOwner(p) => write!(f, "member {p} joined itself; only it may change it"),
            McError::Full(cap) => write!(f, "{cap:?} cap reached"),
        }
    }
}
