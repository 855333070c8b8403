//! Small text helpers both file formats share.

/// Parses `0x`-prefixed hex (or plain decimal) into a u64.
pub(super) fn parse_num(s: &str) -> Option<u64> {
    match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) if !h.is_empty() => u64::from_str_radix(h, 16).ok(),
        Some(_) => None,
        None => s.parse().ok(),
    }
}

pub(super) fn parse_lid(s: &str) -> Option<u16> {
    parse_num(s).and_then(|v| u16::try_from(v).ok())
}

pub(super) fn clip(s: &str) -> String {
    const MAX: usize = 60;
    match s.char_indices().nth(MAX) {
        Some((i, _)) => format!("{}...", &s[..i]),
        None => s.to_string(),
    }
}
