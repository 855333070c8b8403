#![no_main]
//! The common MAD header on arbitrary bytes: the checked view and the Repr
//! never panic, and a parsed header emits and re-parses to itself.

use ibsm::mad::{MadHeader, MadHeaderRepr, MAD_HEADER_LEN};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(view) = MadHeader::new_checked(data) else {
        return;
    };
    // Every accessor on a checked view must be safe.
    let _ = (
        view.base_version(),
        view.mgmt_class(),
        view.class_version(),
        view.method(),
        view.status(),
        view.class_specific(),
        view.transaction_id(),
        view.attribute_id(),
        view.attribute_modifier(),
    );
    if let Ok(h) = MadHeaderRepr::parse(&view) {
        let mut buf = [0u8; MAD_HEADER_LEN];
        h.emit(&mut MadHeader::new_checked(&mut buf[..]).expect("24 bytes"));
        let again = MadHeaderRepr::parse(&MadHeader::new_checked(&buf[..]).unwrap())
            .expect("emitted header parses");
        assert_eq!(again, h);
    }
});
