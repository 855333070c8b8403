// Shared by the fuzz targets: parse `data` as every SMP attribute and check
// that whatever parses survives emit -> parse unchanged.

use ibsm::mad::*;

fn reparse<A: SmpAttribute + PartialEq + std::fmt::Debug>(data: &[u8]) {
    if let Ok(a) = A::parse_data(data) {
        let again = A::parse_data(&a.to_data()).expect("emitted bytes parse");
        assert_eq!(again, a, "{:?}: emit -> parse changed the value", A::ATTRIBUTE_ID);
    }
}

pub fn all_attributes(data: &[u8]) {
    reparse::<NodeInfoRepr>(data);
    reparse::<NodeDescriptionRepr>(data);
    reparse::<PortInfoRepr>(data);
    reparse::<SwitchInfoRepr>(data);
    reparse::<LftBlockRepr>(data);
    reparse::<PKeyTableBlockRepr>(data);
    reparse::<SmInfoRepr>(data);
    reparse::<GuidInfoBlockRepr>(data);
    reparse::<SlToVlTableRepr>(data);
    reparse::<VlArbTableRepr>(data);
    reparse::<MftBlockRepr>(data);
    reparse::<NoticeRepr>(data);
    if let Ok(n) = NoticeRepr::parse_bytes(data) {
        // The typed trap details must re-encode to what they were read from.
        let d = n.trap_details();
        if let Some(num) = d.trap_number() {
            assert_eq!(notice::TrapDetails::parse(num, &d.to_data_details()), d);
        }
        if data.len() >= notice::NOTICE_FULL_LEN {
            assert_eq!(&n.to_full_bytes()[..], &data[..notice::NOTICE_FULL_LEN]);
        }
    }
}
