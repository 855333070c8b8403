//! Latency figures of a flood of queries (`ibsm sa flood`, `ibsm sa
//! join-flood`): quantiles from the answered queries' samples.

use serde::Serialize;

/// Latency of the answered queries, in milliseconds.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
pub struct Latency {
    pub p50: f64,
    pub p90: f64,
    pub p99: f64,
    pub max: f64,
    pub mean: f64,
}

impl Latency {
    /// From microsecond samples (sorted here).
    pub fn of(mut us: Vec<u64>) -> Latency {
        if us.is_empty() {
            return Latency::default();
        }
        us.sort_unstable();
        let at = |q: f64| us[((us.len() as f64 * q).ceil() as usize).clamp(1, us.len()) - 1] as f64 / 1000.0;
        Latency {
            p50: at(0.50),
            p90: at(0.90),
            p99: at(0.99),
            max: *us.last().unwrap() as f64 / 1000.0,
            mean: us.iter().sum::<u64>() as f64 / us.len() as f64 / 1000.0,
        }
    }
}
