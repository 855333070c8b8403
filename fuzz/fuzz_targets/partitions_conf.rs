//! The partitions.conf reader on arbitrary bytes: an error with a position
//! inside the text, never a panic; anything it accepts holds only valid
//! partitions and multicast MGIDs.
#![no_main]

use std::path::Path;

use ibsm::partition::conf::PartitionConf;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    match PartitionConf::parse_bytes(data, Path::new("fuzz.conf")) {
        Ok(conf) => {
            assert_eq!(conf.partitions[0].pkey, 0x7fff, "the default partition comes first");
            for p in &conf.partitions {
                assert!(p.pkey != 0 && p.pkey <= 0x7fff);
                for g in &p.groups {
                    assert_eq!(g.mgid[0], 0xff, "groups are multicast");
                    assert_eq!(g.mgid[1] & 0x0f, g.params.scope);
                }
            }
        }
        Err(e) => {
            let at = e.at().expect("parse errors have a position");
            assert!(at.line >= 1 && at.col >= 1);
            let lines = data.split(|&b| b == b'\n').count() as u32;
            assert!(at.line <= lines, "{e}");
        }
    }
});
