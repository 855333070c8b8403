#![no_main]
//! Every SA record on arbitrary bytes: parsing never panics; a record that
//! parses emits exactly LEN bytes that parse back to it, and emitting is
//! idempotent; the component matcher never panics on any mask, query or
//! record, and a record always matches itself under a valid mask.
//!
//! To cover a new record, add one `check::<...>` line to `all_records`.

use ibsm::mad::sa::*;
use ibsm::mad::ClassPortInfoRepr;
use libfuzzer_sys::fuzz_target;

fn check<R: SaRecord + PartialEq + std::fmt::Debug>(mask: u64, data: &[u8]) {
    let Ok(r) = R::parse_bytes(data) else {
        assert!(data.len() < R::LEN, "{:?}: {} bytes refused", R::ATTRIBUTE, data.len());
        return;
    };
    let bytes = r.to_bytes();
    assert_eq!(bytes.len(), R::LEN);
    let again = R::parse_bytes(&bytes).expect("emitted bytes parse");
    assert_eq!(again, r, "{:?}: emit -> parse changed the record", R::ATTRIBUTE);
    assert_eq!(again.to_bytes(), bytes, "{:?}: emit is not idempotent", R::ATTRIBUTE);
    let valid = mask & !unknown_components(R::COMPONENTS, mask);
    assert!(components_match(R::COMPONENTS, valid, &bytes, &bytes));
    let _ = components_match(R::COMPONENTS, mask, data, &bytes);
    let _ = components_match(R::COMPONENTS, mask, &bytes, &data[..data.len().min(R::LEN / 2)]);
}

fn all_records(mask: u64, data: &[u8]) {
    check::<ClassPortInfoRepr>(mask, data);
    check::<NodeRecordRepr>(mask, data);
    check::<PortInfoRecordRepr>(mask, data);
    check::<SwitchInfoRecordRepr>(mask, data);
    check::<LinkRecordRepr>(mask, data);
    check::<GuidInfoRecordRepr>(mask, data);
    check::<PKeyTableRecordRepr>(mask, data);
    check::<SmInfoRecordRepr>(mask, data);
    check::<LftRecordRepr>(mask, data);
    check::<MftRecordRepr>(mask, data);
    check::<SlToVlRecordRepr>(mask, data);
    check::<VlArbRecordRepr>(mask, data);
    check::<ServiceRecordRepr>(mask, data);
    check::<InformInfoRepr>(mask, data);
    check::<InformInfoRecordRepr>(mask, data);
    check::<McMemberRecordRepr>(mask, data);
    multi_path(mask, data);
}

/// MultiPathRecord's length follows its counts (`LEN` is one SA data
/// area; a reassembled request holds more), so it is refused exactly when
/// the buffer lacks the GIDs the counts announce; what parses comes back
/// unchanged.
fn multi_path(mask: u64, data: &[u8]) {
    let announced = data.get(15..17).map_or(0, |c| usize::from(c[0]) + usize::from(c[1]));
    let fits = data.len() >= 24 + 16 * announced;
    let Ok(r) = MultiPathRecordRepr::parse_bytes(data) else {
        assert!(!fits, "MultiPathRecord: {} bytes, {announced} GIDs refused", data.len());
        return;
    };
    assert!(fits && r.check().is_ok());
    let bytes = r.to_bytes();
    assert_eq!(MultiPathRecordRepr::parse_bytes(&bytes).expect("emitted bytes parse"), r);
    let c = MultiPathRecordRepr::COMPONENTS;
    assert!(components_match(c, mask & !unknown_components(c, mask), &bytes, &bytes));
    let _ = components_match(c, mask, data, &bytes);
}

fuzz_target!(|input: &[u8]| {
    // The first 8 bytes are a component mask, the rest one record's bytes.
    let (mask, data) = match input.split_first_chunk::<8>() {
        Some((m, rest)) => (u64::from_be_bytes(*m), rest),
        None => (0, input),
    };
    all_records(mask, data);
});
