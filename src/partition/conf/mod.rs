//! The `partitions.conf` reader: OpenSM's grammar (`osm_prtn_config.c`,
//! `opensm(8)` "PARTITION CONFIGURATION"), so operators keep their files,
//! with an error naming file, line and column where OpenSM logs a warning
//! and goes on, or throws the whole file away.
//!
//! ```text
//! entry      := definition ':' properties ';'
//! definition := [Name] ['=' PKey] (',' flag)*
//! flag       := ipoib | indx0 | defmember=full|limited|both | group_flag
//! group_flag := mtu=M | rate=R | sl=N | scope=N | Q_Key=N | TClass=N | FlowLabel=N
//! properties := item ((',' | newline) item)*
//! item       := (GUID | ALL | ALL_CAS | ALL_SWITCHES | ALL_ROUTERS | SELF | NONE) ['=' full|limited|both]
//!             | 'mgid=' GID (',' group_flag)*      -- takes the rest of its line
//! ```
//!
//! `#` starts a comment that runs to the end of the line; blanks and new
//! lines may stand between any two tokens. Within the member list a line
//! break separates items as a comma does (OpenSM reads the list line by
//! line), and empty items (`a,,b`, `a, ;`) are skipped as OpenSM skips them.
//! A `mgid=` item takes the rest of its line as group flags, as in OpenSM, so
//! member ports go on other lines.
//!
//! # Numbers
//! Every number is read as C's `strtoul(s, 0)` reads it, as OpenSM does:
//! `0x` hexadecimal, a leading `0` octal, otherwise decimal. Trailing junk,
//! a sign, or a value too large for its field is an error (OpenSM would
//! truncate or warn and use a prefix).
//!
//! # P_Keys
//! The P_Key is the partition number, 0x0001..=0x7fff; 0x7fff is the
//! default partition. As in OpenSM only its low 15 bits count: bit 15 is a
//! port's membership, which the file gives per member, so `0xffff` is the
//! default partition and `0x8010` partition 0x0010 (a note in the log).
//! Two entries that write one partition both ways (`a=0x8010` and
//! `a=0x0010`) are one P_Key and merge as below, with a warning naming
//! both. A P_Key above 0xffff, or whose low 15 bits are 0 (0, 0x8000), is
//! an error: OpenSM would truncate the first to 16 bits and generate a
//! P_Key for the second, so a typo would silently name another partition.
//! An omitted P_Key is generated as OpenSM generates it (the lowest number
//! above the last one generated that no earlier entry uses), unless an
//! earlier partition has the same name, which the entry then extends. A
//! later entry that names a generated P_Key explicitly is an error: in
//! OpenSM it would silently merge two partitions.
//!
//! Entries with the same P_Key merge into one partition when they repeat
//! its name or give none; a second, different name for a P_Key is an
//! error (OpenSM merges them and keeps the first name, which hides a
//! copied line whose P_Key was not changed). The default partition is
//! always named "Default"; the file may call it otherwise (a warning). Their group
//! parameters merge too: a parameter (mtu, rate, sl, Q_Key, TClass,
//! FlowLabel) written in two entries of one P_Key must agree, or it is an
//! error; `ipoib` in any entry makes the partition an IPoIB one; `scope`s
//! add up (one broadcast group per scope, as in OpenSM). `defmember` and
//! `indx0` apply to the members of their own entry only.
//!
//! # MTU and rate: codes and names
//! `mtu=` takes the IBTA code 1..=5 (OpenSM's only form) or the size in
//! bytes, 256, 512, 1024, 2048 or 4096: the two sets do not overlap.
//!
//! `rate=` takes the IBTA rate code (IBA Table 205, PortInfo/PathRecord
//! rate enum: 2 = 2.5 Gb/s, 3 = 10, ..., 22 = 600, 23 = 800, 24 = 1200) or
//! the rate in Gb/s. The rule, which never misreads an OpenSM file:
//! - a bare number that is a rate code (2..=24) is the code, as OpenSM reads
//!   it: `rate=10` is code 10, 120 Gb/s (a warning says so for 10, 14 and
//!   20, which are also rates in Gb/s; 5 means 5 Gb/s either way);
//! - any other bare number is a rate in Gb/s: `rate=40`, `rate=100`;
//! - a number with a `g`, `gb`, `gbps` or `gb/s` suffix (any case), or with
//!   a decimal point, is always in Gb/s: `rate=10g` is 10 Gb/s (code 3),
//!   `rate=2.5` is code 2.
//!
//! # Flags
//! Flag names are case-insensitive and `_` in them is ignored, so `Q_Key`,
//! `qkey` and `QKEY` are one flag. As in OpenSM a flag may be abbreviated
//! (`def=full`), but only when the abbreviation names one flag: `s` (scope
//! or sl) is an error, where OpenSM picks scope. `indx0` is never
//! abbreviated (OpenSM compares it whole). Membership values take
//! abbreviations too, as in OpenSM's own example (`=limi`). A flag OpenSM
//! does not know is an error (OpenSM ignores it with a warning). Within one
//! entry a flag given twice must have one value, except `scope`.
//!
//! # Groups
//! Each `ipoib` partition gets its IPoIB broadcast group
//! `ff1S:401b:PPPP::ffff:ffff` (S the scope, PPPP the full-member P_Key;
//! RFC 4391 section 4, OpenSM's `osm_ipoib_broadcast_mgid`), with Q_Key
//! 0x0b1b unless `Q_Key=` says otherwise. A `mgid=` group takes its
//! parameters from its own flags, else from its partition's (TClass too,
//! which OpenSM forgets). An IP group (signature 0x401b or 0x601b in bytes
//! 2-3) must carry P_Key 0 (filled in), the partition's full P_Key, or be
//! the broadcast template, and must have the partition's MTU and rate; its
//! Q_Key defaults to 0x0b1b, other groups' to 0. `scope=` on the line (or
//! else on the partition) overwrites the MGID's scope nibble, one group per
//! scope; with no scope anywhere the MGID keeps its own scope (OpenSM
//! forces 2) unless that nibble is 0, which becomes 2. The same MGID twice
//! with the same P_Key and parameters is one group; otherwise it is an
//! error (OpenSM keeps the first silently).
//!
//! # What is not OpenSM's
//! A last entry without `;` is an error (OpenSM accepts it); the whole
//! file is refused on the first error, which is reported exactly.

mod build;
mod entry;
mod error;
mod lexer;
mod parser;
mod value;

#[cfg(test)]
mod tests;

use std::fmt;
use std::net::Ipv6Addr;
use std::path::{Path, PathBuf};

pub use error::{PartitionConfError, Pos, Problem};
pub use value::rate_tenths_gbps;

use super::{GroupParams, Membership, DEFAULT_PARTITION, FULL_MEMBER, PARTITION_MASK};
use crate::types::Guid;
use build::Builder;
use lexer::{end_pos, Lexer};
use parser::Parser;

/// The largest file `read` takes: a partitions file is a few kilobytes.
pub const MAX_FILE_LEN: u64 = 16 << 20;

/// Q_Key of IPoIB groups (RFC 4391 section 4; OpenSM's
/// `OSM_IPOIB_BROADCAST_MGRP_QKEY`).
pub const IPOIB_QKEY: u32 = 0x0b1b;

/// Link-local multicast scope (IBA 4.1.1, MGID scope nibble).
pub const SCOPE_LINK_LOCAL: u8 = 2;

/// Which ports a member item names.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PortSpec {
    /// One port by port GUID.
    Guid(Guid),
    /// Every end port: CA and router ports and switch port 0.
    All,
    AllCas,
    /// Switch port 0 of every switch.
    AllSwitches,
    AllRouters,
    /// The SM's own port.
    SelfPort,
}

/// One member item, in file order.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MemberSpec {
    pub port: PortSpec,
    /// As written (or the entry's `defmember`, else limited). `Both`
    /// means both keys only with `allow_both_pkeys`.
    pub membership: Membership,
    /// The entry had `indx0`: pin this partition at index 0 of the port.
    pub indx0: bool,
    /// `None` for the implicit members of the default partition.
    pub at: Option<Pos>,
}

/// A multicast group a partition declares.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConfGroup {
    pub mgid: [u8; 16],
    pub params: GroupParams,
    /// The partition's IPoIB broadcast group (from `ipoib`), not a `mgid=`.
    pub ipoib_broadcast: bool,
    /// The `mgid=` item, or the partition's first entry.
    pub at: Option<Pos>,
}

/// One partition: all entries with its P_Key, merged.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfPartition {
    pub name: String,
    /// Low 15 bits, 0x0001..=0x7fff.
    pub pkey: u16,
    /// The file gave no P_Key: generated as OpenSM does.
    pub pkey_generated: bool,
    /// The first entry; `None`: the default partition the file never names.
    pub at: Option<Pos>,
    pub ipoib: bool,
    /// The partition's group parameters (its broadcast group's, first
    /// scope), defaults filled in.
    pub params: GroupParams,
    /// Where `sl=` was written, if it was.
    pub sl_at: Option<Pos>,
    /// Member items of all its entries in file order; for the default
    /// partition, OpenSM's implicit ones first.
    pub members: Vec<MemberSpec>,
    /// Broadcast groups first, then `mgid=` groups, in file order.
    pub groups: Vec<ConfGroup>,
}

/// Something legal but worth telling the operator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfWarning {
    pub at: Pos,
    pub message: String,
}

impl fmt::Display for ConfWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.at, self.message)
    }
}

/// A whole `partitions.conf`, read and checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PartitionConf {
    /// `None`: no file (see [`PartitionConf::default_no_file`]).
    pub path: Option<PathBuf>,
    /// In order of first appearance; the default partition is always
    /// first.
    pub partitions: Vec<ConfPartition>,
    pub warnings: Vec<ConfWarning>,
    /// Below a warning, worth a line when the file loads: P_Keys written
    /// with bit 15 set.
    pub notes: Vec<ConfWarning>,
}

impl PartitionConf {
    /// What applies with no file: `Default=0x7fff,ipoib: ALL=full;`
    /// (OpenSM's `prtn_make_default` with no configuration).
    pub fn default_no_file() -> PartitionConf {
        let params = GroupParams::default();
        PartitionConf {
            path: None,
            partitions: vec![ConfPartition {
                name: "Default".into(),
                pkey: DEFAULT_PARTITION,
                pkey_generated: false,
                at: None,
                ipoib: true,
                params,
                sl_at: None,
                members: vec![
                    MemberSpec { port: PortSpec::All, membership: Membership::Full, indx0: false, at: None },
                    MemberSpec { port: PortSpec::SelfPort, membership: Membership::Full, indx0: false, at: None },
                ],
                groups: vec![ConfGroup {
                    mgid: ipoib_broadcast_mgid(DEFAULT_PARTITION, SCOPE_LINK_LOCAL),
                    params,
                    ipoib_broadcast: true,
                    at: None,
                }],
            }],
            warnings: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// Reads and parses `path`; an I/O error names the path.
    pub fn read(path: &Path) -> Result<PartitionConf, PartitionConfError> {
        let io = |source| PartitionConfError::Io { path: path.to_path_buf(), source };
        let len = std::fs::metadata(path).map_err(io)?.len();
        if len > MAX_FILE_LEN {
            return Err(PartitionConfError::TooLarge { path: path.to_path_buf(), len, max: MAX_FILE_LEN });
        }
        let bytes = std::fs::read(path).map_err(io)?;
        PartitionConf::parse_bytes(&bytes, path)
    }

    /// Parses file bytes: text that is not UTF-8 is an error at the first
    /// bad byte.
    pub fn parse_bytes(bytes: &[u8], path: &Path) -> Result<PartitionConf, PartitionConfError> {
        match std::str::from_utf8(bytes) {
            Ok(text) => PartitionConf::parse(text, path),
            Err(e) => {
                let good = std::str::from_utf8(&bytes[..e.valid_up_to()]).unwrap_or("");
                Err(PartitionConfError::At { path: path.to_path_buf(), at: end_pos(good), problem: Problem::NotUtf8 })
            }
        }
    }

    /// Parses the text of a file; `path` is only for messages.
    pub fn parse(text: &str, path: &Path) -> Result<PartitionConf, PartitionConfError> {
        let mut p = Parser { lex: Lexer::new(text), b: Builder::new() };
        p.file().map_err(|(at, problem)| PartitionConfError::At { path: path.to_path_buf(), at, problem })?;
        let built =
            p.b.finish().map_err(|(at, problem)| PartitionConfError::At { path: path.to_path_buf(), at, problem })?;
        Ok(PartitionConf {
            path: Some(path.to_path_buf()),
            partitions: built.partitions,
            warnings: built.warnings,
            notes: built.notes,
        })
    }

    /// The partition with this P_Key (low 15 bits).
    pub fn partition(&self, pkey: u16) -> Option<&ConfPartition> {
        let p = pkey & PARTITION_MASK;
        self.partitions.iter().find(|q| q.pkey == p)
    }
}

/// The IPoIB broadcast MGID of a partition (RFC 4391 section 4; OpenSM's
/// template `ff12:401b:ffff:0000:0000:0000:ffff:ffff` with the full-member
/// P_Key in bytes 4-5 and the scope in the low nibble of byte 1).
pub fn ipoib_broadcast_mgid(partition: u16, scope: u8) -> [u8; 16] {
    let pkey = (partition & PARTITION_MASK) | FULL_MEMBER;
    let mut m = [0u8; 16];
    m[0] = 0xff;
    // High nibble 1: a transient (not IANA-assigned) group.
    m[1] = 0x10 | (scope & 0x0f);
    m[2..4].copy_from_slice(&[0x40, 0x1b]);
    m[4..6].copy_from_slice(&pkey.to_be_bytes());
    m[12..16].copy_from_slice(&[0xff; 4]);
    m
}

/// The IPv4 (0x401b) or IPv6 (0x601b) IPoIB signature in bytes 2-3.
fn is_ip_mgid(m: &[u8; 16]) -> bool {
    matches!([m[2], m[3]], [0x40, 0x1b] | [0x60, 0x1b])
}

fn mgid_text(m: &[u8; 16]) -> String {
    Ipv6Addr::from(*m).to_string()
}
