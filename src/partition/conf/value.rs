//! The values flags and members take: C numbers, rates, MTUs,
//! memberships, and flag names.

use super::error::{excerpt, Problem};
use crate::partition::Membership;

#[derive(Debug)]
pub(super) enum NumError {
    NotNumber,
    TooLarge,
}

/// C's `strtoul(s, &end, 0)` with `*end == 0` required: 0x hex, leading 0
/// octal, else decimal.
pub(super) fn c_number(s: &str) -> Result<u64, NumError> {
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

pub(super) fn number_upto(flag: &'static str, value: &str, min: u64, max: u64) -> Result<u64, Problem> {
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
pub(super) fn parse_rate(value: &str) -> Result<(u8, Option<String>), Problem> {
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
pub(super) fn parse_mtu(value: &str) -> Result<u8, Problem> {
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

pub(super) fn parse_membership(value: &str) -> Option<Membership> {
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
pub(super) enum Flag {
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
    pub(super) fn name(self) -> &'static str {
        match self {
            Flag::Indx0 => "indx0",
            f => FLAGS.iter().find(|e| e.1 == f).map_or("?", |e| e.2),
        }
    }
    pub(super) fn is_group_flag(self) -> bool {
        !matches!(self, Flag::Ipoib | Flag::DefMember | Flag::Indx0)
    }
}

pub(super) fn resolve_flag(given: &str) -> Result<Flag, Problem> {
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
