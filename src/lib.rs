//! ibsm: an InfiniBand subnet manager and subnet administrator.

pub mod cmd;
pub mod config;
pub mod election;
pub mod lid;
pub mod mad;
pub mod runtime;
pub mod sim;
pub mod sm;
pub mod topology;
pub mod transport;
pub mod types;

pub use types::{Guid, Lid, PortNum};
