//! Identifier newtypes shared by every layer: GUIDs, LIDs, port numbers.

use std::fmt;

/// A 64-bit EUI-64 globally unique identifier (node, port or system GUID).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, serde::Serialize, serde::Deserialize)]
pub struct Guid(pub u64);

impl fmt::Debug for Guid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#018x}", self.0)
    }
}

impl fmt::Display for Guid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:#018x}", self.0)
    }
}

/// A 16-bit local identifier. Unicast LIDs are 0x0001..=0xBFFF (IBA 4.1.3).
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, serde::Serialize, serde::Deserialize)]
pub struct Lid(pub u16);

impl Lid {
    pub const UNASSIGNED: Lid = Lid(0);
    pub const UNICAST_MAX: Lid = Lid(0xBFFF);
    pub const MULTICAST_MIN: Lid = Lid(0xC000);
    pub const PERMISSIVE: Lid = Lid(0xFFFF);

    pub fn is_unicast(self) -> bool {
        (1..=Self::UNICAST_MAX.0).contains(&self.0)
    }
    pub fn is_multicast(self) -> bool {
        (Self::MULTICAST_MIN.0..Self::PERMISSIVE.0).contains(&self.0)
    }
}

impl fmt::Debug for Lid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl fmt::Display for Lid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A physical port number on a node; 0 is a switch's management port.
pub type PortNum = u8;

/// The most ports a node may have (IBA 14.2.5.3, NodeInfo.NumPorts).
pub const MAX_PORTS: u8 = 254;

/// The longest directed-route path, in hops (IBA 14.2.1.2).
pub const MAX_DR_HOPS: usize = 63;
