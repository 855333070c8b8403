//! OpenSM's `guid2lid` persistence file: port GUID → LID range.
//!
//! Format (OpenSM `osm_db_files.c` / `osm_db_pack.c`): one record per key,
//! each followed by a blank line; a record is `0x%016x 0x%04x 0x%04x` = port
//! GUID, min LID, max LID, starting in column 0. OpenSM writes records in hash
//! order; we write them sorted by GUID so the file diffs cleanly, and read any
//! order.
//!
//! Reading is line-oriented and forgiving: a bad line is skipped and reported
//! as a [`Guid2LidWarning`] (file, line, what was wrong), the rest of the
//! file still counts. Like OpenSM, the first record of a GUID wins and later
//! ones are dropped, and LIDs ≥ 0xC000 are refused. We are stricter than
//! OpenSM where OpenSM would silently read something else than what the line
//! says (`strtoul` stopping at trailing junk, a truncated last line), and a
//! little more lenient where nothing is ambiguous: records need not be
//! separated by blank lines, so hand-edited files work. Only a file that
//! cannot be read at all is an error.
//!
//! Writing goes to `<file>.tmp`, is fsynced, renamed over the file and the
//! directory is fsynced, so a crash leaves either the old or the new file,
//! never a torn one.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use super::{LidRange, RangeError};
use crate::types::{Guid, Lid};

/// Files larger than this are refused rather than read: 50,000 ports take
/// under 2 MB, so anything this big is not a guid2lid file.
pub const MAX_FILE_LEN: u64 = 64 << 20;

/// The persisted GUID → LID-range map.
///
/// Invariant: no two entries overlap, so every entry could be honoured at
/// once. Iteration is in GUID order.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Guid2Lid {
    by_guid: BTreeMap<Guid, LidRange>,
    /// Range base → owner, to find overlaps in O(log n).
    by_base: BTreeMap<Lid, Guid>,
}

/// An insert refused because the range is already (partly) held by another GUID.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("LIDs {range} for {guid} overlap LIDs {holder_range} of {holder}")]
pub struct Overlap {
    pub guid: Guid,
    pub range: LidRange,
    pub holder: Guid,
    pub holder_range: LidRange,
}

impl Guid2Lid {
    pub fn new() -> Guid2Lid {
        Guid2Lid::default()
    }

    pub fn len(&self) -> usize {
        self.by_guid.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_guid.is_empty()
    }

    pub fn get(&self, guid: Guid) -> Option<LidRange> {
        self.by_guid.get(&guid).copied()
    }

    /// Entries in GUID order.
    pub fn iter(&self) -> impl Iterator<Item = (Guid, LidRange)> + '_ {
        self.by_guid.iter().map(|(g, r)| (*g, *r))
    }

    /// Sets `guid`'s range, replacing its previous one (returned). Refused if
    /// the range overlaps another GUID's entry; the map is then unchanged.
    pub fn insert(&mut self, guid: Guid, range: LidRange) -> Result<Option<LidRange>, Overlap> {
        if let Some((holder, holder_range)) = self.overlapping(range).find(|(g, _)| *g != guid) {
            return Err(Overlap { guid, range, holder, holder_range });
        }
        let old = self.remove(guid);
        self.by_guid.insert(guid, range);
        self.by_base.insert(range.base(), guid);
        Ok(old)
    }

    pub fn remove(&mut self, guid: Guid) -> Option<LidRange> {
        let old = self.by_guid.remove(&guid)?;
        self.by_base.remove(&old.base());
        Some(old)
    }

    /// The entries that share at least one LID with `range`, in LID order
    /// (descending).
    pub fn overlapping(&self, range: LidRange) -> impl Iterator<Item = (Guid, LidRange)> + '_ {
        // Entries are disjoint, so walking down from the last base ≤ range.max
        // can stop at the first entry that ends below range.min.
        self.by_base
            .range(..=range.max())
            .rev()
            .map(|(_, g)| (*g, self.by_guid[g]))
            .take_while(move |(_, r)| r.max() >= range.min())
    }

    /// The entry holding `lid`, if any.
    pub fn holder_of(&self, lid: Lid) -> Option<(Guid, LidRange)> {
        let (_, g) = self.by_base.range(..=lid).next_back()?;
        let r = self.by_guid[g];
        r.contains(lid).then_some((*g, r))
    }

    /// The file text: records sorted by GUID, each followed by a blank line,
    /// exactly as OpenSM formats them.
    pub fn to_text(&self) -> String {
        let mut s = String::with_capacity(self.len() * 36);
        for (guid, r) in self.iter() {
            // `fmt::Write` for String cannot fail.
            let _ = fmt::Write::write_fmt(
                &mut s,
                format_args!("0x{:016x} 0x{:04x} 0x{:04x}\n\n", guid.0, r.min().0, r.max().0),
            );
        }
        s
    }

    /// Parses file contents. Never fails: bad lines are skipped and reported,
    /// labelled with `file`.
    pub fn parse(bytes: &[u8], file: &Path) -> (Guid2Lid, Vec<Guid2LidWarning>) {
        let mut map = Guid2Lid::new();
        let mut warnings = Vec::new();
        // First line of each GUID seen, valid or not: like OpenSM, a repeated
        // key is dropped even when the first record was unusable.
        let mut first_line: HashMap<Guid, usize> = HashMap::new();
        let mut line_of: HashMap<Guid, usize> = HashMap::new();

        let mut lines: Vec<&[u8]> = bytes.split(|&b| b == b'\n').collect();
        if bytes.ends_with(b"\n") || bytes.is_empty() {
            lines.pop(); // the empty tail after the final newline
        }
        for (i, raw) in lines.into_iter().enumerate() {
            let line = i + 1;
            let mut warn = |problem| warnings.push(Guid2LidWarning { file: file.to_path_buf(), line, problem });
            match parse_line(raw) {
                Ok(None) => {}
                Ok(Some(Record { guid, lids })) => {
                    if let Some(&first) = first_line.get(&guid) {
                        warn(LineProblem::Duplicate { guid, first_line: first });
                        continue;
                    }
                    first_line.insert(guid, line);
                    match lids.and_then(|(min, max)| LidRange::from_min_max(min, max).map_err(LineProblem::BadRange)) {
                        Err(p) => warn(p),
                        Ok(range) => match map.insert(guid, range) {
                            Ok(_) => {
                                line_of.insert(guid, line);
                            }
                            Err(o) => warn(LineProblem::Overlap {
                                range,
                                holder: o.holder,
                                holder_range: o.holder_range,
                                holder_line: line_of.get(&o.holder).copied().unwrap_or(0),
                            }),
                        },
                    }
                }
                Err(p) => warn(p),
            }
        }
        (map, warnings)
    }

    /// Reads and parses `path`. An error means nothing usable could be read
    /// (missing, unreadable, absurdly large); callers log it and start from
    /// an empty map.
    pub fn read(path: &Path) -> Result<(Guid2Lid, Vec<Guid2LidWarning>), Guid2LidError> {
        let read_err = |source| Guid2LidError::Read { path: path.to_path_buf(), source };
        let mut bytes = Vec::new();
        File::open(path).and_then(|f| f.take(MAX_FILE_LEN + 1).read_to_end(&mut bytes)).map_err(read_err)?;
        if bytes.len() as u64 > MAX_FILE_LEN {
            return Err(Guid2LidError::TooLarge { path: path.to_path_buf(), max: MAX_FILE_LEN });
        }
        Ok(Guid2Lid::parse(&bytes, path))
    }

    /// Replaces `path` atomically: `<path>.tmp` is written and fsynced, then
    /// renamed over `path`, then the directory is fsynced so the rename
    /// itself survives a crash.
    pub fn write(&self, path: &Path) -> Result<(), Guid2LidError> {
        let mut tmp = path.as_os_str().to_owned();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let err = |step, source| Guid2LidError::Write { path: path.to_path_buf(), step, source };

        let written = File::create(&tmp)
            .map_err(|e| err("creating the temporary file", e))
            .and_then(|mut f| {
                f.write_all(self.to_text().as_bytes()).map_err(|e| err("writing the temporary file", e))?;
                f.sync_all().map_err(|e| err("fsyncing the temporary file", e))
            })
            .and_then(|()| fs::rename(&tmp, path).map_err(|e| err("renaming the temporary file", e)));
        if written.is_err() {
            // Best effort: a leftover .tmp is harmless (never read) but untidy.
            let _ = fs::remove_file(&tmp);
            return written;
        }
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        File::open(dir).and_then(|d| d.sync_all()).map_err(|e| err("fsyncing the directory", e))
    }
}

impl fmt::Debug for Guid2Lid {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_map().entries(self.by_guid.iter()).finish()
    }
}

/// Why the file as a whole could not be used.
#[derive(Debug, thiserror::Error)]
pub enum Guid2LidError {
    #[error("cannot read guid2lid file {}: {source}", path.display())]
    Read { path: PathBuf, source: io::Error },
    #[error("guid2lid file {} is larger than {max} bytes; refusing to read it", path.display())]
    TooLarge { path: PathBuf, max: u64 },
    #[error("cannot write guid2lid file {}: {step}: {source}", path.display())]
    Write { path: PathBuf, step: &'static str, source: io::Error },
}

impl Guid2LidError {
    /// The file does not exist: normal on a first start, worth only an info line.
    pub fn is_not_found(&self) -> bool {
        matches!(self, Guid2LidError::Read { source, .. } if source.kind() == io::ErrorKind::NotFound)
    }
}

/// One skipped line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Guid2LidWarning {
    pub file: PathBuf,
    /// 1-based.
    pub line: usize,
    pub problem: LineProblem,
}

impl fmt::Display for Guid2LidWarning {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}; line ignored", self.file.display(), self.line, self.problem)
    }
}

/// The three fields of a record.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    PortGuid,
    MinLid,
    MaxLid,
}

impl fmt::Display for Field {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Field::PortGuid => "port GUID",
            Field::MinLid => "min LID",
            Field::MaxLid => "max LID",
        })
    }
}

/// What was wrong with a line. Texts quoted from the file are cut to 40
/// characters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LineProblem {
    #[error("indented line outside a record: {0:?}")]
    Indented(String),
    #[error("{0} is missing")]
    Missing(Field),
    #[error("{field} {text:?} is not a number")]
    BadNumber { field: Field, text: String },
    #[error("{field} {value:#x} is not a unicast LID (must be below 0xc000)")]
    NotUnicast { field: Field, value: u64 },
    #[error("unexpected text after the max LID: {0:?}")]
    Trailing(String),
    #[error("port GUID 0 is not a valid GUID")]
    ZeroGuid,
    #[error("{guid} already appeared on line {first_line}; the first record wins")]
    Duplicate { guid: Guid, first_line: usize },
    #[error("{0}")]
    BadRange(RangeError),
    #[error("LIDs {range} overlap LIDs {holder_range} of {holder} (line {holder_line})")]
    Overlap { range: LidRange, holder: Guid, holder_range: LidRange, holder_line: usize },
}

struct Record {
    guid: Guid,
    /// Key-level problems (bad GUID) fail the whole line; LID problems still
    /// let the GUID claim its key.
    lids: Result<(Lid, Lid), LineProblem>,
}

/// `Ok(None)` for a blank line.
fn parse_line(raw: &[u8]) -> Result<Option<Record>, LineProblem> {
    let mut tokens = raw.split(|b| b.is_ascii_whitespace()).filter(|t| !t.is_empty());
    let Some(first) = tokens.next() else {
        return Ok(None);
    };
    if raw[0].is_ascii_whitespace() {
        // OpenSM's engine would glue this onto the previous value (or refuse
        // the whole file); guid2lid values never span lines.
        return Err(LineProblem::Indented(excerpt(raw.trim_ascii())));
    }
    let guid = Guid(parse_number(first).ok_or_else(|| bad(Field::PortGuid, first))?);
    if guid.0 == 0 {
        return Err(LineProblem::ZeroGuid);
    }
    let mut lid = |field| {
        let t = tokens.next().ok_or(LineProblem::Missing(field))?;
        let v = parse_number(t).ok_or_else(|| bad(field, t))?;
        if v >= u64::from(Lid::MULTICAST_MIN.0) {
            return Err(LineProblem::NotUnicast { field, value: v });
        }
        Ok(Lid(v as u16))
    };
    let lids = lid(Field::MinLid).and_then(|min| Ok((min, lid(Field::MaxLid)?))).and_then(|pair| {
        let rest: Vec<&[u8]> = tokens.collect();
        match rest.is_empty() {
            true => Ok(pair),
            false => Err(LineProblem::Trailing(excerpt(&rest.join(&b' ')))),
        }
    });
    Ok(Some(Record { guid, lids }))
}

fn bad(field: Field, text: &[u8]) -> LineProblem {
    LineProblem::BadNumber { field, text: excerpt(text) }
}

fn excerpt(bytes: &[u8]) -> String {
    let s = String::from_utf8_lossy(bytes);
    match s.char_indices().nth(40) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.into_owned(),
    }
}

/// An unsigned number the way OpenSM reads one (`strtoul(s, NULL, 0)`):
/// `0x` hex, leading-`0` octal, else decimal. Unlike `strtoul` the whole
/// token must be digits, so `0x0005zz` is refused instead of read as 5.
fn parse_number(t: &[u8]) -> Option<u64> {
    let s = std::str::from_utf8(t).ok()?;
    let (digits, radix) = if let Some(h) = s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        (h, 16)
    } else if s.len() > 1 && s.starts_with('0') {
        (&s[1..], 8)
    } else {
        (s, 10)
    };
    // from_str_radix accepts a leading '+'; strtoul would too, but a sign
    // in this file means corruption.
    if digits.is_empty() || !digits.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    u64::from_str_radix(digits, radix).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> (Guid2Lid, Vec<LineProblem>) {
        let (m, w) = Guid2Lid::parse(text.as_bytes(), Path::new("g2l"));
        (m, w.into_iter().map(|w| w.problem).collect())
    }

    #[test]
    fn numbers_like_strtoul_but_whole_token() {
        assert_eq!(parse_number(b"0x0010"), Some(16));
        assert_eq!(parse_number(b"0X1f"), Some(31));
        assert_eq!(parse_number(b"010"), Some(8));
        assert_eq!(parse_number(b"0"), Some(0));
        assert_eq!(parse_number(b"12"), Some(12));
        assert_eq!(parse_number(b"0x"), None);
        assert_eq!(parse_number(b"0x5zz"), None);
        assert_eq!(parse_number(b"09"), None);
        assert_eq!(parse_number(b"+5"), None);
        assert_eq!(parse_number(b"-1"), None);
        assert_eq!(parse_number(b"0x10000000000000000"), None);
        assert_eq!(parse_number(b"\xff\xfe"), None);
    }

    #[test]
    fn overlap_query_walks_only_neighbours() {
        let mut m = Guid2Lid::new();
        m.insert(Guid(1), LidRange::new(Lid(4), 2).unwrap()).unwrap();
        m.insert(Guid(2), LidRange::single(Lid(9)).unwrap()).unwrap();
        m.insert(Guid(3), LidRange::single(Lid(12)).unwrap()).unwrap();
        let hits: Vec<Guid> = m.overlapping(LidRange::new(Lid(8), 3).unwrap()).map(|(g, _)| g).collect();
        assert_eq!(hits, vec![Guid(3), Guid(2)]);
        assert_eq!(m.holder_of(Lid(6)).map(|(g, _)| g), Some(Guid(1)));
        assert_eq!(m.holder_of(Lid(8)), None);
        let err = m.insert(Guid(4), LidRange::single(Lid(5)).unwrap()).unwrap_err();
        assert_eq!(err.holder, Guid(1));
        // A GUID may move within its own old range.
        assert_eq!(m.insert(Guid(1), LidRange::single(Lid(5)).unwrap()), Ok(LidRange::new(Lid(4), 2).ok()));
        assert_eq!(m.holder_of(Lid(4)), None);
        assert_eq!(m.len(), 3);
    }

    #[test]
    fn first_record_claims_the_key_even_when_bad() {
        let (m, p) = parse("0x0000000000000001 0x0000 0x0000\n\n0x0000000000000001 0x0005 0x0005\n\n");
        assert!(m.is_empty());
        assert_eq!(
            p,
            vec![LineProblem::BadRange(RangeError::Zero), LineProblem::Duplicate { guid: Guid(1), first_line: 1 }]
        );
    }

    #[test]
    fn indented_and_trailing_text() {
        let (m, p) = parse("0x01 0x0001 0x0001 junk\n   0x02 0x0002 0x0002\n0x03 3 3\n");
        assert_eq!(m.iter().collect::<Vec<_>>(), vec![(Guid(3), LidRange::single(Lid(3)).unwrap())]);
        assert_eq!(p, vec![LineProblem::Trailing("junk".into()), LineProblem::Indented("0x02 0x0002 0x0002".into())]);
    }
}
