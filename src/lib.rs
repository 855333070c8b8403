//! ibsm: an InfiniBand subnet manager and subnet administrator.

pub mod config;
pub mod lid;
pub mod mad;
pub mod sm;
pub mod sim;
pub mod topology;
pub mod transport;
pub mod types;

pub use types::{Guid, Lid, PortNum};
