#![no_main]
//! The runtime's dispatcher on arbitrary received bytes: classification by
//! class and method, and the status answer built for any request, never
//! panic; an answer keeps the request's TID and address.

use ibsm::mad::MadHeader;
use ibsm::runtime::dispatch::{classify, status_reply, Inbound};
use ibsm::transport::{Datagram, MadAddress};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let d = Datagram { addr: MadAddress::smi_permissive(), mad: data.to_vec() };
    if let Inbound::Refused { reply, .. } = classify(&d) {
        assert_eq!(reply.addr, d.addr);
        let (a, b) = (MadHeader::new_checked(&reply.mad[..24]).unwrap(), MadHeader::new_checked(&data[..24]).unwrap());
        assert_eq!(a.transaction_id(), b.transaction_id());
    }
    let _ = status_reply(&d, 0x000c);
});
