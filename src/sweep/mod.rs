//! Sweeping the fabric: the heavy sweep's discovery (breadth-first over
//! directed routes, keeping what it knew when SMPs are lost), what it
//! learned (`crate::subnet`), and the light sweep between heavy ones.

pub mod core;
pub mod discovery;
pub mod light;
