//! The SM service moved to [`crate::runtime`]; this name stays for callers.

pub use crate::runtime::{run, RunError, RunOptions};
