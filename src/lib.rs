//! ibsm: an InfiniBand subnet manager and subnet administrator.

pub mod backend;
pub mod cli;
pub mod config;
pub mod election;
pub mod lid;
pub mod mad;
pub mod metrics;
pub mod probe;
pub mod route_cli;
pub mod runtime;
pub mod sa_cli;
pub mod service;
pub mod sim;
pub mod sm;
pub mod topology;
pub mod transport;
pub mod types;

pub use types::{Guid, Lid, PortNum};
