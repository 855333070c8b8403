//! What a file fails on: the place in the file, the problem there, and
//! the error that names the file too.

use std::fmt;
use std::path::PathBuf;

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
    #[error("P_Key {pkey:#06x}{} was generated for '{name}' at {generated_at}: give that partition an explicit P_Key", spelling(*.pkey, *.written, None))]
    GeneratedPKeyTaken { pkey: u16, written: u16, name: String, generated_at: Pos },
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
    #[error("P_Key {pkey:#06x}{} is already partition '{first}' (at {first_at}): one P_Key, one name (repeat '{first}' to add to it)", spelling(*.pkey, *.written, *.first_written))]
    PKeyNamedTwice { pkey: u16, written: u16, first: String, first_written: Option<u16>, first_at: Pos },
}

/// How the P_Keys of a clash were written, when bit 15 makes them look
/// unlike the partition they name: without it, `a=0x8005` and `b=0x0005`
/// would seem not to clash at all.
fn spelling(partition: u16, here: u16, there: Option<u16>) -> String {
    let why = "only the low 15 bits name the partition";
    match (here != partition, there.filter(|&t| t != partition)) {
        (false, None) => String::new(),
        (true, None) => format!(" (written {here:#06x} here; {why})"),
        (false, Some(t)) => format!(" (written {t:#06x} there; {why})"),
        (true, Some(t)) => format!(" (written {here:#06x} here and {t:#06x} there; {why})"),
    }
}

/// A problem at a place: what the parser and builder fail with, before
/// the path is added.
pub(super) type Fail = (Pos, Problem);

/// A word of the file as a message quotes it: cut short, so that one
/// long run of junk does not fill the message.
pub(super) fn excerpt(s: &str) -> String {
    const MAX: usize = 40;
    if s.chars().count() <= MAX {
        s.to_string()
    } else {
        let mut e: String = s.chars().take(MAX).collect();
        e.push_str("...");
        e
    }
}
