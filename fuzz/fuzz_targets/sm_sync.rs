#![no_main]
//! The SM state stream's MAD on arbitrary bytes: parsing never panics, and
//! a parsed message emits and re-parses to itself.

use ibsm::mad::sm_sync::SyncMadRepr;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = SyncMadRepr::parse(data) {
        let mad = m.emit().expect("a parsed message emits");
        assert_eq!(SyncMadRepr::parse(&mad).expect("emitted message parses"), m);
    }
});
