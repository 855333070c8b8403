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
//! default partition. A P_Key whose low 15 bits are 0, or with bit 15 set
//! (0xffff, 0x8010: bit 15 is membership, given per port), or above 0xffff,
//! is an error; OpenSM silently masks bit 15 and truncates to 16 bits.
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

use std::collections::HashMap;
use std::fmt;
use std::net::Ipv6Addr;
use std::path::{Path, PathBuf};

use super::{GroupParams, Membership, DEFAULT_PARTITION, FULL_MEMBER, PARTITION_MASK};
use crate::types::Guid;

/// The largest file `read` takes: a partitions file is a few kilobytes.
pub const MAX_FILE_LEN: u64 = 16 << 20;

/// Q_Key of IPoIB groups (RFC 4391 section 4; OpenSM's
/// `OSM_IPOIB_BROADCAST_MGRP_QKEY`).
pub const IPOIB_QKEY: u32 = 0x0b1b;

/// Link-local multicast scope (IBA 4.1.1, MGID scope nibble).
pub const SCOPE_LINK_LOCAL: u8 = 2;

/// A place in the file: 1-based line and column (columns count characters).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Pos {
    pub line: u32,
    pub col: u32,
}

impl fmt::Display for Pos {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.line, self.col)
    }
}

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
}

/// What a file failed on.
#[derive(Debug, thiserror::Error)]
pub enum PartitionConfError {
    #[error("{}: {source}", path.display())]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("{}: the file has {len} bytes, more than the {max} a partitions file may have", path.display())]
    TooLarge { path: PathBuf, len: u64, max: u64 },
    #[error("{}:{at}: {problem}", path.display())]
    At { path: PathBuf, at: Pos, problem: Problem },
}

impl PartitionConfError {
    pub fn at(&self) -> Option<Pos> {
        match self {
            PartitionConfError::At { at, .. } => Some(*at),
            _ => None,
        }
    }
    pub fn problem(&self) -> Option<&Problem> {
        match self {
            PartitionConfError::At { problem, .. } => Some(problem),
            _ => None,
        }
    }
}

/// What is wrong at a place in the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    // Text and syntax.
    #[error("the file is not UTF-8 text")]
    NotUtf8,
    #[error("expected {expected}, found {found}")]
    Expected { expected: &'static str, found: String },
    #[error("the file ends inside the entry begun at {start}: expected {expected}")]
    UnexpectedEof { expected: &'static str, start: Pos },
    #[error("';' ends the entry begun at {start} before the ':' between its definition and its members")]
    NoColon { start: Pos },
    #[error("':' among the members of the entry begun at {start}: is the ';' that ends that entry missing?")]
    ColonInMembers { start: Pos },

    // Flags.
    #[error("unknown flag '{0}'")]
    UnknownFlag(String),
    #[error("'{given}' abbreviates more than one flag ({candidates}): write it in full")]
    AmbiguousFlag { given: String, candidates: String },
    #[error("'{0}' is a partition flag, not a multicast group flag (a mgid= item takes the rest of its line)")]
    NotAGroupFlag(String),
    #[error("'{0}' is a flag: flags go in the partition definition, before the ':'")]
    FlagAmongMembers(String),
    #[error("flag '{0}' needs a value ('{0}=...')")]
    MissingValue(&'static str),
    #[error("flag '{0}' takes no value")]
    UnexpectedValue(&'static str),
    #[error("flag '{flag}' is given twice in this entry with different values")]
    RepeatedFlag { flag: &'static str },
    #[error("bad value '{value}' for '{flag}': {why}")]
    BadValue { flag: &'static str, value: String, why: String },

    // P_Keys and partitions.
    #[error("bad P_Key '{value}': {why}")]
    BadPKey { value: String, why: String },
    #[error("P_Key {pkey:#06x} was generated for '{name}' at {generated_at}: give that partition an explicit P_Key")]
    GeneratedPKeyTaken { pkey: u16, name: String, generated_at: Pos },
    #[error("'{name}' names more than one partition ({pkeys}): give the P_Key")]
    AmbiguousName { name: String, pkeys: String },
    #[error("no P_Key is left to generate")]
    NoPKeyLeft,
    #[error("partition {pkey:#06x}: {param} is {ours} here but {theirs} at {first}")]
    ConflictingParam { pkey: u16, param: &'static str, ours: String, theirs: String, first: Pos },

    // Members.
    #[error("bad port GUID '{value}': {why}")]
    BadGuid { value: String, why: &'static str },
    #[error("bad membership '{0}': want full, limited or both")]
    BadMembership(String),

    // Groups.
    #[error("bad MGID '{value}': {why}")]
    BadMgid { value: String, why: &'static str },
    #[error("IP multicast group {mgid} in partition {pkey:#06x}: {why}")]
    IpGroup { mgid: String, pkey: u16, why: String },
    #[error("multicast group {mgid} is already declared at {first} with {what}")]
    DuplicateGroup { mgid: String, first: String, what: &'static str },
    #[error("P_Key {pkey:#06x} is already partition '{first}' (at {first_at}): one P_Key, one name (repeat '{first}' to add to it)")]
    PKeyNamedTwice { pkey: u16, first: String, first_at: Pos },
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
        let (partitions, warnings) =
            p.b.finish().map_err(|(at, problem)| PartitionConfError::At { path: path.to_path_buf(), at, problem })?;
        Ok(PartitionConf { path: Some(path.to_path_buf()), partitions, warnings })
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

fn end_pos(text: &str) -> Pos {
    let mut pos = Pos { line: 1, col: 1 };
    for c in text.chars() {
        advance(&mut pos, c);
    }
    pos
}

fn advance(pos: &mut Pos, c: char) {
    if c == '\n' {
        pos.line = pos.line.saturating_add(1);
        pos.col = 1;
    } else {
        pos.col = pos.col.saturating_add(1);
    }
}

// ---------------------------------------------------------------------
// Lexer

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Tok<'a> {
    Word(&'a str),
    Eq,
    Comma,
    Colon,
    Semi,
    Newline,
    Eof,
}

#[derive(Debug, Clone, Copy)]
struct Token<'a> {
    tok: Tok<'a>,
    at: Pos,
    /// Byte offset in the text.
    start: usize,
}

impl Token<'_> {
    fn describe(&self) -> String {
        match self.tok {
            Tok::Word(w) => format!("'{}'", excerpt(w)),
            Tok::Eq => "'='".into(),
            Tok::Comma => "','".into(),
            Tok::Colon => "':'".into(),
            Tok::Semi => "';'".into(),
            Tok::Newline => "the end of the line".into(),
            Tok::Eof => "the end of the file".into(),
        }
    }
}

fn excerpt(s: &str) -> String {
    const MAX: usize = 40;
    if s.chars().count() <= MAX {
        s.to_string()
    } else {
        let mut e: String = s.chars().take(MAX).collect();
        e.push_str("...");
        e
    }
}

fn is_punct(c: char) -> bool {
    matches!(c, '=' | ',' | ':' | ';' | '#')
}

struct Lexer<'a> {
    src: &'a str,
    /// Byte offset of the next character.
    i: usize,
    pos: Pos,
    peeked: Option<Token<'a>>,
}

impl<'a> Lexer<'a> {
    fn new(src: &'a str) -> Self {
        Lexer { src, i: 0, pos: Pos { line: 1, col: 1 }, peeked: None }
    }

    fn peek_char(&self) -> Option<char> {
        self.src[self.i..].chars().next()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek_char()?;
        self.i += c.len_utf8();
        advance(&mut self.pos, c);
        Some(c)
    }

    /// Skips blanks and comments, not line breaks.
    fn skip_blanks(&mut self) {
        while let Some(c) = self.peek_char() {
            if c == '#' {
                while self.peek_char().is_some_and(|c| c != '\n') {
                    self.bump();
                }
            } else if c != '\n' && c.is_whitespace() {
                self.bump();
            } else {
                break;
            }
        }
    }

    /// A run of characters up to a blank or one of `stop`.
    fn run(&mut self, stop: fn(char) -> bool) -> &'a str {
        let start = self.i;
        while self.peek_char().is_some_and(|c| !c.is_whitespace() && !stop(c)) {
            self.bump();
        }
        &self.src[start..self.i]
    }

    fn next(&mut self) -> Token<'a> {
        if let Some(t) = self.peeked.take() {
            return t;
        }
        self.skip_blanks();
        let (at, start) = (self.pos, self.i);
        let tok = match self.peek_char() {
            None => Tok::Eof,
            Some(c) => {
                let single = match c {
                    '\n' => Some(Tok::Newline),
                    '=' => Some(Tok::Eq),
                    ',' => Some(Tok::Comma),
                    ':' => Some(Tok::Colon),
                    ';' => Some(Tok::Semi),
                    _ => None,
                };
                match single {
                    Some(t) => {
                        self.bump();
                        t
                    }
                    None => Tok::Word(self.run(is_punct)),
                }
            }
        };
        Token { tok, at, start }
    }

    fn peek(&mut self) -> Token<'a> {
        let t = self.next();
        self.peeked = Some(t);
        t
    }

    /// The next token that is not a line break.
    fn next_skipping_lines(&mut self) -> Token<'a> {
        loop {
            let t = self.next();
            if t.tok != Tok::Newline {
                return t;
            }
        }
    }

    /// A GID after `mgid=`: it has colons of its own, so it runs to a
    /// blank, ',', ';' or '#'. Empty when none of it is there.
    fn raw_gid(&mut self) -> (&'a str, Pos) {
        if let Some(t) = self.peeked.take() {
            // Not reached (the caller has consumed its lookahead), but a
            // peeked token must not be lost: rewind to it.
            self.i = t.start;
            self.pos = t.at;
        }
        self.skip_blanks();
        let at = self.pos;
        (self.run(|c| matches!(c, ',' | ';' | '#')), at)
    }

    /// Where a ':' stands later on the current line, if one does: a member
    /// list that reads badly because the previous entry lacks its ';'.
    fn colon_later_on_line(&self) -> Option<Pos> {
        let from = self.peeked.map_or(self.i, |t| t.start);
        let rest = &self.src[from..];
        let line = &rest[..rest.find(['\n', '#']).unwrap_or(rest.len())];
        let k = line.find(':')?;
        let mut pos = self.peeked.map_or(self.pos, |t| t.at);
        for c in line[..k].chars() {
            advance(&mut pos, c);
        }
        Some(pos)
    }
}

// ---------------------------------------------------------------------
// Values

type Fail = (Pos, Problem);

#[derive(Debug)]
enum NumError {
    NotNumber,
    TooLarge,
}

/// C's `strtoul(s, &end, 0)` with `*end == 0` required: 0x hex, leading 0
/// octal, else decimal.
fn c_number(s: &str) -> Result<u64, NumError> {
    let (digits, radix) = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        (h, 16)
    } else if s.len() > 1 && s.starts_with('0') {
        (&s[1..], 8)
    } else {
        (s, 10)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return Err(NumError::NotNumber);
    }
    u64::from_str_radix(digits, radix).map_err(|_| NumError::TooLarge)
}

fn bad_value(flag: &'static str, value: &str, why: impl Into<String>) -> Problem {
    Problem::BadValue { flag, value: excerpt(value), why: why.into() }
}

fn number_upto(flag: &'static str, value: &str, min: u64, max: u64) -> Result<u64, Problem> {
    let range = || format!("want a number from {min} to {max} ({max:#x})");
    match c_number(value) {
        Ok(n) if (min..=max).contains(&n) => Ok(n),
        Ok(_) | Err(NumError::TooLarge) => Err(bad_value(flag, value, range())),
        Err(NumError::NotNumber) => Err(bad_value(flag, value, format!("not a number; {}", range()))),
    }
}

/// IBTA rate codes (IBA Table 205; `IB_PATH_RECORD_RATE_*`) and their
/// rates in tenths of Gb/s.
const RATES: [(u8, u32); 23] = [
    (2, 25),
    (3, 100),
    (4, 300),
    (5, 50),
    (6, 200),
    (7, 400),
    (8, 600),
    (9, 800),
    (10, 1200),
    (11, 140),
    (12, 560),
    (13, 1120),
    (14, 1680),
    (15, 250),
    (16, 1000),
    (17, 2000),
    (18, 3000),
    (19, 280),
    (20, 500),
    (21, 4000),
    (22, 6000),
    (23, 8000),
    (24, 12000),
];

/// The rate in tenths of Gb/s of a rate code.
pub fn rate_tenths_gbps(code: u8) -> Option<u32> {
    RATES.iter().find(|&&(c, _)| c == code).map(|&(_, t)| t)
}

fn rate_code_of_tenths(tenths: u32) -> Option<u8> {
    RATES.iter().find(|&&(_, t)| t == tenths).map(|&(c, _)| c)
}

fn gbps_text(tenths: u32) -> String {
    match tenths % 10 {
        0 => format!("{}", tenths / 10),
        d => format!("{}.{d}", tenths / 10),
    }
}

const RATE_NAMES: &str =
    "2.5, 5, 10, 14, 20, 25, 28, 30, 40, 50, 56, 60, 80, 100, 112, 120, 168, 200, 300, 400, 600, 800, 1200";

/// A rate code from `rate=` (see the module docs for the rule), and a
/// warning when a bare number is read as a code but is also a rate in
/// Gb/s with another meaning.
fn parse_rate(value: &str) -> Result<(u8, Option<String>), Problem> {
    let lower = value.to_ascii_lowercase();
    let mut num = lower.as_str();
    let mut named = false;
    for suffix in ["gbps", "gb/s", "gb", "g"] {
        if let Some(n) = num.strip_suffix(suffix) {
            num = n;
            named = true;
            break;
        }
    }
    let unknown = || {
        bad_value("rate", value, format!("no IBTA rate of that many Gb/s (rates: {RATE_NAMES} Gb/s, or codes 2 to 24)"))
    };
    if named || num.contains('.') {
        let tenths = decimal_tenths(num).ok_or_else(|| {
            bad_value("rate", value, "want a rate code (2 to 24) or a rate in Gb/s such as 40, 100g or 2.5")
        })?;
        return rate_code_of_tenths(tenths).map(|c| (c, None)).ok_or_else(unknown);
    }
    let n = match c_number(num) {
        Ok(n) => n,
        Err(_) => {
            return Err(bad_value(
                "rate",
                value,
                "want a rate code (2 to 24) or a rate in Gb/s such as 40, 100g or 2.5",
            ))
        }
    };
    if let Some(code) = u8::try_from(n).ok().filter(|&c| rate_tenths_gbps(c).is_some()) {
        let tenths = rate_tenths_gbps(code).unwrap_or(0);
        let also_rate = u32::from(code) * 10;
        let warning = (rate_code_of_tenths(also_rate).is_some() && also_rate != tenths).then(|| {
            format!(
                "rate={value} is read as IBTA rate code {code} ({} Gb/s), as OpenSM reads it; write rate={code}g for {code} Gb/s",
                gbps_text(tenths)
            )
        });
        return Ok((code, warning));
    }
    u32::try_from(n)
        .ok()
        .and_then(|g| g.checked_mul(10))
        .and_then(rate_code_of_tenths)
        .map(|c| (c, None))
        .ok_or_else(unknown)
}

/// "2.5" -> 25, "40" -> 400; at most one decimal digit.
fn decimal_tenths(s: &str) -> Option<u32> {
    let (int, frac) = match s.split_once('.') {
        Some((i, f)) => (i, Some(f)),
        None => (s, None),
    };
    if int.is_empty() || int.len() > 6 || !int.bytes().all(|b| b.is_ascii_digit()) {
        return None;
    }
    let whole: u32 = int.parse().ok()?;
    let tenth = match frac {
        None => 0,
        Some(f) if f.len() == 1 && f.as_bytes()[0].is_ascii_digit() => u32::from(f.as_bytes()[0] - b'0'),
        Some(_) => return None,
    };
    Some(whole * 10 + tenth)
}

/// An MTU code from `mtu=`: the code 1..=5 or the size in bytes.
fn parse_mtu(value: &str) -> Result<u8, Problem> {
    let why = "want an IBTA MTU code (1 to 5) or 256, 512, 1024, 2048 or 4096";
    match c_number(value) {
        Ok(n @ 1..=5) => Ok(n as u8),
        Ok(256) => Ok(1),
        Ok(512) => Ok(2),
        Ok(1024) => Ok(3),
        Ok(2048) => Ok(4),
        Ok(4096) => Ok(5),
        _ => Err(bad_value("mtu", value, why)),
    }
}

fn parse_membership(value: &str) -> Option<Membership> {
    let v = value.to_ascii_lowercase();
    if v.is_empty() {
        return None;
    }
    // Abbreviations as OpenSM takes them (its man page writes `=limi`).
    [("full", Membership::Full), ("limited", Membership::Limited), ("both", Membership::Both)]
        .into_iter()
        .find(|(name, _)| name.starts_with(v.as_str()))
        .map(|(_, m)| m)
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flag {
    Mtu,
    Rate,
    Scope,
    QKey,
    TClass,
    Sl,
    FlowLabel,
    Ipoib,
    DefMember,
    Indx0,
}

/// Normalised name (lower case, no '_'), the flag, its name in messages.
const FLAGS: [(&str, Flag, &str); 9] = [
    ("mtu", Flag::Mtu, "mtu"),
    ("rate", Flag::Rate, "rate"),
    ("scope", Flag::Scope, "scope"),
    ("qkey", Flag::QKey, "Q_Key"),
    ("tclass", Flag::TClass, "TClass"),
    ("sl", Flag::Sl, "sl"),
    ("flowlabel", Flag::FlowLabel, "FlowLabel"),
    ("ipoib", Flag::Ipoib, "ipoib"),
    ("defmember", Flag::DefMember, "defmember"),
];

impl Flag {
    fn name(self) -> &'static str {
        match self {
            Flag::Indx0 => "indx0",
            f => FLAGS.iter().find(|e| e.1 == f).map_or("?", |e| e.2),
        }
    }
    fn is_group_flag(self) -> bool {
        !matches!(self, Flag::Ipoib | Flag::DefMember | Flag::Indx0)
    }
}

fn resolve_flag(given: &str) -> Result<Flag, Problem> {
    let n: String = given.chars().filter(|&c| c != '_').map(|c| c.to_ascii_lowercase()).collect();
    if n == "indx0" {
        return Ok(Flag::Indx0);
    }
    if let Some(e) = FLAGS.iter().find(|e| e.0 == n) {
        return Ok(e.1);
    }
    let matches: Vec<_> = FLAGS.iter().filter(|e| !n.is_empty() && e.0.starts_with(n.as_str())).collect();
    match matches.as_slice() {
        [one] => Ok(one.1),
        [] => Err(Problem::UnknownFlag(excerpt(given))),
        many => Err(Problem::AmbiguousFlag {
            given: excerpt(given),
            candidates: many.iter().map(|e| e.2).collect::<Vec<_>>().join(", "),
        }),
    }
}

/// Group parameters as written, each with where.
#[derive(Debug, Clone, Default)]
struct Written {
    mtu: Option<(u8, Pos)>,
    rate: Option<(u8, Pos)>,
    sl: Option<(u8, Pos)>,
    q_key: Option<(u32, Pos)>,
    tclass: Option<(u8, Pos)>,
    flow_label: Option<(u32, Pos)>,
    scopes: Vec<(u8, Pos)>,
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
    fn apply(&mut self, flag: Flag, value: &str, at: Pos, warnings: &mut Vec<ConfWarning>) -> Result<(), Fail> {
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

// ---------------------------------------------------------------------
// Parser

struct Parser<'a> {
    lex: Lexer<'a>,
    b: Builder,
}

/// What a definition (the part before ':') said.
struct Header {
    start: Pos,
    name: Option<(String, Pos)>,
    pkey: Option<(u16, Pos)>,
    ipoib: bool,
    indx0: bool,
    defmember: Option<Membership>,
    written: Written,
}

impl<'a> Parser<'a> {
    fn file(&mut self) -> Result<(), Fail> {
        loop {
            let t = self.lex.next_skipping_lines();
            match t.tok {
                Tok::Eof => return Ok(()),
                // An empty entry: OpenSM skips a stray ';' too.
                Tok::Semi => continue,
                _ => {
                    self.lex.peeked = Some(t);
                    self.entry(t.at)?;
                }
            }
        }
    }

    fn entry(&mut self, start: Pos) -> Result<(), Fail> {
        let header = self.header(start)?;
        let part = self.b.partition_for(&header)?;
        self.members(start, part, &header)
    }

    fn header(&mut self, start: Pos) -> Result<Header, Fail> {
        let mut h = Header {
            start,
            name: None,
            pkey: None,
            ipoib: false,
            indx0: false,
            defmember: None,
            written: Written::default(),
        };
        let eof = |pos: Pos| (pos, Problem::UnexpectedEof { expected: "':' and the members", start });
        // Name words (on one line: the name may have blanks inside, as in
        // OpenSM), then '=' and the P_Key.
        let mut name: Option<(usize, usize, Pos)> = None;
        let mut after_eq = false;
        let mut pkey_word: Option<(&str, Pos)> = None;
        let end = loop {
            let t = self.lex.next_skipping_lines();
            match t.tok {
                Tok::Word(w) if !after_eq => match name {
                    None => name = Some((t.start, t.start + w.len(), t.at)),
                    Some((s, _, at)) if at.line == t.at.line => name = Some((s, t.start + w.len(), at)),
                    Some(_) => {
                        return Err((t.at, Problem::Expected { expected: "'=', ',' or ':'", found: t.describe() }))
                    }
                },
                Tok::Word(w) if pkey_word.is_none() => pkey_word = Some((w, t.at)),
                Tok::Word(_) | Tok::Eq if after_eq => {
                    return Err((
                        t.at,
                        Problem::Expected { expected: "',' or ':' after the P_Key", found: t.describe() },
                    ))
                }
                Tok::Eq => after_eq = true,
                Tok::Comma | Tok::Colon => break t,
                Tok::Semi => return Err((t.at, Problem::NoColon { start })),
                Tok::Eof | Tok::Word(_) | Tok::Newline => return Err(eof(self.lex.pos)),
            }
        };
        if after_eq && pkey_word.is_none() {
            return Err((end.at, Problem::Expected { expected: "a P_Key after '='", found: end.describe() }));
        }
        let name = name.map(|(s, e, at)| (self.lex.src[s..e].to_string(), at));
        match (name, pkey_word) {
            // OpenSM: a definition that starts with a digit and has no '='
            // is a P_Key without a name.
            (Some((n, at)), None) if n.starts_with(|c: char| c.is_ascii_digit()) => {
                h.pkey = Some((parse_pkey(&n, at)?, at))
            }
            (name, pkey) => {
                h.name = name;
                if let Some((w, at)) = pkey {
                    h.pkey = Some((parse_pkey(w, at)?, at));
                }
            }
        }
        // Flags.
        let mut t = end;
        while t.tok == Tok::Comma {
            let f = self.lex.next_skipping_lines();
            let flag_word = match f.tok {
                Tok::Word(w) => w,
                // An empty flag (",,"): OpenSM skips it.
                Tok::Comma | Tok::Colon => {
                    t = f;
                    continue;
                }
                Tok::Semi => return Err((f.at, Problem::NoColon { start })),
                Tok::Eof | Tok::Newline => return Err(eof(self.lex.pos)),
                Tok::Eq => return Err((f.at, Problem::Expected { expected: "a flag", found: f.describe() })),
            };
            let flag = resolve_flag(flag_word).map_err(|p| (f.at, p))?;
            let mut next = self.lex.next_skipping_lines();
            let value = if next.tok == Tok::Eq {
                let v = self.lex.next_skipping_lines();
                let Tok::Word(value) = v.tok else {
                    return Err((v.at, Problem::Expected { expected: "a value after '='", found: v.describe() }));
                };
                next = self.lex.next_skipping_lines();
                Some((value, v.at))
            } else {
                None
            };
            self.header_flag(&mut h, flag, f.at, value)?;
            match next.tok {
                Tok::Comma | Tok::Colon => t = next,
                Tok::Semi => return Err((next.at, Problem::NoColon { start })),
                Tok::Eof | Tok::Newline => return Err(eof(self.lex.pos)),
                Tok::Word(_) | Tok::Eq => {
                    return Err((
                        next.at,
                        Problem::Expected { expected: "',' or ':' after a flag", found: next.describe() },
                    ))
                }
            }
        }
        Ok(h)
    }

    fn header_flag(
        &mut self,
        h: &mut Header,
        flag: Flag,
        flag_at: Pos,
        value: Option<(&str, Pos)>,
    ) -> Result<(), Fail> {
        match (flag, value) {
            (Flag::Ipoib | Flag::Indx0, Some((_, at))) => Err((at, Problem::UnexpectedValue(flag.name()))),
            (Flag::Ipoib, None) => {
                h.ipoib = true;
                Ok(())
            }
            (Flag::Indx0, None) => {
                h.indx0 = true;
                Ok(())
            }
            (_, None) => Err((flag_at, Problem::MissingValue(flag.name()))),
            (Flag::DefMember, Some((v, at))) => {
                let m = parse_membership(v).ok_or_else(|| (at, Problem::BadMembership(excerpt(v))))?;
                match h.defmember {
                    Some(old) if old != m => Err((at, Problem::RepeatedFlag { flag: flag.name() })),
                    _ => {
                        h.defmember = Some(m);
                        Ok(())
                    }
                }
            }
            (_, Some((v, at))) => h.written.apply(flag, v, at, &mut self.b.warnings),
        }
    }

    fn members(&mut self, start: Pos, part: usize, h: &Header) -> Result<(), Fail> {
        let eof = |pos: Pos| (pos, Problem::UnexpectedEof { expected: "';' at the end of the entry", start });
        loop {
            let t = self.lex.next();
            let word = match t.tok {
                Tok::Newline | Tok::Comma => continue,
                Tok::Semi => return Ok(()),
                Tok::Eof => return Err(eof(self.lex.pos)),
                Tok::Colon => return Err((t.at, Problem::ColonInMembers { start })),
                Tok::Eq => return Err((t.at, Problem::Expected { expected: "a member", found: t.describe() })),
                Tok::Word(w) => w,
            };
            let mut next = self.lex.next();
            if word.eq_ignore_ascii_case("mgid") {
                if next.tok != Tok::Eq {
                    return Err((
                        next.at,
                        Problem::Expected { expected: "'=' and an MGID after 'mgid'", found: next.describe() },
                    ));
                }
                if self.mgid_line(start, part, t.at)? {
                    return Ok(());
                }
                continue;
            }
            let value = if next.tok == Tok::Eq {
                let v = self.lex.next();
                let Tok::Word(value) = v.tok else {
                    return Err((
                        v.at,
                        Problem::Expected { expected: "full, limited or both after '='", found: v.describe() },
                    ));
                };
                next = self.lex.next();
                Some((value, v.at))
            } else {
                None
            };
            // An item that reads badly on a line with a ':' is most likely
            // the next entry, after a missing ';'.
            let missing_semi = |lex: &Lexer, p: Problem| match (next.tok, lex.colon_later_on_line()) {
                (_, _) if matches!(p, Problem::FlagAmongMembers(_)) => (t.at, p),
                (Tok::Colon, _) => (next.at, Problem::ColonInMembers { start }),
                (_, Some(at)) => (at, Problem::ColonInMembers { start }),
                (_, None) => (t.at, p),
            };
            let membership = match value {
                Some((v, at)) => match parse_membership(v) {
                    Some(m) => m,
                    None => {
                        let e = missing_semi(&self.lex, Problem::BadMembership(excerpt(v)));
                        return Err(if e.0 == t.at { (at, e.1) } else { e });
                    }
                },
                None => h.defmember.unwrap_or(Membership::Limited),
            };
            match parse_port(word) {
                Ok(Some(port)) => {
                    self.b.parts[part].members.push(MemberSpec { port, membership, indx0: h.indx0, at: Some(t.at) })
                }
                Ok(None) => {}
                Err(p) => return Err(missing_semi(&self.lex, p)),
            }
            match next.tok {
                Tok::Comma | Tok::Newline => {}
                Tok::Semi => return Ok(()),
                Tok::Eof => return Err(eof(self.lex.pos)),
                Tok::Colon => return Err((next.at, Problem::ColonInMembers { start })),
                Tok::Word(_) | Tok::Eq => {
                    return Err((
                        next.at,
                        Problem::Expected { expected: "',' or ';' after a member", found: next.describe() },
                    ))
                }
            }
        }
    }

    /// After `mgid=`: the GID and its flags up to the end of the line.
    /// True when a ';' ended the entry too.
    fn mgid_line(&mut self, start: Pos, part: usize, item_at: Pos) -> Result<bool, Fail> {
        let (text, gid_at) = self.lex.raw_gid();
        if text.is_empty() {
            let t = self.lex.peek();
            return Err((t.at, Problem::Expected { expected: "an MGID after 'mgid='", found: t.describe() }));
        }
        let mgid = parse_mgid(text).map_err(|p| (gid_at, p))?;
        let mut written = Written::default();
        let ended = loop {
            let t = self.lex.next();
            match t.tok {
                Tok::Newline => break false,
                Tok::Semi => break true,
                Tok::Eof => {
                    return Err((
                        self.lex.pos,
                        Problem::UnexpectedEof { expected: "';' at the end of the entry", start },
                    ))
                }
                Tok::Comma => {}
                _ => {
                    return Err((
                        t.at,
                        Problem::Expected { expected: "',' before a multicast group flag", found: t.describe() },
                    ))
                }
            }
            // A flag, or nothing (a trailing ',').
            let f = self.lex.next();
            let flag_word = match f.tok {
                Tok::Word(w) => w,
                Tok::Newline => break false,
                Tok::Semi => break true,
                Tok::Comma => {
                    self.lex.peeked = Some(f);
                    continue;
                }
                Tok::Eof => {
                    return Err((
                        self.lex.pos,
                        Problem::UnexpectedEof { expected: "';' at the end of the entry", start },
                    ))
                }
                _ => return Err((f.at, Problem::Expected { expected: "a multicast group flag", found: f.describe() })),
            };
            let flag = resolve_flag(flag_word).map_err(|p| (f.at, hint_members_after_mgid(p, flag_word)))?;
            if !flag.is_group_flag() {
                return Err((f.at, Problem::NotAGroupFlag(flag.name().into())));
            }
            let eq = self.lex.next();
            if eq.tok != Tok::Eq {
                return Err((f.at, Problem::MissingValue(flag.name())));
            }
            let v = self.lex.next();
            let Tok::Word(value) = v.tok else {
                return Err((v.at, Problem::Expected { expected: "a value after '='", found: v.describe() }));
            };
            written.apply(flag, value, v.at, &mut self.b.warnings)?;
        };
        self.b.parts[part].mgids.push(MgidItem { mgid, written, at: item_at });
        Ok(ended)
    }
}

/// A port keyword or GUID on a `mgid=` line reads as a flag: say why.
fn hint_members_after_mgid(p: Problem, word: &str) -> Problem {
    match (&p, parse_port(word)) {
        (Problem::UnknownFlag(_), Ok(Some(_))) => Problem::Expected {
            expected: "a multicast group flag (a mgid= item takes the rest of its line: put members on another line)",
            found: format!("'{}'", excerpt(word)),
        },
        _ => p,
    }
}

fn parse_pkey(word: &str, at: Pos) -> Result<u16, Fail> {
    let bad = |why: &str| (at, Problem::BadPKey { value: excerpt(word), why: why.into() });
    let n = match c_number(word) {
        Ok(n) => n,
        Err(NumError::NotNumber) => return Err(bad("not a number (0x hex, 0 octal or decimal)")),
        Err(NumError::TooLarge) => return Err(bad("more than 16 bits")),
    };
    if n > 0xffff {
        return Err(bad("more than 16 bits"));
    }
    let n = n as u16;
    if n & FULL_MEMBER != 0 {
        return Err(bad(&format!(
            "bit 15 is the membership bit, set per member: the partition is {:#06x}",
            n & PARTITION_MASK
        )));
    }
    if n == 0 {
        return Err(bad("0 is no partition (omit the P_Key to have one generated)"));
    }
    Ok(n)
}

fn parse_port(word: &str) -> Result<Option<PortSpec>, Problem> {
    let kw = [
        ("ALL", PortSpec::All),
        ("ALL_CAS", PortSpec::AllCas),
        ("ALL_SWITCHES", PortSpec::AllSwitches),
        ("ALL_ROUTERS", PortSpec::AllRouters),
        ("SELF", PortSpec::SelfPort),
    ];
    if word.eq_ignore_ascii_case("NONE") {
        return Ok(None);
    }
    if let Some((_, p)) = kw.iter().find(|(k, _)| word.eq_ignore_ascii_case(k)) {
        return Ok(Some(*p));
    }
    match c_number(word) {
        Ok(0) => Err(Problem::BadGuid { value: excerpt(word), why: "GUID 0 is no port" }),
        Ok(g) => Ok(Some(PortSpec::Guid(Guid(g)))),
        Err(NumError::TooLarge) => Err(Problem::BadGuid { value: excerpt(word), why: "more than 64 bits" }),
        Err(NumError::NotNumber) => {
            if resolve_flag(word).is_ok() {
                return Err(Problem::FlagAmongMembers(excerpt(word)));
            }
            Err(Problem::BadGuid {
                value: excerpt(word),
                why: "want a port GUID (0x...) or ALL, ALL_CAS, ALL_SWITCHES, ALL_ROUTERS, SELF, NONE",
            })
        }
    }
}

fn parse_mgid(text: &str) -> Result<[u8; 16], Problem> {
    let bad = |why| Problem::BadMgid { value: excerpt(text), why };
    let addr: Ipv6Addr = text.parse().map_err(|_| bad("not a GID in IPv6 notation (such as ff12:401b::1)"))?;
    let m = addr.octets();
    if m[0] != 0xff {
        return Err(bad("not a multicast GID (the first byte must be 0xff)"));
    }
    Ok(m)
}

// ---------------------------------------------------------------------
// Merging entries into partitions

struct MgidItem {
    mgid: [u8; 16],
    written: Written,
    at: Pos,
}

struct PartBuild {
    name: String,
    pkey: u16,
    generated_at: Option<Pos>,
    at: Option<Pos>,
    ipoib: bool,
    written: Written,
    members: Vec<MemberSpec>,
    mgids: Vec<MgidItem>,
}

struct Builder {
    parts: Vec<PartBuild>,
    by_pkey: HashMap<u16, usize>,
    /// Partitions by (first) name.
    by_name: HashMap<String, Vec<usize>>,
    /// OpenSM's `global_pkey_counter`: the last P_Key generated.
    counter: u16,
    warnings: Vec<ConfWarning>,
}

/// Merges `ours` into `theirs`: a value both wrote must agree.
fn merge_param<T: PartialEq + Copy>(
    pkey: u16,
    param: &'static str,
    theirs: &mut Option<(T, Pos)>,
    ours: Option<(T, Pos)>,
    show: fn(T) -> String,
) -> Result<(), Fail> {
    match (*theirs, ours) {
        (Some((t, first)), Some((o, at))) if t != o => {
            Err((at, Problem::ConflictingParam { pkey, param, ours: show(o), theirs: show(t), first }))
        }
        (None, Some(o)) => {
            *theirs = Some(o);
            Ok(())
        }
        _ => Ok(()),
    }
}

impl Builder {
    fn new() -> Self {
        // OpenSM makes the default partition before it reads the file: with
        // a file, every port is a limited member and the SM port a full
        // one, until the file says otherwise (`prtn_make_default`).
        let default = PartBuild {
            name: "Default".into(),
            pkey: DEFAULT_PARTITION,
            generated_at: None,
            at: None,
            ipoib: false,
            written: Written::default(),
            members: vec![
                MemberSpec { port: PortSpec::All, membership: Membership::Limited, indx0: false, at: None },
                MemberSpec { port: PortSpec::SelfPort, membership: Membership::Full, indx0: false, at: None },
            ],
            mgids: Vec::new(),
        };
        Builder {
            parts: vec![default],
            by_pkey: HashMap::from([(DEFAULT_PARTITION, 0)]),
            by_name: HashMap::from([("Default".to_string(), vec![0])]),
            counter: 0,
            warnings: Vec::new(),
        }
    }

    /// The partition an entry adds to (found or made), with the entry's
    /// flags merged in.
    fn partition_for(&mut self, h: &Header) -> Result<usize, Fail> {
        let idx = match h.pkey {
            Some((pkey, at)) => match self.by_pkey.get(&pkey) {
                Some(&i) => {
                    if let Some(generated_at) = self.parts[i].generated_at {
                        let name = self.parts[i].name.clone();
                        return Err((at, Problem::GeneratedPKeyTaken { pkey, name, generated_at }));
                    }
                    i
                }
                None => self.make(h, pkey, None),
            },
            None => match self.named(h)? {
                Some(i) => i,
                None => {
                    let pkey = self.generate().ok_or((h.start, Problem::NoPKeyLeft))?;
                    self.make(h, pkey, Some(h.start))
                }
            },
        };
        let p = &mut self.parts[idx];
        if let Some((name, at)) = &h.name {
            match p.at {
                // Two names for one P_Key: most likely a copied line whose
                // P_Key was not changed, so it is refused, not merged.
                Some(first_at) if *name != p.name => {
                    return Err((*at, Problem::PKeyNamedTwice { pkey: p.pkey, first: excerpt(&p.name), first_at }));
                }
                // The default partition the SM makes before reading the
                // file keeps its name "Default", whatever the file calls it.
                None if *name != p.name => self.warnings.push(ConfWarning {
                    at: *at,
                    message: format!(
                        "partition {:#06x} is the default partition, named '{}'; the name '{}' here is not used",
                        p.pkey,
                        p.name,
                        excerpt(name)
                    ),
                }),
                _ => {}
            }
        }
        if p.at.is_none() {
            p.at = Some(h.start);
        }
        p.ipoib |= h.ipoib;
        let (pkey, w, o) = (p.pkey, &mut p.written, &h.written);
        merge_param(pkey, "mtu", &mut w.mtu, o.mtu, |v| format!("code {v}"))?;
        merge_param(pkey, "rate", &mut w.rate, o.rate, |v| format!("code {v}"))?;
        merge_param(pkey, "sl", &mut w.sl, o.sl, |v| v.to_string())?;
        merge_param(pkey, "Q_Key", &mut w.q_key, o.q_key, |v| format!("{v:#x}"))?;
        merge_param(pkey, "TClass", &mut w.tclass, o.tclass, |v| v.to_string())?;
        merge_param(pkey, "FlowLabel", &mut w.flow_label, o.flow_label, |v| format!("{v:#x}"))?;
        for &(s, at) in &o.scopes {
            if !w.scopes.iter().any(|&(t, _)| t == s) {
                w.scopes.push((s, at));
            }
        }
        Ok(idx)
    }

    fn named(&self, h: &Header) -> Result<Option<usize>, Fail> {
        let Some((name, at)) = &h.name else { return Ok(None) };
        let found = self.by_name.get(name).map_or(&[][..], Vec::as_slice);
        match found {
            [] => Ok(None),
            [one] => Ok(Some(*one)),
            many => Err((
                *at,
                Problem::AmbiguousName {
                    name: excerpt(name),
                    pkeys: many.iter().map(|&i| format!("{:#06x}", self.parts[i].pkey)).collect::<Vec<_>>().join(", "),
                },
            )),
        }
    }

    /// OpenSM's `generate_pkey`: the next number after the last one
    /// generated that no partition has yet, below 0x7fff.
    fn generate(&mut self) -> Option<u16> {
        while self.counter < DEFAULT_PARTITION - 1 {
            self.counter += 1;
            if !self.by_pkey.contains_key(&self.counter) {
                return Some(self.counter);
            }
        }
        None
    }

    fn make(&mut self, h: &Header, pkey: u16, generated_at: Option<Pos>) -> usize {
        // OpenSM names an unnamed partition by its P_Key in hex.
        let name = h.name.as_ref().map_or_else(|| format!("{pkey:04x}"), |(n, _)| n.clone());
        self.parts.push(PartBuild {
            name,
            pkey,
            generated_at,
            at: None,
            ipoib: false,
            written: Written::default(),
            members: Vec::new(),
            mgids: Vec::new(),
        });
        let i = self.parts.len() - 1;
        self.by_pkey.insert(pkey, i);
        self.by_name.entry(self.parts[i].name.clone()).or_default().push(i);
        i
    }

    /// Fills in defaults, builds every partition's groups and checks them.
    fn finish(self) -> Result<(Vec<ConfPartition>, Vec<ConfWarning>), Fail> {
        let mut out = Vec::with_capacity(self.parts.len());
        // MGID -> (partition, params, where) of the first declaration.
        let mut seen: HashMap<[u8; 16], (u16, GroupParams, Option<Pos>)> = HashMap::new();
        for p in self.parts {
            let w = &p.written;
            let base = GroupParams {
                mtu: w.mtu.map_or(4, |v| v.0),
                rate: w.rate.map_or(3, |v| v.0),
                sl: w.sl.map_or(0, |v| v.0),
                scope: w.scopes.first().map_or(SCOPE_LINK_LOCAL, |v| v.0),
                q_key: w.q_key.map_or(IPOIB_QKEY, |v| v.0),
                tclass: w.tclass.map_or(0, |v| v.0),
                flow_label: w.flow_label.map_or(0, |v| v.0),
            };
            let full_pkey = p.pkey | FULL_MEMBER;
            let mut groups: Vec<ConfGroup> = Vec::new();
            let mut add = |g: ConfGroup, seen: &mut HashMap<_, _>| -> Result<(), Fail> {
                match seen.get(&g.mgid) {
                    None => {
                        seen.insert(g.mgid, (p.pkey, g.params, g.at));
                        groups.push(g);
                        Ok(())
                    }
                    Some(&(pkey, params, _)) if pkey == p.pkey && params == g.params => Ok(()),
                    Some(&(pkey, _, first)) => Err((
                        g.at.or(p.at).unwrap_or(Pos { line: 1, col: 1 }),
                        Problem::DuplicateGroup {
                            mgid: mgid_text(&g.mgid),
                            first: first.map_or_else(|| "the default partition".into(), |f| f.to_string()),
                            what: if pkey == p.pkey { "other parameters" } else { "another P_Key" },
                        },
                    )),
                }
            };
            if p.ipoib {
                let scopes: Vec<u8> =
                    if w.scopes.is_empty() { vec![SCOPE_LINK_LOCAL] } else { w.scopes.iter().map(|s| s.0).collect() };
                for scope in scopes {
                    let g = ConfGroup {
                        mgid: ipoib_broadcast_mgid(p.pkey, scope),
                        params: GroupParams { scope, ..base },
                        ipoib_broadcast: true,
                        at: p.at,
                    };
                    add(g, &mut seen)?;
                }
            }
            for item in &p.mgids {
                let mw = &item.written;
                let mut mgid = item.mgid;
                let ip = is_ip_mgid(&mgid);
                if ip {
                    let ip_fail = |at: Pos, why: String| {
                        (at, Problem::IpGroup { mgid: mgid_text(&item.mgid), pkey: p.pkey, why })
                    };
                    let carried = u16::from_be_bytes([mgid[4], mgid[5]]);
                    let mut template = ipoib_broadcast_mgid(DEFAULT_PARTITION, mgid[1] & 0x0f);
                    template[1] = mgid[1];
                    let is_template = mgid == template;
                    if !(is_template || carried == 0 || carried == full_pkey) {
                        return Err(ip_fail(
                            item.at,
                            format!("it carries P_Key {carried:#06x}; want 0 (filled in) or {full_pkey:#06x}"),
                        ));
                    }
                    if let Some((mtu, at)) = mw.mtu.filter(|&(m, _)| m != base.mtu) {
                        return Err(ip_fail(at, format!("mtu code {mtu} differs from the partition's {}", base.mtu)));
                    }
                    if let Some((rate, at)) = mw.rate.filter(|&(r, _)| r != base.rate) {
                        return Err(ip_fail(
                            at,
                            format!("rate code {rate} differs from the partition's {}", base.rate),
                        ));
                    }
                    mgid[4..6].copy_from_slice(&full_pkey.to_be_bytes());
                }
                let q_key = match (mw.q_key, w.q_key) {
                    (Some((q, _)), _) | (None, Some((q, _))) => q,
                    (None, None) if ip => IPOIB_QKEY,
                    (None, None) => 0,
                };
                let params = GroupParams {
                    mtu: mw.mtu.map_or(base.mtu, |v| v.0),
                    rate: mw.rate.map_or(base.rate, |v| v.0),
                    sl: mw.sl.map_or(base.sl, |v| v.0),
                    scope: 0,
                    q_key,
                    tclass: mw.tclass.map_or(base.tclass, |v| v.0),
                    flow_label: mw.flow_label.map_or(base.flow_label, |v| v.0),
                };
                let scopes: Vec<u8> = if !mw.scopes.is_empty() {
                    mw.scopes.iter().map(|s| s.0).collect()
                } else if !w.scopes.is_empty() {
                    w.scopes.iter().map(|s| s.0).collect()
                } else if mgid[1] & 0x0f != 0 {
                    vec![mgid[1] & 0x0f]
                } else {
                    vec![SCOPE_LINK_LOCAL]
                };
                for scope in scopes {
                    let mut m = mgid;
                    m[1] = (m[1] & 0xf0) | scope;
                    add(
                        ConfGroup {
                            mgid: m,
                            params: GroupParams { scope, ..params },
                            ipoib_broadcast: false,
                            at: Some(item.at),
                        },
                        &mut seen,
                    )?;
                }
            }
            out.push(ConfPartition {
                name: p.name,
                pkey: p.pkey,
                pkey_generated: p.generated_at.is_some(),
                at: p.at,
                ipoib: p.ipoib,
                params: base,
                sl_at: w.sl.map(|v| v.1),
                members: p.members,
                groups,
            });
        }
        Ok((out, self.warnings))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> PartitionConf {
        PartitionConf::parse(text, Path::new("partitions.conf")).unwrap_or_else(|e| panic!("{e}"))
    }

    fn err(text: &str) -> (Pos, Problem, String) {
        let e = PartitionConf::parse(text, Path::new("partitions.conf")).expect_err("should fail");
        (e.at().expect("a position"), e.problem().expect("a problem").clone(), e.to_string())
    }

    fn at(line: u32, col: u32) -> Pos {
        Pos { line, col }
    }

    fn m(port: PortSpec, membership: Membership) -> (PortSpec, Membership) {
        (port, membership)
    }

    fn members(p: &ConfPartition) -> Vec<(PortSpec, Membership)> {
        p.members.iter().map(|s| (s.port, s.membership)).collect()
    }

    fn mgid(s: &str) -> [u8; 16] {
        s.parse::<Ipv6Addr>().unwrap().octets()
    }

    const G1: PortSpec = PortSpec::Guid(Guid(0x0002_c903_00a1_b2c1));
    const G2: PortSpec = PortSpec::Guid(Guid(0x0002_c903_00a1_b2c2));

    #[test]
    fn the_reference_example() {
        let c = parse(
            "Default=0x7fff, ipoib, mtu=5, rate=7 : ALL=full ;        # bcast group, 4K MTU\n\
             storage=0x0010, ipoib, defmember=full : 0x0002c90300a1b2c1, 0x0002c90300a1b2c2=limited, SELF ;\n\
             Default=0x7fff : mgid=ff12:401b::0707,sl=1 ;\n",
        );
        assert_eq!(c.partitions.len(), 2);
        let d = &c.partitions[0];
        assert_eq!((d.name.as_str(), d.pkey, d.ipoib, d.at), ("Default", 0x7fff, true, Some(at(1, 1))));
        assert_eq!((d.params.mtu, d.params.rate, d.params.q_key, d.params.scope), (5, 7, 0x0b1b, 2));
        // OpenSM's implicit members first, then the file's.
        assert_eq!(
            members(d),
            vec![
                m(PortSpec::All, Membership::Limited),
                m(PortSpec::SelfPort, Membership::Full),
                m(PortSpec::All, Membership::Full)
            ]
        );
        assert_eq!(d.members[2].at, Some(at(1, 40)));
        assert_eq!(d.groups.len(), 2);
        assert_eq!(d.groups[0].mgid, mgid("ff12:401b:ffff::ffff:ffff"));
        assert!(d.groups[0].ipoib_broadcast);
        // The IP group gets the P_Key filled in, the partition's MTU and
        // rate, the IPoIB Q_Key, and its own SL.
        let g = &d.groups[1];
        assert_eq!(g.mgid, mgid("ff12:401b:ffff::707"));
        assert_eq!((g.params.mtu, g.params.rate, g.params.sl, g.params.q_key), (5, 7, 1, 0x0b1b));
        assert_eq!((g.ipoib_broadcast, g.at), (false, Some(at(3, 18))));

        let s = &c.partitions[1];
        assert_eq!((s.name.as_str(), s.pkey, s.ipoib, s.pkey_generated), ("storage", 0x10, true, false));
        assert_eq!(
            members(s),
            vec![m(G1, Membership::Full), m(G2, Membership::Limited), m(PortSpec::SelfPort, Membership::Full)]
        );
        assert_eq!(s.groups.len(), 1);
        // Defaults: 2048 MTU (4), 10 Gb/s (3).
        assert_eq!((s.groups[0].params.mtu, s.groups[0].params.rate), (4, 3));
        assert_eq!(s.groups[0].mgid, [0xff, 0x12, 0x40, 0x1b, 0x80, 0x10, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]);
    }

    #[test]
    fn the_man_page_example() {
        let c = parse(
            "Default=0x7fff : ALL, SELF=full ;\n\
             NewPartition , ipoib : 0x123456=full, 0x3456789034=limi, 0x2134af2306 ;\n\
             YetAnotherOne = 0x300 : SELF=full ;\n\
             YetAnotherOne = 0x300 : ALL=limited ;\n\
             ShareIO = 0x80 , defmember=full : 0x123451, 0x123452;\n\
             # 0x123453, 0x123454 will be limited\n\
             ShareIO = 0x80 : 0x123453, 0x123454, 0x123455=full;\n\
             ShareIO = 0x80 , defmember=full : 0x12345b, 0x12345c=limited, 0x12345d;\n\
             # multicast groups added to default\n\
             Default=0x7fff,ipoib:\n\
             \tmgid=ff12:401b::0707,sl=1 # random IPv4 group\n\
             \tmgid=ff12:601b::16    # MLDv2-capable routers\n\
             \tmgid=ff12:401b::16    # IGMP\n\
             \tmgid=ff12:601b::2     # All routers\n\
             \tmgid=ff12::1,sl=1,Q_Key=0xDEADBEEF,rate=3,mtu=2 # random group\n\
             \tALL=full;\n",
        );
        let names: Vec<_> = c.partitions.iter().map(|p| (p.name.as_str(), p.pkey)).collect();
        assert_eq!(names, vec![("Default", 0x7fff), ("NewPartition", 1), ("YetAnotherOne", 0x300), ("ShareIO", 0x80)]);
        assert!(c.partitions[1].pkey_generated);
        let g = |n: u64| PortSpec::Guid(Guid(n));
        assert_eq!(
            members(&c.partitions[1]),
            vec![
                m(g(0x123456), Membership::Full),
                m(g(0x3456789034), Membership::Limited),
                m(g(0x2134af2306), Membership::Limited)
            ]
        );
        assert_eq!(
            members(&c.partitions[3]),
            vec![
                m(g(0x123451), Membership::Full),
                m(g(0x123452), Membership::Full),
                m(g(0x123453), Membership::Limited),
                m(g(0x123454), Membership::Limited),
                m(g(0x123455), Membership::Full),
                m(g(0x12345b), Membership::Full),
                m(g(0x12345c), Membership::Limited),
                m(g(0x12345d), Membership::Full),
            ]
        );
        let d = &c.partitions[0];
        assert!(d.ipoib);
        assert_eq!(members(d).last(), Some(&m(PortSpec::All, Membership::Full)));
        let groups: Vec<_> = d.groups.iter().map(|g| (g.mgid, g.params.q_key, g.params.sl)).collect();
        assert_eq!(
            groups,
            vec![
                (mgid("ff12:401b:ffff::ffff:ffff"), 0x0b1b, 0),
                (mgid("ff12:401b:ffff::707"), 0x0b1b, 1),
                (mgid("ff12:601b:ffff::16"), 0x0b1b, 0),
                (mgid("ff12:401b:ffff::16"), 0x0b1b, 0),
                (mgid("ff12:601b:ffff::2"), 0x0b1b, 0),
                (mgid("ff12::1"), 0xdead_beef, 1),
            ]
        );
        assert_eq!((d.groups[5].params.mtu, d.groups[5].params.rate), (2, 3));
        // The NewPartition broadcast group carries the generated P_Key.
        assert_eq!(c.partitions[1].groups[0].mgid, mgid("ff12:401b:8001::ffff:ffff"));
    }

    #[test]
    fn the_man_pages_double_colon_line_is_refused_as_opensm_refuses_it() {
        let (pos, problem, msg) = err("ShareIO = 0x80 : defmember=limited : 0x123456, 0x123457, 0x123458=full;\n");
        assert_eq!(pos, at(1, 18));
        assert_eq!(problem, Problem::FlagAmongMembers("defmember".into()));
        assert!(msg.starts_with("partitions.conf:1:18: 'defmember' is a flag"), "{msg}");
    }

    #[test]
    fn no_file_default() {
        let c = PartitionConf::default_no_file();
        assert_eq!(c.path, None);
        let d = &c.partitions[0];
        assert_eq!((d.pkey, d.ipoib), (0x7fff, true));
        assert_eq!(members(d)[0], m(PortSpec::All, Membership::Full));
        assert_eq!(d.groups.len(), 1);
        assert_eq!(d.groups[0].mgid, mgid("ff12:401b:ffff::ffff:ffff"));
        assert_eq!(d.groups[0].params, GroupParams::default());
    }

    #[test]
    fn a_file_without_default_line_has_opensms_implicit_default() {
        let c = parse("p=0x10: ALL;");
        let d = &c.partitions[0];
        assert_eq!((d.pkey, d.ipoib, d.at, d.groups.len()), (0x7fff, false, None, 0));
        assert_eq!(members(d), vec![m(PortSpec::All, Membership::Limited), m(PortSpec::SelfPort, Membership::Full)]);
        assert!(d.members.iter().all(|s| s.at.is_none()));
        // An empty file is the same default.
        assert_eq!(parse("# nothing\n\n").partitions, parse("").partitions);
        assert_eq!(parse("").partitions.len(), 1);
    }

    #[test]
    fn every_portspec() {
        let c = parse("p=0x10: ALL, ALL_CAS=full, all_switches=both, ALL_ROUTERS=l, SELF=f, NONE=full, 0x1, 255, 010;");
        let p = &c.partitions[1];
        assert_eq!(
            members(p),
            vec![
                m(PortSpec::All, Membership::Limited),
                m(PortSpec::AllCas, Membership::Full),
                m(PortSpec::AllSwitches, Membership::Both),
                m(PortSpec::AllRouters, Membership::Limited),
                m(PortSpec::SelfPort, Membership::Full),
                m(PortSpec::Guid(Guid(1)), Membership::Limited),
                m(PortSpec::Guid(Guid(255)), Membership::Limited),
                // strtoull base 0: a leading 0 is octal, as OpenSM reads it.
                m(PortSpec::Guid(Guid(8)), Membership::Limited),
            ]
        );
        // NONE names nobody; an empty list is allowed.
        assert!(parse("p=0x10: NONE;").partitions[1].members.is_empty());
        assert!(parse("p=0x10: ;").partitions[1].members.is_empty());
        assert!(parse("p=0x10:;").partitions[1].members.is_empty());
    }

    #[test]
    fn defmember_and_indx0_apply_to_their_own_entry() {
        let c = parse("p=0x10, defmember=both, indx0: 0x1, 0x2=limited;\np=0x10: 0x3;");
        let p = &c.partitions[1];
        assert_eq!(
            p.members.iter().map(|s| (s.membership, s.indx0)).collect::<Vec<_>>(),
            vec![(Membership::Both, true), (Membership::Limited, true), (Membership::Limited, false)]
        );
    }

    #[test]
    fn every_group_flag_and_its_default() {
        let c =
            parse("p=0x10, ipoib, mtu=4096, rate=100, sl=3, scope=5, Q_Key=0x1234, TClass=7, FlowLabel=0x12345: ALL;");
        let p = &c.partitions[1];
        let want = GroupParams { mtu: 5, rate: 16, sl: 3, scope: 5, q_key: 0x1234, tclass: 7, flow_label: 0x12345 };
        assert_eq!(p.params, want);
        assert_eq!(p.sl_at, Some(at(1, 39)));
        assert_eq!(p.groups[0].mgid, mgid("ff15:401b:8010::ffff:ffff"));
        assert_eq!(p.groups[0].params, want);
        // Nothing written: OpenSM's IPoIB defaults.
        assert_eq!(parse("p=0x10, ipoib: ALL;").partitions[1].params, GroupParams::default());
    }

    #[test]
    fn flag_names_ignore_case_and_underscores_and_take_unambiguous_abbreviations() {
        let c = parse("p=0x10, IPOIB, qkey=0x22, Q_KEY=0x22, tclass=1, FLOWLABEL=2, MTU=1, Def=full, m=1: 0x1;");
        let p = &c.partitions[1];
        assert_eq!(
            (p.ipoib, p.params.q_key, p.params.tclass, p.params.flow_label, p.params.mtu),
            (true, 0x22, 1, 2, 1)
        );
        assert_eq!(p.members[0].membership, Membership::Full);
        let (pos, problem, _) = err("p=0x10, s=1: ALL;");
        assert_eq!(pos, at(1, 9));
        assert_eq!(problem, Problem::AmbiguousFlag { given: "s".into(), candidates: "scope, sl".into() });
        // indx0 is compared whole, as OpenSM compares it.
        assert_eq!(err("p=0x10, indx: ALL;").1, Problem::UnknownFlag("indx".into()));
        let (pos, problem, msg) = err("p=0x10,\n  mtux=5: ALL;");
        assert_eq!((pos, problem), (at(2, 3), Problem::UnknownFlag("mtux".into())));
        assert_eq!(msg, "partitions.conf:2:3: unknown flag 'mtux'");
    }

    #[test]
    fn several_scopes_make_several_broadcast_groups() {
        let c = parse("p=0x10, ipoib, scope=2, scope=5, scope=2: ALL;");
        let g: Vec<_> = c.partitions[1].groups.iter().map(|g| (g.mgid[1], g.params.scope)).collect();
        assert_eq!(g, vec![(0x12, 2), (0x15, 5)]);
    }

    #[test]
    fn mtu_codes_and_names() {
        for (v, code) in [("1", 1), ("5", 5), ("0x4", 4), ("256", 1), ("512", 2), ("1024", 3), ("2048", 4), ("4096", 5)]
        {
            let c = parse(&format!("p=0x10, mtu={v}: ALL;"));
            assert_eq!(c.partitions[1].params.mtu, code, "mtu={v}");
        }
        for v in ["0", "6", "4097", "big", "4k"] {
            let (pos, problem, _) = err(&format!("p=0x10, mtu={v}: ALL;"));
            assert_eq!(pos, at(1, 13));
            assert!(matches!(problem, Problem::BadValue { flag: "mtu", .. }), "mtu={v}: {problem}");
        }
    }

    #[test]
    fn rate_codes_and_names() {
        let cases = [
            // Codes, as OpenSM reads them.
            ("2", 2),
            ("3", 3),
            ("7", 7),
            ("10", 10),
            ("14", 14),
            ("20", 20),
            ("22", 22),
            ("24", 24),
            ("0x10", 16),
            // Not codes: Gb/s.
            ("25", 15),
            ("28", 19),
            ("30", 4),
            ("40", 7),
            ("56", 12),
            ("100", 16),
            ("200", 17),
            ("400", 21),
            ("600", 22),
            ("1200", 24),
            // A suffix or a decimal point: always Gb/s.
            ("10g", 3),
            ("10G", 3),
            ("10Gbps", 3),
            ("10gb/s", 3),
            ("20gb", 6),
            ("14g", 11),
            ("5g", 5),
            ("2.5", 2),
            ("2.5g", 2),
            ("100g", 16),
        ];
        for (v, code) in cases {
            let c = parse(&format!("p=0x10, rate={v}: ALL;"));
            assert_eq!(c.partitions[1].params.rate, code, "rate={v}");
        }
        for v in ["0", "1", "26", "2.6", "10.55", "0x10g", "g", "fast", "99999999999999999999999"] {
            let (_, problem, _) = err(&format!("p=0x10, rate={v}: ALL;"));
            assert!(matches!(problem, Problem::BadValue { flag: "rate", .. }), "rate={v}: {problem}");
        }
    }

    #[test]
    fn a_rate_that_is_a_code_and_a_speed_is_read_as_the_code_with_a_warning() {
        let c = parse("p=0x10, rate=10: ALL;\nq=0x11, rate=5: ALL;\nr=0x12, rate=10g: ALL;");
        assert_eq!(c.partitions[1].params.rate, 10);
        assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
        assert_eq!(c.warnings[0].at, at(1, 14));
        assert!(c.warnings[0].message.contains("120 Gb/s") && c.warnings[0].message.contains("rate=10g"));
    }

    #[test]
    fn numeric_flag_ranges() {
        assert_eq!(parse("p=0x10, sl=15: ALL;").partitions[1].params.sl, 15);
        assert_eq!(parse("p=0x10, FlowLabel=0xfffff: ALL;").partitions[1].params.flow_label, 0xfffff);
        assert_eq!(parse("p=0x10, Q_Key=0xffffffff: ALL;").partitions[1].params.q_key, 0xffff_ffff);
        // Q_Key 0 is OpenSM's "not given".
        assert_eq!(parse("p=0x10, Q_Key=0: ALL;").partitions[1].params.q_key, 0x0b1b);
        for bad in
            ["sl=16", "sl=-1", "scope=0", "scope=16", "TClass=256", "FlowLabel=0x100000", "Q_Key=0x100000000", "sl=1x"]
        {
            let (pos, problem, _) = err(&format!("p=0x10, {bad}: ALL;"));
            assert!(matches!(problem, Problem::BadValue { .. }), "{bad}: {problem}");
            assert_eq!(pos.col as usize, 10 + bad.find('=').unwrap(), "{bad}");
        }
        assert_eq!(err("p=0x10, sl: ALL;").1, Problem::MissingValue("sl"));
        assert_eq!(
            err("p=0x10, ipoib=1: ALL;"),
            (at(1, 15), Problem::UnexpectedValue("ipoib"), err("p=0x10, ipoib=1: ALL;").2)
        );
        assert_eq!(err("p=0x10, sl=1, sl=2: ALL;").1, Problem::RepeatedFlag { flag: "sl" });
        assert_eq!(err("p=0x10, defmember=fool: ALL;").1, Problem::BadMembership("fool".into()));
        assert_eq!(parse("p=0x10, sl=1, sl=1: ALL;").partitions[1].params.sl, 1);
    }

    #[test]
    fn pkeys() {
        assert_eq!(parse("p=0x10: ALL;").partitions[1].pkey, 0x10);
        assert_eq!(parse("p=16: ALL;").partitions[1].pkey, 0x10);
        assert_eq!(parse("p=020: ALL;").partitions[1].pkey, 0x10);
        // A definition that starts with a digit is a P_Key without a name.
        let c = parse("0x10, ipoib: ALL;");
        assert_eq!((c.partitions[1].pkey, c.partitions[1].name.as_str()), (0x10, "0010"));
        assert_eq!(parse("=0x10: ALL;").partitions[1].name, "0010");
        // A name may have blanks inside.
        assert_eq!(parse("My  Partition = 0x10: ALL;").partitions[1].name, "My  Partition");
        // The default partition keeps its name.
        let c = parse("Mine=0x7fff: ALL=full;");
        assert_eq!((c.partitions.len(), c.partitions[0].name.as_str()), (1, "Default"));
        assert_eq!(c.warnings.len(), 1);
        for (bad, why) in [
            ("0", "0 is no"),
            ("0x8000", "bit 15"),
            ("0xffff", "bit 15"),
            ("0x8010", "0x0010"),
            ("0x10000", "16 bits"),
            ("0x", "not a number"),
            ("09", "not a number"),
            ("abc", "not a number"),
        ] {
            let (pos, problem, msg) = err(&format!("p={bad}: ALL;"));
            assert_eq!(pos, at(1, 3), "{bad}");
            assert!(matches!(problem, Problem::BadPKey { .. }), "{bad}: {problem}");
            assert!(msg.contains(why), "{bad}: {msg}");
        }
        assert_eq!(err("p=: ALL;").0, at(1, 3));
        assert_eq!(err("p=0x10=3: ALL;").0, at(1, 7));
    }

    #[test]
    fn generated_pkeys_follow_opensm() {
        let c = parse("a: ALL;\nb: ALL;\nc=0x3: ALL;\nd: ALL;\na: SELF;\nDefault: ALL=full;");
        let keys: Vec<_> = c.partitions.iter().map(|p| (p.name.as_str(), p.pkey, p.pkey_generated)).collect();
        assert_eq!(
            keys,
            vec![("Default", 0x7fff, false), ("a", 1, true), ("b", 2, true), ("c", 3, false), ("d", 4, true)]
        );
        // 'a' without a P_Key extends the partition named 'a'; 'Default'
        // the default one.
        assert_eq!(c.partitions[1].members.len(), 2);
        assert_eq!(members(&c.partitions[0]).last(), Some(&m(PortSpec::All, Membership::Full)));
        // Naming a generated P_Key later would merge unrelated partitions.
        let (pos, problem, _) = err("a: ALL;\nb=0x1: ALL;");
        assert_eq!(pos, at(2, 3));
        assert_eq!(problem, Problem::GeneratedPKeyTaken { pkey: 1, name: "a".into(), generated_at: at(1, 1) });
        // A name two partitions have is ambiguous.
        assert!(matches!(err("a=0x1: ALL;\na=0x2: ALL;\na: SELF;").1, Problem::AmbiguousName { .. }));
    }

    #[test]
    fn repeated_pkeys_merge_and_conflicting_parameters_are_refused() {
        let c = parse("a=0x10, mtu=5: 0x1;\n=0x10, ipoib, rate=7: 0x2;\na=0x10, mtu=4096: 0x3;");
        assert_eq!(c.partitions.len(), 2);
        let p = &c.partitions[1];
        assert_eq!((p.name.as_str(), p.ipoib, p.params.mtu, p.params.rate, p.members.len()), ("a", true, 5, 7, 3));
        assert!(c.warnings.is_empty());
        // A second name for one P_Key is refused (a copied line whose P_Key
        // was not changed), where OpenSM would merge them.
        let (pos, problem, _) = err("a=0x10: 0x1;\nb=0x10: 0x2;");
        assert_eq!(pos, at(2, 1));
        assert_eq!(problem, Problem::PKeyNamedTwice { pkey: 0x10, first: "a".into(), first_at: at(1, 1) });
        let (pos, problem, msg) = err("a=0x10, mtu=5: 0x1;\na=0x10, mtu=4: 0x3;");
        assert_eq!(pos, at(2, 13));
        assert_eq!(
            problem,
            Problem::ConflictingParam {
                pkey: 0x10,
                param: "mtu",
                ours: "code 4".into(),
                theirs: "code 5".into(),
                first: at(1, 13)
            }
        );
        assert_eq!(msg, "partitions.conf:2:13: partition 0x0010: mtu is code 4 here but code 5 at 1:13");
        assert!(matches!(
            err("a=0x10, Q_Key=1: ALL;\na=0x10, Q_Key=2: ALL;").1,
            Problem::ConflictingParam { param: "Q_Key", .. }
        ));
    }

    #[test]
    fn layout_comments_and_line_breaks() {
        let c = parse(
            "  # leading comment\r\n\
             p = 0x10 ,\r\n  ipoib ,  mtu = 5   # flags on two lines\r\n\
             :\r\n  0x1 = full\r\n  0x2\r\n  , 0x3 , , ;  ;\r\n\
             q=0x11:0x4;r=0x12:0x5;\n",
        );
        let names: Vec<_> = c.partitions.iter().map(|p| p.pkey).collect();
        assert_eq!(names, vec![0x7fff, 0x10, 0x11, 0x12]);
        assert_eq!(c.partitions[1].members.len(), 3);
        assert_eq!(c.partitions[1].members[1].at, Some(at(6, 3)));
        assert_eq!(c.partitions[1].params.mtu, 5);
    }

    #[test]
    fn mgid_items() {
        // Scope written on the line overwrites the nibble; with none the
        // MGID keeps its own; the partition's scope is inherited.
        let c = parse("p=0x10:\n mgid=ff15::1\n mgid=ff12::2, scope=8, scope=14\n mgid=ff10::3\n ALL;");
        let g: Vec<_> = c.partitions[1].groups.iter().map(|g| (g.mgid, g.params.scope, g.params.q_key)).collect();
        assert_eq!(
            g,
            vec![(mgid("ff15::1"), 5, 0), (mgid("ff18::2"), 8, 0), (mgid("ff1e::2"), 14, 0), (mgid("ff12::3"), 2, 0)]
        );
        let c = parse("p=0x10, scope=5, TClass=3, Q_Key=0x99:\n mgid=ff12::1 ;");
        let g = &c.partitions[1].groups[0];
        assert_eq!((g.mgid, g.params.scope, g.params.tclass, g.params.q_key), (mgid("ff15::1"), 5, 3, 0x99));
        // The ports go on another line: a port on the mgid line is an error.
        let (pos, problem, _) = err("p=0x10: mgid=ff12::1, ALL=full;");
        assert_eq!(pos, at(1, 23));
        assert!(matches!(problem, Problem::Expected { .. }), "{problem}");
        assert!(problem.to_string().contains("another line"));
        assert_eq!(err("p=0x10: mgid=ff12::1, ipoib;").1, Problem::NotAGroupFlag("ipoib".into()));
        assert_eq!(err("p=0x10: mgid=ff12::1, sl;").1, Problem::MissingValue("sl"));
        assert_eq!(err("p=0x10: mgid=ff12::1 sl=1;").0, at(1, 22));
        assert_eq!(err("p=0x10: mgid= ;").0, at(1, 15));
        let (pos, problem, _) = err("p=0x10: mgid=fe80::1;");
        assert_eq!(
            (pos, problem),
            (
                at(1, 14),
                Problem::BadMgid { value: "fe80::1".into(), why: "not a multicast GID (the first byte must be 0xff)" }
            )
        );
        assert!(matches!(err("p=0x10: mgid=ff12:zz::1;").1, Problem::BadMgid { .. }));
        assert!(matches!(err("p=0x10: mgid=ff12::1::2;").1, Problem::BadMgid { .. }));
    }

    #[test]
    fn ip_groups_are_checked_against_their_partition() {
        assert_eq!(
            parse("p=0x10, ipoib:\n mgid=ff12:401b:8010::1\n;").partitions[1].groups[1].mgid,
            mgid("ff12:401b:8010::1")
        );
        // The broadcast template takes the partition's P_Key.
        let c = parse("p=0x10:\n mgid=ff12:401b:ffff::ffff:ffff\n;");
        assert_eq!(c.partitions[1].groups[0].mgid, mgid("ff12:401b:8010::ffff:ffff"));
        let (pos, problem, _) = err("p=0x10:\n mgid=ff12:401b:8011::1\n;");
        assert_eq!(pos, at(2, 2));
        assert!(matches!(problem, Problem::IpGroup { pkey: 0x10, .. }));
        let (pos, problem, _) = err("p=0x10, mtu=5:\n mgid=ff12:601b::1, mtu=4\n;");
        assert_eq!(pos, at(2, 25));
        assert!(matches!(problem, Problem::IpGroup { .. }), "{problem}");
        assert!(matches!(err("p=0x10:\n mgid=ff12:401b::1, rate=7\n;").1, Problem::IpGroup { .. }));
        // Not an IP group: no such checks.
        assert_eq!(parse("p=0x10:\n mgid=ff12:1234:8011::1, rate=7\n;").partitions[1].groups[0].params.rate, 7);
    }

    #[test]
    fn duplicate_groups() {
        // The broadcast group written out again with the same parameters is
        // one group.
        let c = parse("p=0x10, ipoib:\n mgid=ff12:401b::ffff:ffff\n;");
        assert_eq!(c.partitions[1].groups.len(), 1);
        let (pos, problem, _) = err("p=0x10, ipoib:\n mgid=ff12:401b::ffff:ffff, sl=2\n;");
        assert_eq!(pos, at(2, 2));
        assert!(matches!(problem, Problem::DuplicateGroup { what: "other parameters", .. }), "{problem}");
        let (pos, problem, _) = err("p=0x10: mgid=ff12::9;\nq=0x11: mgid=ff12::9;");
        assert_eq!(pos, at(2, 9));
        assert!(matches!(problem, Problem::DuplicateGroup { what: "another P_Key", .. }), "{problem}");
    }

    #[test]
    fn syntax_errors_name_line_and_column() {
        let cases: &[(&str, Pos)] = &[
            // Missing ';' at the end of the file.
            ("p=0x10: ALL", at(1, 12)),
            ("p=0x10: ALL\n", at(2, 1)),
            ("p=0x10: mgid=ff12::1\n", at(2, 1)),
            ("p=0x10", at(1, 7)),
            // ';' before ':'.
            ("p=0x10, ipoib;", at(1, 14)),
            // A missing ';' between entries.
            ("p=0x10: ALL\nq=0x11: ALL;", at(2, 7)),
            ("p=0x10: ALL\nstorage=0x0010, ipoib, defmember=full : 0x1;", at(2, 39)),
            ("p=0x10: 0x1 0x2;", at(1, 13)),
            ("p=0x10: =full;", at(1, 9)),
            ("p=0x10: 0x1=;", at(1, 13)),
            ("p=0x10: 0x1=fool;", at(1, 13)),
            ("p=0x10: 0x0;", at(1, 9)),
            ("p=0x10: 0x1g;", at(1, 9)),
            ("p=0x10: 0x10000000000000000;", at(1, 9)),
            ("p=0x10: bogus;", at(1, 9)),
            ("p q\nr=0x10: ALL;", at(2, 1)),
            ("p=0x10 0x11: ALL;", at(1, 8)),
            ("p=0x10, =1: ALL;", at(1, 9)),
            ("p=0x10, mtu 5: ALL;", at(1, 9)),
            ("p=0x10, mtu=: ALL;", at(1, 13)),
        ];
        for &(text, pos) in cases {
            let (got, problem, msg) = err(text);
            assert_eq!(got, pos, "{text:?}: {msg}");
            assert!(msg.starts_with(&format!("partitions.conf:{}:{}: ", pos.line, pos.col)), "{msg}");
            let _ = problem;
        }
        assert_eq!(
            err("p=0x10: ALL").1,
            Problem::UnexpectedEof { expected: "';' at the end of the entry", start: at(1, 1) }
        );
        assert_eq!(err("p=0x10, ipoib;").1, Problem::NoColon { start: at(1, 1) });
        assert_eq!(err("p=0x10: ALL\nq=0x11: ALL;").1, Problem::ColonInMembers { start: at(1, 1) });
    }

    #[test]
    fn columns_count_characters() {
        let (pos, _, _) = err("é=0x10: bogus;");
        assert_eq!(pos, at(1, 9));
        assert_eq!(parse("é=0x10: ALL;").partitions[1].name, "é");
    }

    #[test]
    fn bytes_that_are_not_utf8() {
        let e = PartitionConf::parse_bytes(b"p=0x10: ALL;\nq\xff", Path::new("x.conf")).unwrap_err();
        assert_eq!((e.at(), e.problem()), (Some(at(2, 2)), Some(&Problem::NotUtf8)));
        assert_eq!(e.to_string(), "x.conf:2:2: the file is not UTF-8 text");
    }

    #[test]
    fn read_names_the_path() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.conf");
        let e = PartitionConf::read(&missing).unwrap_err();
        assert!(matches!(e, PartitionConfError::Io { .. }));
        assert!(e.to_string().starts_with(&missing.display().to_string()), "{e}");
        let file = dir.path().join("partitions.conf");
        std::fs::write(&file, "p=0x10: ALL;\nq=0x11: bad;\n").unwrap();
        let e = PartitionConf::read(&file).unwrap_err();
        assert_eq!(e.to_string(), format!("{}:2:9: bad port GUID 'bad': want a port GUID (0x...) or ALL, ALL_CAS, ALL_SWITCHES, ALL_ROUTERS, SELF, NONE", file.display()));
        std::fs::write(&file, "p=0x10: ALL;\n").unwrap();
        let c = PartitionConf::read(&file).unwrap();
        assert_eq!((c.path.as_deref(), c.partitions.len()), (Some(file.as_path()), 2));
    }

    fn fixture(name: &str) -> PathBuf {
        Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/partitions").join(name)
    }

    #[test]
    fn fixture_files() {
        let c = PartitionConf::read(&fixture("opensm-man-example.conf")).unwrap_or_else(|e| panic!("{e}"));
        let keys: Vec<_> = c.partitions.iter().map(|p| p.pkey).collect();
        assert_eq!(keys, vec![0x7fff, 0x0001, 0x300, 0x80]);
        assert_eq!(c.partitions[0].groups.len(), 6);

        let c = PartitionConf::read(&fixture("named-values.conf")).unwrap_or_else(|e| panic!("{e}"));
        let d = &c.partitions[0];
        assert_eq!((d.params.mtu, d.params.rate), (5, 16));
        let s = &c.partitions[1];
        assert_eq!((s.params.mtu, s.params.rate, s.members.len()), (4, 2, 3));
        let k = &c.partitions[2];
        assert_eq!((k.pkey, k.members[0].indx0, k.groups.len()), (0x20, true, 0));
        assert!(c.warnings.is_empty(), "{:?}", c.warnings);

        let path = fixture("missing-semicolon.conf");
        let e = PartitionConf::read(&path).unwrap_err();
        assert_eq!(e.at(), Some(at(3, 23)));
        assert_eq!(e.problem(), Some(&Problem::ColonInMembers { start: at(2, 1) }));
        assert!(e.to_string().starts_with(&format!("{}:3:23: ", path.display())), "{e}");
    }

    #[test]
    fn broadcast_mgid_layout() {
        assert_eq!(
            ipoib_broadcast_mgid(0x7fff, 2),
            [0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]
        );
        assert_eq!(
            ipoib_broadcast_mgid(0x0123, 5),
            [0xff, 0x15, 0x40, 0x1b, 0x81, 0x23, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]
        );
    }

    mod never_panics {
        use super::*;
        use proptest::prelude::*;

        fn check(text: &str) {
            match PartitionConf::parse(text, Path::new("f")) {
                Ok(c) => {
                    assert_eq!(c.partitions[0].pkey, DEFAULT_PARTITION);
                    for p in &c.partitions {
                        assert!(p.pkey != 0 && p.pkey <= DEFAULT_PARTITION);
                        for g in &p.groups {
                            assert_eq!(g.mgid[0], 0xff);
                            assert_eq!(g.mgid[1] & 0x0f, g.params.scope);
                        }
                    }
                }
                Err(e) => {
                    // The position is inside the text (or just past it).
                    let at = e.at().expect("parse errors have a position");
                    let lines = text.split('\n').count() as u32;
                    assert!(at.line >= 1 && at.line <= lines && at.col >= 1, "{e} for {text:?}");
                    let line = text.split('\n').nth(at.line as usize - 1).unwrap_or("");
                    assert!(at.col as usize <= line.chars().count() + 1, "{e} for {text:?}");
                }
            }
        }

        fn soup() -> impl Strategy<Value = String> {
            let piece = prop_oneof![
                Just("=".to_string()),
                Just(",".to_string()),
                Just(":".to_string()),
                Just(";".to_string()),
                Just("\n".to_string()),
                Just(" ".to_string()),
                Just("#c".to_string()),
                Just("mgid".to_string()),
                Just("ff12:401b::1".to_string()),
                Just("ff12:401b:ffff::ffff:ffff".to_string()),
                Just("ALL".to_string()),
                Just("SELF".to_string()),
                Just("full".to_string()),
                Just("ipoib".to_string()),
                Just("scope".to_string()),
                Just("mtu".to_string()),
                Just("rate".to_string()),
                Just("Q_Key".to_string()),
                Just("defmember".to_string()),
                Just("0x7fff".to_string()),
                Just("0x10".to_string()),
                "[0-9a-fx]{1,6}",
                "[A-Za-z_]{1,6}",
            ];
            prop::collection::vec(piece, 0..40).prop_map(|v| v.concat())
        }

        proptest! {
            #[test]
            fn on_any_string(text in any::<String>()) {
                check(&text);
            }

            #[test]
            fn on_any_bytes(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
                let _ = PartitionConf::parse_bytes(&bytes, Path::new("f"));
            }

            #[test]
            fn on_token_soup(text in soup()) {
                check(&text);
            }
        }
    }
}
