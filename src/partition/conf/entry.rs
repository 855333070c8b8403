//! What the grammar reads from one entry, as the builder takes it: the
//! definition before ':' ([`Header`]) and the group parameters as written,
//! each with where ([`Written`]). Both the parser and the builder use these
//! and neither owns them.

use super::error::{Fail, Pos, Problem};
use super::value::{number_upto, parse_mtu, parse_rate, Flag};
use super::ConfWarning;
use crate::partition::Membership;

/// Group parameters as written, each with where.
#[derive(Debug, Clone, Default)]
pub(super) struct Written {
    pub(super) mtu: Option<(u8, Pos)>,
    pub(super) rate: Option<(u8, Pos)>,
    pub(super) sl: Option<(u8, Pos)>,
    pub(super) q_key: Option<(u32, Pos)>,
    pub(super) tclass: Option<(u8, Pos)>,
    pub(super) flow_label: Option<(u32, Pos)>,
    pub(super) scopes: Vec<(u8, Pos)>,
}

/// Sets a parameter once per entry: a second, different value is an error.
fn set_once<T: PartialEq + Copy>(slot: &mut Option<(T, Pos)>, v: T, at: Pos, flag: Flag) -> Result<(), Fail> {
    match slot {
        Some((old, _)) if *old != v => Err((at, Problem::RepeatedFlag { flag: flag.name() })),
        Some(_) => Ok(()),
        None => {
            *slot = Some((v, at));
            Ok(())
        }
    }
}

impl Written {
    /// Applies one group flag's value.
    pub(super) fn apply(
        &mut self,
        flag: Flag,
        value: &str,
        at: Pos,
        warnings: &mut Vec<ConfWarning>,
    ) -> Result<(), Fail> {
        let fail = |p| (at, p);
        match flag {
            Flag::Mtu => set_once(&mut self.mtu, parse_mtu(value).map_err(fail)?, at, flag),
            Flag::Rate => {
                let (code, warning) = parse_rate(value).map_err(fail)?;
                if let Some(message) = warning {
                    warnings.push(ConfWarning { at, message });
                }
                set_once(&mut self.rate, code, at, flag)
            }
            Flag::Sl => set_once(&mut self.sl, number_upto("sl", value, 0, 15).map_err(fail)? as u8, at, flag),
            Flag::Scope => {
                let s = number_upto("scope", value, 1, 15).map_err(fail)? as u8;
                if !self.scopes.iter().any(|&(t, _)| t == s) {
                    self.scopes.push((s, at));
                }
                Ok(())
            }
            Flag::QKey => {
                let q = number_upto("Q_Key", value, 0, u64::from(u32::MAX)).map_err(fail)? as u32;
                // 0 is OpenSM's "not given": the default Q_Key applies.
                if q == 0 {
                    return Ok(());
                }
                set_once(&mut self.q_key, q, at, flag)
            }
            Flag::TClass => {
                set_once(&mut self.tclass, number_upto("TClass", value, 0, 255).map_err(fail)? as u8, at, flag)
            }
            Flag::FlowLabel => set_once(
                &mut self.flow_label,
                number_upto("FlowLabel", value, 0, 0xf_ffff).map_err(fail)? as u32,
                at,
                flag,
            ),
            Flag::Ipoib | Flag::DefMember | Flag::Indx0 => Err((at, Problem::NotAGroupFlag(flag.name().into()))),
        }
    }
}

/// A P_Key as a definition wrote it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct PKeyWord {
    /// The low 15 bits: the partition.
    pub(super) partition: u16,
    /// The value written, bit 15 included: two spellings of one partition
    /// are worth telling the operator about.
    pub(super) written: u16,
    pub(super) at: Pos,
}

/// What a definition (the part before ':') said.
pub(super) struct Header {
    pub(super) start: Pos,
    pub(super) name: Option<(String, Pos)>,
    pub(super) pkey: Option<PKeyWord>,
    pub(super) ipoib: bool,
    pub(super) indx0: bool,
    pub(super) defmember: Option<Membership>,
    pub(super) written: Written,
}
