//! guid2lid file: OpenSM compatibility, corrupt input, atomic writes.

use std::path::{Path, PathBuf};

use ibsm::lid::{Field, Guid2Lid, Guid2LidWarning, LidRange, LineProblem, RangeError};
use ibsm::{Guid, Lid};
use proptest::prelude::*;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/guid2lid").join(name)
}

fn range(min: u16, max: u16) -> LidRange {
    LidRange::from_min_max(Lid(min), Lid(max)).unwrap()
}

fn entries(m: &Guid2Lid) -> Vec<(u64, u16, u16)> {
    m.iter().map(|(g, r)| (g.0, r.min().0, r.max().0)).collect()
}

fn parse(text: &str) -> (Guid2Lid, Vec<Guid2LidWarning>) {
    Guid2Lid::parse(text.as_bytes(), Path::new("/var/cache/opensm/guid2lid"))
}

fn problems(text: &str) -> Vec<(usize, LineProblem)> {
    parse(text).1.into_iter().map(|w| (w.line, w.problem)).collect()
}

/// Real OpenSM output quoted in reference/opensm.md §5.
#[test]
fn parses_the_reference_sample() {
    let text = "0x0000000000100003 0x0005 0x0005\n\n0x0000000000200000 0x0001 0x0001\n\n";
    let (m, w) = parse(text);
    assert!(w.is_empty(), "{w:?}");
    assert_eq!(entries(&m), vec![(0x100003, 5, 5), (0x200000, 1, 1)]);
    // Sorted by GUID, this sample is also exactly what we write.
    assert_eq!(m.to_text(), text);
}

/// `opensm -o` on ibsim, LMC 0 (fixtures/guid2lid/README.md).
#[test]
fn parses_opensm_file_exactly() {
    let (m, w) = Guid2Lid::read(&fixture("opensm-net.guid2lid")).unwrap();
    assert!(w.is_empty(), "{w:?}");
    assert_eq!(
        entries(&m),
        vec![
            (0x100001, 1, 1),
            (0x100002, 4, 4),
            (0x100004, 5, 5),
            (0x100005, 6, 6),
            (0x200000, 2, 2),
            (0x200001, 3, 3)
        ]
    );
}

/// Same fabric with `opensm -l 2`: CA ports hold 4 LIDs, switch port 0 one.
#[test]
fn parses_opensm_lmc2_file_exactly() {
    let (m, w) = Guid2Lid::read(&fixture("opensm-net-lmc2.guid2lid")).unwrap();
    assert!(w.is_empty(), "{w:?}");
    assert_eq!(
        entries(&m),
        vec![
            (0x100001, 4, 7),
            (0x100002, 12, 15),
            (0x100004, 16, 19),
            (0x100005, 20, 23),
            (0x200000, 8, 8),
            (0x200001, 9, 9)
        ]
    );
    assert_eq!(m.get(Guid(0x100004)).map(|r| r.lmc()), Some(2));
}

/// We write the same records OpenSM wrote, only in GUID order instead of
/// hash order.
#[test]
fn writes_opensm_records_in_guid_order() {
    for name in ["opensm-net.guid2lid", "opensm-net-lmc2.guid2lid"] {
        let original = std::fs::read_to_string(fixture(name)).unwrap();
        let (m, _) = Guid2Lid::read(&fixture(name)).unwrap();
        let ours = m.to_text();
        let records = |t: &str| {
            let mut v: Vec<String> = t.split("\n\n").filter(|s| !s.is_empty()).map(String::from).collect();
            v.sort();
            v
        };
        assert_eq!(records(&ours), records(&original));
        assert_eq!(ours.len(), original.len());
        let mut sorted = records(&original);
        sorted.sort_by_key(|r| u64::from_str_radix(&r[2..18], 16).unwrap());
        assert_eq!(ours, sorted.iter().map(|r| format!("{r}\n\n")).collect::<String>());
    }
}

#[test]
fn write_then_read_round_trips() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("guid2lid");
    let mut m = Guid2Lid::new();
    m.insert(Guid(0x0002_c903_00a1_b2c1), range(1, 1)).unwrap();
    m.insert(Guid(0x10), range(0x40, 0x7f)).unwrap();
    m.insert(Guid(u64::MAX), range(0xBF80, 0xBFFF)).unwrap();
    m.write(&path).unwrap();
    let (back, w) = Guid2Lid::read(&path).unwrap();
    assert!(w.is_empty());
    assert_eq!(back, m);
    assert_eq!(
        std::fs::read_to_string(&path).unwrap(),
        "0x0000000000000010 0x0040 0x007f\n\n0x0002c90300a1b2c1 0x0001 0x0001\n\n0xffffffffffffffff 0xbf80 0xbfff\n\n"
    );
    assert!(!dir.path().join("guid2lid.tmp").exists());

    // Overwrite with a smaller map; a stale .tmp from a crash is replaced.
    std::fs::write(dir.path().join("guid2lid.tmp"), "0x01 0x").unwrap();
    m.remove(Guid(0x10));
    m.write(&path).unwrap();
    assert_eq!(Guid2Lid::read(&path).unwrap().0, m);
    assert!(!dir.path().join("guid2lid.tmp").exists());

    // An empty map is an empty file, and reads back empty.
    Guid2Lid::new().write(&path).unwrap();
    assert_eq!(std::fs::read(&path).unwrap(), b"");
    assert!(Guid2Lid::read(&path).unwrap().0.is_empty());
}

#[test]
fn failed_write_leaves_the_old_file_intact() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("guid2lid");
    let old = "0x0000000000000001 0x0001 0x0001\n\n";
    std::fs::write(&path, old).unwrap();
    // The temporary file cannot be created: it is a directory.
    std::fs::create_dir(dir.path().join("guid2lid.tmp")).unwrap();
    let mut m = Guid2Lid::new();
    m.insert(Guid(2), range(2, 2)).unwrap();
    let err = m.write(&path).unwrap_err();
    assert!(err.to_string().contains("creating the temporary file"), "{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), old);

    // A missing directory is an error too, not a panic.
    assert!(m.write(&dir.path().join("no/such/dir/guid2lid")).is_err());
}

#[test]
fn unreadable_files_are_errors() {
    let dir = tempfile::tempdir().unwrap();
    let missing = Guid2Lid::read(&dir.path().join("nope")).unwrap_err();
    assert!(missing.is_not_found());
    assert!(missing.to_string().contains("nope"));
    let is_dir = Guid2Lid::read(dir.path()).unwrap_err();
    assert!(!is_dir.is_not_found());

    let big = dir.path().join("big");
    let f = std::fs::File::create(&big).unwrap();
    f.set_len(ibsm::lid::guid2lid::MAX_FILE_LEN + 1).unwrap(); // sparse
    let err = Guid2Lid::read(&big).unwrap_err();
    assert!(err.to_string().contains("larger than"), "{err}");
}

#[test]
fn bad_ranges_are_reported_and_skipped() {
    let text = "\
0x0000000000000001 0x0000 0x0000

0x0000000000000002 0x0008 0x0007

0x0000000000000003 0x0008 0x000a

0x0000000000000004 0xc000 0xc000

0x0000000000000005 0x0010 0xc001

0x0000000000000006 0x0005 0x0006

0x0000000000000007 0x0020 0x0020

0x0000000000000008 0x0100 0x01ff

0x0000000000000000 0x0030 0x0030
";
    let (m, w) = parse(text);
    assert_eq!(entries(&m), vec![(7, 0x20, 0x20)]);
    let got: Vec<(usize, LineProblem)> = w.iter().map(|w| (w.line, w.problem.clone())).collect();
    assert_eq!(
        got,
        vec![
            (1, LineProblem::BadRange(RangeError::Zero)),
            (3, LineProblem::BadRange(RangeError::Reversed { min: 8, max: 7 })),
            (5, LineProblem::BadRange(RangeError::NotPowerOfTwo { min: 8, max: 10 })),
            (7, LineProblem::NotUnicast { field: Field::MinLid, value: 0xC000 }),
            (9, LineProblem::NotUnicast { field: Field::MaxLid, value: 0xC001 }),
            (11, LineProblem::BadRange(RangeError::Unaligned { base: 5, len: 2 })),
            (15, LineProblem::BadRange(RangeError::TooWide { min: 0x100, max: 0x1ff })),
            (17, LineProblem::ZeroGuid),
        ]
    );
    // Log lines name the file, the line and the problem.
    assert_eq!(
        w[2].to_string(),
        "/var/cache/opensm/guid2lid:5: range 0x0008..0x000a holds 3 LIDs, not a power of two; line ignored"
    );
}

#[test]
fn duplicates_keep_the_first_and_overlaps_are_refused() {
    let text = "0x01 0x0004 0x0007\n\n0x02 0x0005 0x0005\n\n0x01 0x0010 0x0010\n\n0x03 0x0010 0x0010\n\n";
    assert_eq!(entries(&parse(text).0), vec![(1, 4, 7), (3, 16, 16)]);
    assert_eq!(
        problems(text),
        vec![
            (
                3,
                LineProblem::Overlap { range: range(5, 5), holder: Guid(1), holder_range: range(4, 7), holder_line: 1 }
            ),
            (5, LineProblem::Duplicate { guid: Guid(1), first_line: 1 }),
        ]
    );
}

#[test]
fn garbage_is_reported_line_by_line() {
    let text = b"hello world\n\0\0\0\n0x0000000000000001 0x0001 0x0001\n\xff\xfe garbage\n   indented\n0x5 0x0002\n0x6 0x0003 0x0003 0x0004\n0x7 zz 0x0001\n";
    let (m, w) = Guid2Lid::parse(text, Path::new("g"));
    assert_eq!(entries(&m), vec![(1, 1, 1)]);
    let got: Vec<(usize, LineProblem)> = w.into_iter().map(|w| (w.line, w.problem)).collect();
    assert_eq!(
        got,
        vec![
            (1, LineProblem::BadNumber { field: Field::PortGuid, text: "hello".into() }),
            (2, LineProblem::BadNumber { field: Field::PortGuid, text: "\0\0\0".into() }),
            (4, LineProblem::BadNumber { field: Field::PortGuid, text: "\u{fffd}\u{fffd}".into() }),
            (5, LineProblem::Indented("indented".into())),
            (6, LineProblem::Missing(Field::MaxLid)),
            (7, LineProblem::Trailing("0x0004".into())),
            (8, LineProblem::BadNumber { field: Field::MinLid, text: "zz".into() }),
        ]
    );
}

#[test]
fn hand_edited_files_are_accepted() {
    // No blank separators, decimal and octal numbers, CRLF, no final newline.
    let (m, w) = parse("0x10 5 5\r\n0x11 010 011\n\n\n0x12 0x0C 0x0c");
    assert!(w.is_empty(), "{w:?}");
    assert_eq!(entries(&m), vec![(0x10, 5, 5), (0x11, 8, 9), (0x12, 12, 12)]);
}

/// A crash while some other tool wrote the file (ours is atomic) can cut it
/// anywhere. Whatever survives must be read as the full file says or
/// skipped, never as some other LID.
#[test]
fn every_truncation_of_an_opensm_file_is_safe() {
    for name in ["opensm-net.guid2lid", "opensm-net-lmc2.guid2lid"] {
        let full = std::fs::read(fixture(name)).unwrap();
        let (whole, _) = Guid2Lid::parse(&full, Path::new(name));
        for cut in 0..=full.len() {
            let (m, w) = Guid2Lid::parse(&full[..cut], Path::new(name));
            for (g, r) in m.iter() {
                // A cut GUID can alias another GUID only if it still has both LIDs,
                // which requires the whole GUID token.
                assert_eq!(whole.get(g), Some(r), "cut at {cut}: {g} read as {r}");
            }
            let last_line = full[..cut].split(|&b| b == b'\n').count();
            assert!(w.iter().all(|w| w.line == last_line), "cut at {cut}: {w:?}");
        }
    }
}

fn arb_map() -> impl Strategy<Value = Guid2Lid> {
    prop::collection::vec((any::<u64>(), 1u16..0xC000, 0u8..=7), 0..60).prop_map(|v| {
        let mut m = Guid2Lid::new();
        for (g, lid, lmc) in v {
            let base = lid & !((1 << lmc) - 1);
            if let (true, Ok(r)) = (g != 0, LidRange::new(Lid(base), lmc)) {
                let _ = m.insert(Guid(g), r);
            }
        }
        m
    })
}

/// Lines made of plausible pieces, to reach deep into the parser.
fn arb_text() -> impl Strategy<Value = String> {
    let token = prop_oneof![
        Just("0x0000000000000001".to_string()),
        Just("0x0000000000000002".to_string()),
        "0x[0-9a-fA-F]{0,18}",
        "[0-9]{1,6}",
        "0x[0-9a-f]{4}",
        "[ \t\r]{0,2}",
        "\\PC{0,4}",
        Just(String::new()),
    ];
    prop::collection::vec(prop::collection::vec(token, 0..5).prop_map(|t| t.join(" ")), 0..30)
        .prop_map(|l| l.join("\n"))
}

fn check_invariants(m: &Guid2Lid) {
    let all: Vec<(Guid, LidRange)> = m.iter().collect();
    for (i, (g, r)) in all.iter().enumerate() {
        assert_ne!(g.0, 0);
        assert!(r.min().is_unicast() && r.max().is_unicast());
        assert_eq!(r.min().0 % r.len(), 0);
        for (h, s) in &all[i + 1..] {
            assert!(!r.overlaps(*s), "{g} {r} overlaps {h} {s}");
        }
    }
}

proptest! {
    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..2048)) {
        let (m, w) = Guid2Lid::parse(&bytes, Path::new("x"));
        check_invariants(&m);
        let lines = bytes.split(|&b| b == b'\n').count();
        prop_assert!(w.iter().all(|w| w.line >= 1 && w.line <= lines));
    }

    #[test]
    fn random_text_never_panics(text in arb_text()) {
        let (m, _) = parse(&text);
        check_invariants(&m);
        // What we parsed, we write back and read identically.
        let (again, w) = parse(&m.to_text());
        prop_assert!(w.is_empty());
        prop_assert_eq!(again, m);
    }

    #[test]
    fn maps_round_trip(m in arb_map()) {
        check_invariants(&m);
        let (back, w) = parse(&m.to_text());
        prop_assert!(w.is_empty());
        prop_assert_eq!(back, m);
    }
}
