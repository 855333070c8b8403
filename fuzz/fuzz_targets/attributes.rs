#![no_main]
//! Every SMP attribute Repr on arbitrary bytes: parsing never panics, and a
//! successful parse survives emit -> parse unchanged.

use libfuzzer_sys::fuzz_target;

#[path = "common.rs"]
mod common;

fuzz_target!(|data: &[u8]| {
    common::all_attributes(data);
});
