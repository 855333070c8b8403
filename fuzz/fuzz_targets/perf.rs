#![no_main]
//! PerfMgt MADs and their counter attributes on arbitrary bytes: parsing
//! never panics, and whatever parses survives emit -> parse unchanged
//! (as a whole MAD, and as PortCounters / PortCountersExtended data).

use ibsm::mad::perf::{PerfMadRepr, PortCountersExtendedRepr, PortCountersRepr};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = PerfMadRepr::parse_bytes(data) {
        assert_eq!(PerfMadRepr::parse_bytes(&m.to_bytes()).expect("emitted MAD parses"), m);
    }
    if let Ok(c) = PortCountersRepr::parse_bytes(data) {
        assert_eq!(PortCountersRepr::parse_bytes(&c.to_data()).expect("emitted PortCounters parse"), c);
    }
    if let Ok(c) = PortCountersExtendedRepr::parse_bytes(data) {
        let back = PortCountersExtendedRepr::parse_bytes(&c.to_data()).expect("emitted extended counters parse");
        assert_eq!(back, c);
    }
});
