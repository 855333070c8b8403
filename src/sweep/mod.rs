//! Sweeping the fabric: the heavy sweep's discovery (breadth-first over
//! directed routes, keeping what it knew when SMPs are lost), what it
//! learned (`crate::subnet`), the light sweep between heavy ones, and the
//! targeted discovery a reaction to a change runs (`react`).

pub mod core;
pub mod discovery;
pub mod light;
pub mod react;
