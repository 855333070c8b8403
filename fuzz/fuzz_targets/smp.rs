#![no_main]
//! Whole SMPs: SmpRepr::parse_bytes on arbitrary bytes, then every attribute
//! parser on the data area of any SMP that parses; a parsed SMP must emit
//! and re-parse to itself.

use ibsm::mad::SmpRepr;
use libfuzzer_sys::fuzz_target;

#[path = "attribute_roundtrip.rs"]
mod attribute_roundtrip;

fuzz_target!(|data: &[u8]| {
    if let Ok(smp) = SmpRepr::parse_bytes(data) {
        let again = SmpRepr::parse_bytes(&smp.to_bytes()).expect("an emitted SMP parses");
        assert_eq!(again, smp);
        attribute_roundtrip::all_attributes(&smp.data);
    }
});
