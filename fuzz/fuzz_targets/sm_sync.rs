#![no_main]
//! The SM state stream's MAD on arbitrary bytes: parsing never panics, and
//! a parsed message emits and re-parses to itself; so do the records of
//! the tables the SM itself publishes (guid2lid, MFT digests, multicast
//! trees), read from the same bytes.

use ibsm::mad::sm_sync::{LidMapRecord, McastTreeRecord, MftDigestRecord, SyncMadRepr};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = SyncMadRepr::parse(data) {
        let mad = m.emit().expect("a parsed message emits");
        assert_eq!(SyncMadRepr::parse(&mad).expect("emitted message parses"), m);
    }
    if let Ok(l) = LidMapRecord::parse(data) {
        assert_eq!(l.to_bytes()[..], data[..]);
    }
    if let Ok(d) = MftDigestRecord::parse(data) {
        assert_eq!(d.to_bytes()[..], data[..]);
    }
    if let Ok(t) = McastTreeRecord::parse(data) {
        assert_eq!(t.to_bytes()[..], data[..]);
    }
});
