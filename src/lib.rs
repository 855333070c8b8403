//! ibsm: an InfiniBand subnet manager and subnet administrator.

pub mod mad;
pub mod probe;
pub mod topology;
pub mod transport;
pub mod types;

pub use types::{Guid, Lid, PortNum};
