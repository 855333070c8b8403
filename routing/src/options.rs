//! What engines may use beyond the fabric itself. Its own module so that
//! the engines and the engine table in [`crate::engine`] both depend on it,
//! and not on each other.

use crate::error::RoutingError;

/// The most data VLs a port can have (IBA 14.2.5.6, PortInfo:VLCap 1-15).
pub const MAX_DATA_VLS: u8 = 15;

/// Engine inputs other than the fabric.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EngineOptions {
    /// Data VLs every port supports (1-15): the budget for deadlock
    /// avoidance layers (dfsssp, nue, dor on tori).
    pub max_vls: u8,
    /// Root switches (updn, dnup, ftree); empty = detect automatically.
    pub root_guids: Vec<u64>,
    /// Compute-node port GUIDs (ftree, dfsssp); empty = every end port.
    pub cn_guids: Vec<u64>,
    /// I/O-node port GUIDs (ftree).
    pub io_guids: Vec<u64>,
}

impl Default for EngineOptions {
    fn default() -> Self {
        EngineOptions { max_vls: 8, root_guids: Vec::new(), cn_guids: Vec::new(), io_guids: Vec::new() }
    }
}

impl EngineOptions {
    /// Refuses a VL budget no port can have: 0, or above 15.
    pub fn check(&self) -> Result<(), RoutingError> {
        if self.max_vls == 0 || self.max_vls > MAX_DATA_VLS {
            return Err(RoutingError::VlBudget { given: self.max_vls });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vl_budget_outside_one_to_fifteen_is_refused() {
        for bad in [0u8, 16, 255] {
            let e = EngineOptions { max_vls: bad, ..EngineOptions::default() }.check().unwrap_err();
            assert_eq!(e, RoutingError::VlBudget { given: bad });
            assert!(e.to_string().contains(&format!("{bad}")), "{e}");
        }
        for good in [1u8, 8, 15] {
            assert!(EngineOptions { max_vls: good, ..EngineOptions::default() }.check().is_ok());
        }
    }
}
