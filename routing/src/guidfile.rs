//! GUID list files as OpenSM reads them: `root_guid_file` (updn, dnup,
//! ftree), `cn_guid_file` and `io_guid_file` (ftree, dfsssp).
//!
//! One GUID per line, `0x`-prefixed hexadecimal or decimal; leading blanks
//! are skipped; blank lines and lines starting with `#` are ignored; after
//! the GUID, a `#` comment or any text separated by a blank is ignored
//! (OpenSM passes that rest to node-name maps, which share the format).
//!
//! Two places where we are stricter than OpenSM's `parse_node_map`, both to
//! turn silent surprises into errors that name the line:
//! - a number with a leading zero and no `0x` (`0123`) is refused: C's
//!   `strtoull(.., 0)` reads it as octal, which nobody writing a GUID means;
//! - GUID 0 is refused: no port or node has it (IBA 4.1.1).
//!
//! A GUID listed twice is kept once (the first line): harmless, and OpenSM
//! files in the wild have them.
//!
//! Whether the GUIDs exist is a separate check, [`check_known`], since the
//! file is usually read before the fabric is swept.

use std::collections::HashSet;

use crate::error::RoutingError;
use crate::fabric::RoutingFabric;

/// One GUID and the 1-based line it was read from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct GuidEntry {
    pub line: usize,
    pub guid: u64,
}

/// What the GUIDs of a list must name.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuidKind {
    /// Switch (node) GUIDs: `root_guid_file`.
    Switch,
    /// End ports, by port GUID or by the node GUID of their CA or router:
    /// `cn_guid_file`, `io_guid_file`.
    EndPort,
}

fn input_error(file: &str, line: usize, problem: String) -> RoutingError {
    RoutingError::Input { file: file.to_string(), line, problem }
}

/// Parses a GUID list; `file` names it in errors. Entries keep their line
/// numbers for later checks ([`check_known`]).
pub fn parse_guid_entries(text: &str, file: &str) -> Result<Vec<GuidEntry>, RoutingError> {
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    for (i, raw) in text.lines().enumerate() {
        let line = i + 1;
        let s = raw.trim_start();
        if s.is_empty() || s.starts_with('#') {
            continue;
        }
        // The GUID token ends at a blank or a comment.
        let end = s.find(|c: char| c.is_whitespace() || c == '#').unwrap_or(s.len());
        let token = &s[..end];
        let guid = parse_guid(token).map_err(|p| input_error(file, line, p))?;
        if seen.insert(guid) {
            out.push(GuidEntry { line, guid });
        }
    }
    Ok(out)
}

/// Parses a GUID list into GUIDs, in file order, each once.
pub fn parse_guid_file(text: &str, file: &str) -> Result<Vec<u64>, RoutingError> {
    Ok(parse_guid_entries(text, file)?.into_iter().map(|e| e.guid).collect())
}

fn parse_guid(token: &str) -> Result<u64, String> {
    let value = if let Some(hex) = token.strip_prefix("0x").or_else(|| token.strip_prefix("0X")) {
        if hex.is_empty() || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(format!("`{token}` is not a hexadecimal GUID"));
        }
        if hex.trim_start_matches('0').len() > 16 {
            return Err(format!("`{token}` does not fit in 64 bits"));
        }
        u64::from_str_radix(hex, 16).map_err(|e| format!("`{token}`: {e}"))?
    } else {
        if !token.bytes().all(|b| b.is_ascii_digit()) {
            return Err(format!("`{token}` is not a GUID (expected 0x-prefixed hexadecimal or decimal)"));
        }
        if token.len() > 1 && token.starts_with('0') {
            return Err(format!(
                "`{token}` has a leading zero: OpenSM would read it as octal; write 0x... for hexadecimal"
            ));
        }
        token.parse::<u64>().map_err(|_| format!("`{token}` does not fit in 64 bits"))?
    };
    if value == 0 {
        return Err("GUID 0 names no node or port".to_string());
    }
    Ok(value)
}

/// Checks that every entry names something in `fabric` of the right kind;
/// the first that does not gives an error naming its line and GUID.
pub fn check_known(
    entries: &[GuidEntry],
    fabric: &RoutingFabric,
    file: &str,
    kind: GuidKind,
) -> Result<(), RoutingError> {
    let switches: HashSet<u64> = fabric.switches().iter().map(|s| s.guid).collect();
    let ports: HashSet<u64> = fabric.end_ports().iter().map(|e| e.port_guid).collect();
    let nodes: HashSet<u64> = fabric.end_ports().iter().map(|e| e.node_guid).collect();
    for e in entries {
        let g = e.guid;
        let problem = match kind {
            GuidKind::Switch if switches.contains(&g) => continue,
            GuidKind::Switch if ports.contains(&g) || nodes.contains(&g) => {
                format!("GUID {g:#018x} is an end port (CA or router), not a switch")
            }
            GuidKind::Switch => format!("GUID {g:#018x} is not a switch in the fabric"),
            GuidKind::EndPort if ports.contains(&g) || nodes.contains(&g) => continue,
            GuidKind::EndPort if switches.contains(&g) => {
                format!("GUID {g:#018x} is a switch, not an end port (CA or router)")
            }
            GuidKind::EndPort => format!("GUID {g:#018x} is not an end port or node in the fabric"),
        };
        return Err(input_error(file, e.line, problem));
    }
    Ok(())
}

/// Parses a GUID list and checks it against `fabric`: what an SM does with
/// `root_guid_file` once the fabric is known.
pub fn load_guid_file(
    text: &str,
    file: &str,
    fabric: &RoutingFabric,
    kind: GuidKind,
) -> Result<Vec<u64>, RoutingError> {
    let entries = parse_guid_entries(text, file)?;
    check_known(&entries, fabric, file, kind)?;
    Ok(entries.into_iter().map(|e| e.guid).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fabric::{EndPort, PortEnd, Switch};

    fn err_at(r: Result<Vec<u64>, RoutingError>) -> (String, usize, String) {
        match r {
            Err(RoutingError::Input { file, line, problem }) => (file, line, problem),
            other => panic!("expected an input error, got {other:?}"),
        }
    }

    #[test]
    fn parses_hex_decimal_comments_blanks_and_trailing_text() {
        let text =
            "# roots\n\n  0x0002c90300000001\n0X00000000000000FF # spine\n42\t spine-3 name\r\n   \n#0x5\n0x7#x\n";
        assert_eq!(parse_guid_file(text, "roots").unwrap(), vec![0x0002_c903_0000_0001, 0xff, 42, 7]);
        let e = parse_guid_entries(text, "roots").unwrap();
        assert_eq!(e.iter().map(|e| e.line).collect::<Vec<_>>(), vec![3, 4, 5, 8]);
        assert_eq!(parse_guid_file("", "f").unwrap(), Vec::<u64>::new());
        assert_eq!(parse_guid_file("0xffffffffffffffff\n0x00000000000000001\n", "f").unwrap(), vec![u64::MAX, 1]);
    }

    #[test]
    fn duplicates_are_kept_once_with_their_first_line() {
        let e = parse_guid_entries("0x10\n16\n0x11\n", "f").unwrap();
        assert_eq!(e, vec![GuidEntry { line: 1, guid: 16 }, GuidEntry { line: 3, guid: 17 }]);
    }

    #[test]
    fn malformed_lines_name_file_line_and_token() {
        let cases: [(&str, usize, &str); 9] = [
            ("0x1\n0xZZ\n", 2, "`0xZZ` is not a hexadecimal GUID"),
            ("0x\n", 1, "`0x` is not a hexadecimal GUID"),
            ("\n\nspine1\n", 3, "`spine1` is not a GUID"),
            ("0x1,0x2\n", 1, "`0x1,0x2` is not a hexadecimal GUID"),
            ("0x10000000000000000\n", 1, "does not fit in 64 bits"),
            ("18446744073709551616\n", 1, "does not fit in 64 bits"),
            ("0123\n", 1, "leading zero"),
            ("0x0\n", 1, "GUID 0"),
            ("-5\n", 1, "`-5` is not a GUID"),
        ];
        for (text, line, needle) in cases {
            let (file, l, problem) = err_at(parse_guid_file(text, "root_guids.conf"));
            assert_eq!(file, "root_guids.conf");
            assert_eq!(l, line, "{text:?}");
            assert!(problem.contains(needle), "{text:?}: {problem}");
        }
        let err = parse_guid_file("0x1\n0xq\n", "/etc/opensm/roots").unwrap_err();
        assert!(err.to_string().starts_with("/etc/opensm/roots:2: "), "{err}");
    }

    fn small_fabric() -> RoutingFabric {
        let mut b = RoutingFabric::builder();
        let s = b.add_switch(Switch::new(0xa0, 4, 1)).unwrap();
        let h = b.add_end_port(EndPort::new(0xb0, 0xb1, 1, 2)).unwrap();
        b.connect(PortEnd::End(h), PortEnd::Switch(s, 1)).unwrap();
        b.build().unwrap()
    }

    #[test]
    fn unknown_guids_are_named_with_their_line() {
        let f = small_fabric();
        assert_eq!(load_guid_file("0xa0\n", "roots", &f, GuidKind::Switch).unwrap(), vec![0xa0]);
        let (file, line, problem) = err_at(load_guid_file("0xa0\n# x\n0xdead\n", "roots", &f, GuidKind::Switch));
        assert_eq!((file.as_str(), line), ("roots", 3));
        assert!(problem.contains("0x000000000000dead") && problem.contains("not a switch"), "{problem}");
        let (_, line, problem) = err_at(load_guid_file("0xb1\n", "roots", &f, GuidKind::Switch));
        assert_eq!(line, 1);
        assert!(problem.contains("end port"), "{problem}");

        // Compute-node lists take port GUIDs or node GUIDs, not switches.
        assert_eq!(load_guid_file("0xb1\n0xb0\n", "cn", &f, GuidKind::EndPort).unwrap(), vec![0xb1, 0xb0]);
        let (_, line, problem) = err_at(load_guid_file("0xb1\n0xa0\n", "cn", &f, GuidKind::EndPort));
        assert_eq!(line, 2);
        assert!(problem.contains("is a switch"), "{problem}");
        let (_, line, problem) = err_at(load_guid_file("\n0x99\n", "io", &f, GuidKind::EndPort));
        assert_eq!(line, 2);
        assert!(problem.contains("0x0000000000000099"), "{problem}");
    }
}
