#![no_main]
//! Every SMP attribute Repr on arbitrary bytes: parsing never panics, and a
//! successful parse survives emit -> parse unchanged.

use libfuzzer_sys::fuzz_target;

#[path = "attribute_roundtrip.rs"]
mod attribute_roundtrip;

fuzz_target!(|data: &[u8]| {
    attribute_roundtrip::all_attributes(data);
});
