//! Property tests for the dump reader: it never panics, whatever the text,
//! and what the writer writes reads back to the same tables.

use ibsm_routing::dump::{write_opensm_dump, LftDump};
use ibsm_routing::testfab::{random_connected, RandomSpec};
use ibsm_routing::{analyze, minhop, AnalysisOptions};
use proptest::prelude::*;

const SAMPLE: &str = "\
Unicast lids [0-4] of switch Lid 4 guid 0x0000000000200002 ('L0'):
0x0001 003 # Switch portguid 0x0000000000200000: 'S0'
0x0002 001 # Channel Adapter portguid 0x0000000000100001: 'H0_0'
0x0004 000 # Switch portguid 0x0000000000200002: 'L0'
4 lids dumped
Unicast lids [0x0-0xe] of switch Lid 7 guid 0x0000000000200004 (spine0):
  Lid  Out   Destination
0x0001 001 : (Channel Adapter portguid 0x0000000000100001: 'leaf0-h0')
0x0008 002 : (path #1 out of 2: portguid 0x0000000000100005)
1 valid lids dumped
";

fn spec() -> impl Strategy<Value = (u64, RandomSpec)> {
    (any::<u64>(), 1usize..16, 0usize..20, 0usize..4, 0u8..=2).prop_map(
        |(seed, switches, extra_links, max_hosts_per_switch, max_lmc)| {
            (seed, RandomSpec { switches, extra_links, max_hosts_per_switch, max_lmc })
        },
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn arbitrary_text_never_panics(text in "\\PC{0,400}") {
        if let Ok(d) = LftDump::parse(&text, "p") {
            let _ = d.lid_claims("p");
        }
    }

    /// Lines of a real dump, shuffled, cut, duplicated and edited.
    #[test]
    fn mangled_dumps_never_panic(
        picks in proptest::collection::vec((0usize..12, any::<u8>(), 0usize..80), 0..20),
    ) {
        let lines: Vec<&str> = SAMPLE.lines().collect();
        let mut text = String::new();
        for (i, byte, at) in picks {
            let mut l = lines[i % lines.len()].to_string();
            if byte % 3 == 0 && at < l.len() && l.is_char_boundary(at) {
                l.insert(at, char::from(byte % 128));
            } else if byte % 3 == 1 && at < l.len() && l.is_char_boundary(at) {
                l.truncate(at);
            }
            text.push_str(&l);
            text.push('\n');
        }
        if let Ok(d) = LftDump::parse(&text, "m") {
            let _ = d.lid_claims("m");
        }
    }

    #[test]
    fn written_dumps_read_back_on_random_fabrics((seed, spec) in spec()) {
        let f = random_connected(seed, spec);
        let r = minhop(&f).unwrap();
        let text = write_opensm_dump(&f, &r);
        let d = LftDump::parse(&text, "w").unwrap();
        prop_assert_eq!(&d.to_routes(&f, "w").unwrap(), &r, "seed {}", seed);
        // The claims give back every LID plan entry.
        for c in d.lid_claims("w").unwrap() {
            for lid in c.lids {
                let owner = f.lid_owner(lid).unwrap();
                prop_assert_eq!(f.guid_of(owner), c.guid);
            }
        }
        let a = analyze(&f, &r, &AnalysisOptions { max_shifts: Some(16), ..Default::default() });
        prop_assert!(a.summary.valid, "seed {}: {}", seed, a);
    }
}
