//! Forwarding tables as text: OpenSM's `opensm-lfts.dump` (read and
//! written) and `ibroute` output (read), so that OpenSM's tables and ours
//! go through the same analysis.
//!
//! OpenSM's format (written by `osm_dump.c` when log flag 0x40 is on; its
//! `file` routing engine reads the same text back), one block per switch in
//! ascending GUID order:
//!
//! ```text
//! Unicast lids [0-14] of switch Lid 2 guid 0x0000000000200000 ('leaf0'):
//! 0x0001 001 # Channel Adapter portguid 0x0000000000100001: 'leaf0-h0'
//! 0x0002 000 # Switch portguid 0x0000000000200000: 'leaf0'
//! 0x0009 004 # unknown node and type
//! 14 lids dumped
//! ```
//!
//! Entries whose port is not a port of the switch (255 = unrouted) are left
//! out; the footer repeats the top LID, not the number of lines. `ibroute`
//! prints the same entries as `0x0001 001 : (Channel Adapter portguid
//! 0x...: 'desc')` under a two-line column header, the range in hex, the
//! switch named by `Lid N` or by a directed-route path, and a footer
//! counting the lines (`N valid lids dumped`, or `N lids dumped` with `-a`,
//! which also lists unrouted entries).
//!
//! The comments name the port behind each LID. Reading a dump keeps them
//! ([`LftDump::lid_claims`]), so a caller can rebuild the LID plan of the
//! fabric the dump came from before checking the tables against it
//! ([`LftDump::to_routes`]).

use thiserror::Error;

mod lfts;
mod path_sl;
mod text;

pub use lfts::{
    write_opensm_dump, write_opensm_dump_with, DumpDest, DumpEntry, DumpFormat, DumpSwitch, LftDump, LidClaim,
    NodeTypeText,
};
pub use path_sl::{parse_path_sl, write_path_sl, PATH_SL_HEADER, PATH_SL_VL_HEADER};

/// What is wrong with a dump, or with a dump against a fabric; `file` is
/// the name the caller gave, `line` 1-based.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum DumpError {
    // --- text
    #[error("{file}:{line}: {problem}")]
    Syntax { file: String, line: usize, problem: String },
    #[error("{file}: no switch tables in the dump")]
    Empty { file: String },
    #[error("{file}:{line}: switch {guid:#018x} appears twice (first at line {first_line})")]
    DuplicateSwitch { file: String, line: usize, guid: u64, first_line: usize },
    #[error("{file}:{line}: LID {lid:#06x} belongs to {first:#018x} (line {first_line}) and to {second:#018x}")]
    LidConflict { file: String, line: usize, lid: u16, first: u64, first_line: usize, second: u64 },

    // --- against the fabric
    #[error("{file}:{line}: switch {guid:#018x} (LID {}) is not in the topology", opt_lid(*lid))]
    UnknownSwitch { file: String, line: usize, guid: u64, lid: Option<u16> },
    #[error("{file}: switch {guid:#018x} (LID {lid:#06x}) of the topology has no table in the dump")]
    MissingSwitch { file: String, guid: u64, lid: u16 },
    #[error(
        "{file}:{line}: switch {guid:#018x} (LID {}): LID {lid:#06x} goes to port {port}, the switch has {num_ports} ports",
        opt_lid(*switch_lid)
    )]
    PortOutOfRange { file: String, line: usize, guid: u64, switch_lid: Option<u16>, lid: u16, port: u8, num_ports: u8 },
    #[error("{file}:{line}: switch {guid:#018x} (LID {}): LID {lid:#06x} goes to port {port}, which has no cable", opt_lid(*switch_lid))]
    NotCabled { file: String, line: usize, guid: u64, switch_lid: Option<u16>, lid: u16, port: u8 },
    #[error(
        "{file}:{line}: switch {guid:#018x} (LID {}): LID {lid:#06x} belongs to no port of the topology",
        opt_lid(*switch_lid)
    )]
    UnknownLid { file: String, line: usize, guid: u64, switch_lid: Option<u16>, lid: u16 },
    #[error(
        "{file}:{line}: switch {guid:#018x} has LID {dump_lid:#06x} in the dump but {fabric_lid:#06x} in the topology"
    )]
    SwitchLidMismatch { file: String, line: usize, guid: u64, dump_lid: u16, fabric_lid: u16 },
}

fn opt_lid(l: Option<u16>) -> String {
    l.map_or_else(|| "unknown".to_string(), |l| format!("{l:#06x}"))
}
