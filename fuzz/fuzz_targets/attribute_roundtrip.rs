// Shared by the fuzz targets: parse `data` as every SMP attribute and check
// that whatever parses survives emit -> parse unchanged.

use ibsm::mad::*;

fn reparse<A: SmpAttribute + PartialEq + std::fmt::Debug>(data: &[u8]) {
    if let Ok(a) = A::parse_data(data) {
        let again = A::parse_data(&a.to_data()).expect("emitted bytes parse");
        assert_eq!(
            again,
            a,
            "{:?}: emit -> parse changed the value",
            A::ATTRIBUTE_ID
        );
    }
}

pub fn all_attributes(input: &[u8]) {
    // The SMP data area is 64 bytes, so that is all `to_data` can give back
    // (a Notice's IssuerGID lives past it; its 80-byte form is checked below).
    let data = &input[..input.len().min(SMP_DATA_LEN)];
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
    if let Ok(n) = NoticeRepr::parse_bytes(input) {
        // The typed trap details must re-encode to what they were read from.
        let d = n.trap_details();
        if let Some(num) = d.trap_number() {
            assert_eq!(notice::TrapDetails::parse(num, &d.to_data_details()), d);
        }
        if input.len() >= notice::NOTICE_FULL_LEN {
            assert_eq!(&n.to_full_bytes()[..], &input[..notice::NOTICE_FULL_LEN]);
        }
        assert_eq!(
            NoticeRepr::parse_bytes(&n.to_full_bytes()).expect("80 bytes parse"),
            n
        );
    }
    // The SA's PathRecord: every bit pattern is a record, and emitting it
    // gives back the same bytes except the reserved ones.
    if let Ok(p) = PathRecordRepr::parse_bytes(input) {
        let mut out = [0u8; sa::PATH_RECORD_LEN];
        p.emit(&mut out).expect("64 bytes hold a PathRecord");
        assert_eq!(PathRecordRepr::parse_bytes(&out).expect("emitted bytes parse"), p);
    }
    if let Ok(m) = SaMad::new_checked(input) {
        let _ = (m.sm_key(), m.component_mask(), m.attribute_offset(), m.data().len());
    }
}
