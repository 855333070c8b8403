//! ibsm: an InfiniBand subnet manager and subnet administrator.

pub mod cmd;
pub mod config;
pub mod dump;
pub mod election;
pub mod http;
pub mod lid;
pub mod logging;
pub mod mad;
pub mod partition;
pub mod perfmgr;
pub mod program;
pub mod rmpp;
pub mod runtime;
pub mod sa;
pub mod sim;
pub mod sweep;
pub mod topology;
pub mod transport;
pub mod types;

pub use types::{Guid, Lid, PortNum};
