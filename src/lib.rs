//! ibsm: an InfiniBand subnet manager and subnet administrator.
//!
//! # Layers
//! The crate stands in six layers. A module imports only from its own layer
//! or the layers below it, and modules of one layer import each other in
//! one direction only (no circle). `tests/layering.rs` reads every
//! `crate::` path of `src/` against the table below and fails on an arrow
//! that points up; the table is the one place that says where a module
//! stands.
//!
//! ```text
//! layer 6  surfaces   cmd http
//! layer 5  runtime    runtime logging
//! layer 4  io         transport sim
//! layer 3  cores      exchange rmpp election sweep program sa perfmgr dump
//! layer 2  models     topology lid partition subnet config
//! layer 1  wire       types mad datagram
//! ```
//!
//! - **wire**: IBA layouts (`mad`, one file per attribute or SA record), the
//!   newtypes (`types`) and the values every layer exchanges (`datagram`: a
//!   MAD with its address, the local port, a device's errors).
//! - **models**: the fabric as data and pure algorithms over it: topology
//!   files and generators, LID assignment, partitions, the subnet a sweep
//!   found and the snapshot it publishes (`subnet`), configuration as plain
//!   data. Routing engines live in the `ibsm-routing` crate, below all.
//! - **cores**: protocol logic with no I/O, driven by `now` and inputs:
//!   MAD transactions (`exchange`), RMPP, election, sweeps, programming,
//!   the SA, the performance manager, the OpenSM-format dumps.
//! - **io**: the umad backend, the I/O thread and the SMP/SA clients
//!   (`transport`); the in-process fabric as a device (`sim`).
//! - **runtime**: the owner task, dispatcher, drivers, timers, metrics;
//!   the tracing subscriber (`logging`).
//! - **surfaces**: HTTP and the command line (`main.rs` above them).

pub mod cmd;
pub mod config;
pub mod datagram;
pub mod dump;
pub mod election;
pub mod exchange;
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
pub mod subnet;
pub mod sweep;
pub mod topology;
pub mod transport;
pub mod types;

pub use types::{Guid, Lid, PortNum};
