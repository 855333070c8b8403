//! Programming the fabric: what the SM wants it to hold against what it
//! holds. The planner (`planner`) turns what a sweep found into the fabric
//! the SM wants: LID assignment (`crate::lid`), routing ([`routes`],
//! [`qos`]) and the Sets that bring every port to ACTIVE ([`sets`]), alias
//! GUIDs included ([`guids`]), and P_Key tables and partition enforcement
//! ([`pkeys`]).
//!
//! [`SubnetManager`] (`manager`) is the glue: it keeps what outlives a
//! sweep, gathers the planner's inputs and sends the plan.
//!
//! Nothing here touches a transport: every SMP goes through the
//! [`SmpDriver`](crate::sweep::core::SmpDriver) the SM was built with (the runtime's, over a transport),
//! as reads and Sets described by cores ([`crate::sweep::core::SmpCore`]).

pub mod guids;
pub mod lft_order;
mod manager;
pub mod mcast;
pub mod mfts;
pub mod partitions;
pub mod pkeys;
mod planner;
pub mod qos;
mod reads;
pub mod routes;
pub mod sets;
#[cfg(test)]
mod test_nodes;

pub use manager::{Discovered, Reaction, SubnetManager};

/// Why a heavy sweep could not program the fabric.
#[derive(Debug, thiserror::Error)]
pub enum SweepError {
    #[error("the SM's own node did not answer NodeInfo: {0}")]
    OwnNodeUnreadable(String),
    #[error("LID configuration: {0}")]
    Lid(String),
    #[error(transparent)]
    Route(#[from] routes::RouteError),
}
