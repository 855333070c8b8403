//! Notice (IBA 13.4.8.2 for the layout, 14.2.5.1 as an SM attribute): the
//! body of a Trap(Notice) sent to the SM, and of the Report(Notice) the SA
//! forwards to subscribers.
//!
//! ```text
//!  0: IsGeneric(1) Type(7) | ProducerType or VendorID (24)
//!  4: TrapNumber or DeviceID (16) | IssuerLID (16)
//!  8: NoticeToggle(1) NoticeCount(15) | DataDetails (54 bytes, 10..64)
//! 64: IssuerGID (128)        (only in the 80-byte SA form; an SMP's
//!                             64-byte data area ends before it)
//! ```
//!
//! A generic notice (IsGeneric = 1) carries a ProducerType and a TrapNumber;
//! a vendor notice carries a VendorID and a DeviceID in the same bits. The
//! meaning of DataDetails depends on the trap number; [`TrapDetails`] types
//! the ones an SM acts on (IBA 14.2.5.1).

use super::codes::open_enum;
use super::{attribute_view, be, AttributeId, Method, WireResult};
use crate::types::Lid;

mod field {
    use crate::mad::Bits;
    use std::ops::Range;
    pub const IS_GENERIC: Bits = Bits::new(0, 7, 1);
    pub const NOTICE_TYPE: Bits = Bits::new(0, 0, 7);
    pub const PRODUCER_TYPE: usize = 1;
    pub const TRAP_NUMBER: usize = 4;
    pub const ISSUER_LID: usize = 6;
    pub const TOGGLE_COUNT: usize = 8;
    pub const DATA_DETAILS: Range<usize> = 10..64;
    pub const ISSUER_GID: Range<usize> = 64..80;
    pub const LEN: usize = 64;
    pub const FULL_LEN: usize = 80;
}

/// Bytes of DataDetails.
pub const DATA_DETAILS_LEN: usize = 54;
/// The Notice length with IssuerGID (SA form).
pub const NOTICE_FULL_LEN: usize = field::FULL_LEN;

const TOGGLE_BIT: u16 = 0x8000;

open_enum! {
    /// Notice.Type (IBA 13.4.8.2).
    NoticeType: u8 {
        Fatal = 0,
        Urgent = 1,
        Security = 2,
        SubnetManagement = 3,
        Informational = 4,
        /// No notice queued (the value a Get(Notice) returns then).
        Empty = 0x7f,
    }
}

/// Notice.ProducerType values of a generic notice (IBA 13.4.8.2).
pub mod producer_type {
    pub const CA: u32 = 1;
    pub const SWITCH: u32 = 2;
    pub const ROUTER: u32 = 3;
    pub const CLASS_MANAGER: u32 = 4;
}

/// Trap numbers of generic notices (IBA 14.2.5.1 and 15.2.5.1 for the SA's).
pub mod trap {
    pub const GID_IN_SERVICE: u16 = 64;
    pub const GID_OUT_OF_SERVICE: u16 = 65;
    pub const MCAST_GROUP_CREATED: u16 = 66;
    pub const MCAST_GROUP_DELETED: u16 = 67;
    /// A switch port changed link state.
    pub const LINK_STATE_CHANGED: u16 = 128;
    pub const LINK_INTEGRITY_THRESHOLD: u16 = 129;
    pub const BUFFER_OVERRUN_THRESHOLD: u16 = 130;
    pub const FLOW_CONTROL_WATCHDOG: u16 = 131;
    /// CapabilityMask, NodeDescription, link speed/width or SM priority changed.
    pub const LOCAL_CHANGES: u16 = 144;
    pub const SYSTEM_IMAGE_GUID_CHANGED: u16 = 145;
    pub const BAD_M_KEY: u16 = 256;
    pub const BAD_P_KEY: u16 = 257;
    pub const BAD_Q_KEY: u16 = 258;
    pub const BAD_SWITCH_P_KEY: u16 = 259;
}

/// Trap 144 ChangeFlags bits (what changed besides the capability mask).
pub mod change_flags {
    pub const NODE_DESCRIPTION: u16 = 1 << 0;
    pub const LINK_WIDTH_ENABLED: u16 = 1 << 1;
    pub const LINK_SPEED_ENABLED: u16 = 1 << 2;
    pub const SM_PRIORITY: u16 = 1 << 3;
    pub const HIERARCHY_INFO: u16 = 1 << 4;
    pub const CAPABILITY_MASK2: u16 = 1 << 5;
}

attribute_view! {
    /// A zero-copy view of a Notice: 64 bytes (SMP form) or 80 (with
    /// IssuerGID, SA form).
    Notice, NoticeRepr, "Notice", field::LEN, AttributeId::Notice
}

impl<T: AsRef<[u8]>> Notice<T> {
    /// Byte 0 bit 7.
    pub fn is_generic(&self) -> bool {
        field::IS_GENERIC.get_bool(self.buffer.as_ref())
    }
    /// Byte 0 bits 6-0.
    pub fn notice_type(&self) -> NoticeType {
        field::NOTICE_TYPE.get(self.buffer.as_ref()).into()
    }
    /// Bytes 1-3: ProducerType (generic) or VendorID (vendor), 24 bits.
    pub fn producer_type(&self) -> u32 {
        be::u24(self.buffer.as_ref(), field::PRODUCER_TYPE)
    }
    /// Bytes 4-5: TrapNumber (generic) or DeviceID (vendor).
    pub fn trap_number(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::TRAP_NUMBER)
    }
    /// Bytes 6-7: LID of the port that sent the trap.
    pub fn issuer_lid(&self) -> Lid {
        Lid(be::u16(self.buffer.as_ref(), field::ISSUER_LID))
    }
    /// Byte 8 bit 7: flips with each new notice (Get/Set(Notice) queues).
    pub fn notice_toggle(&self) -> bool {
        be::u16(self.buffer.as_ref(), field::TOGGLE_COUNT) & TOGGLE_BIT != 0
    }
    /// Bytes 8-9 bits 14-0: notices still queued.
    pub fn notice_count(&self) -> u16 {
        be::u16(self.buffer.as_ref(), field::TOGGLE_COUNT) & !TOGGLE_BIT
    }
    /// Bytes 10-63.
    pub fn data_details(&self) -> &[u8] {
        &self.buffer.as_ref()[field::DATA_DETAILS]
    }
    /// Bytes 64-79, present only in the 80-byte form.
    pub fn issuer_gid(&self) -> Option<&[u8]> {
        self.buffer.as_ref().get(field::ISSUER_GID)
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Notice<T> {
    pub fn set_is_generic(&mut self, v: bool) {
        field::IS_GENERIC.set_bool(self.buffer.as_mut(), v);
    }
    /// Keeps the low 7 bits of the code.
    pub fn set_notice_type(&mut self, v: NoticeType) {
        field::NOTICE_TYPE.set(self.buffer.as_mut(), v.into());
    }
    /// Keeps the low 24 bits.
    pub fn set_producer_type(&mut self, v: u32) {
        be::set_u24(self.buffer.as_mut(), field::PRODUCER_TYPE, v);
    }
    pub fn set_trap_number(&mut self, v: u16) {
        be::set_u16(self.buffer.as_mut(), field::TRAP_NUMBER, v);
    }
    pub fn set_issuer_lid(&mut self, v: Lid) {
        be::set_u16(self.buffer.as_mut(), field::ISSUER_LID, v.0);
    }
    pub fn set_notice_toggle(&mut self, v: bool) {
        let b = self.buffer.as_mut();
        let raw = be::u16(b, field::TOGGLE_COUNT) & !TOGGLE_BIT;
        be::set_u16(b, field::TOGGLE_COUNT, raw | if v { TOGGLE_BIT } else { 0 });
    }
    /// Keeps the low 15 bits.
    pub fn set_notice_count(&mut self, v: u16) {
        let b = self.buffer.as_mut();
        let raw = be::u16(b, field::TOGGLE_COUNT) & TOGGLE_BIT;
        be::set_u16(b, field::TOGGLE_COUNT, raw | (v & !TOGGLE_BIT));
    }
    pub fn data_details_mut(&mut self) -> &mut [u8] {
        &mut self.buffer.as_mut()[field::DATA_DETAILS]
    }
    /// Writes IssuerGID if the buffer has room for it (80 bytes).
    pub fn set_issuer_gid(&mut self, gid: &[u8; 16]) {
        if let Some(out) = self.buffer.as_mut().get_mut(field::ISSUER_GID) {
            out.copy_from_slice(gid);
        }
    }
}

/// The owned form of a Notice.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NoticeRepr {
    pub is_generic: bool,
    pub notice_type: NoticeType,
    /// ProducerType when generic, VendorID otherwise (24 bits).
    pub producer_type: u32,
    /// TrapNumber when generic, DeviceID otherwise.
    pub trap_number: u16,
    pub issuer_lid: Lid,
    pub notice_toggle: bool,
    /// 15 bits.
    pub notice_count: u16,
    pub data_details: [u8; DATA_DETAILS_LEN],
    /// All zero when parsed from a 64-byte (SMP) buffer. The 64-byte
    /// `to_bytes`/`SmpAttribute::to_data` forms cannot carry it; use
    /// `to_full_bytes` for the SA form.
    pub issuer_gid: [u8; 16],
}

impl NoticeRepr {
    /// A trap the SM itself raises about a GID (IBA 14.2.5.1, Table 237:
    /// 64/65 a port GID in or out of service, 66/67 a multicast group's
    /// MGID created or deleted): generic, informational, from the class
    /// manager, the GID in DataDetails bytes 6-21.
    pub fn gid_trap(trap_number: u16, gid: [u8; 16], issuer_lid: Lid, issuer_gid: [u8; 16]) -> Self {
        let mut data_details = [0u8; DATA_DETAILS_LEN];
        data_details[6..22].copy_from_slice(&gid);
        NoticeRepr {
            is_generic: true,
            notice_type: NoticeType::Informational,
            producer_type: producer_type::CLASS_MANAGER,
            trap_number,
            issuer_lid,
            notice_toggle: false,
            notice_count: 0,
            data_details,
            issuer_gid,
        }
    }

    pub fn parse<T: AsRef<[u8]>>(v: &Notice<T>) -> WireResult<Self> {
        let mut data_details = [0u8; DATA_DETAILS_LEN];
        data_details.copy_from_slice(v.data_details());
        let mut issuer_gid = [0u8; 16];
        if let Some(g) = v.issuer_gid() {
            issuer_gid.copy_from_slice(g);
        }
        Ok(NoticeRepr {
            is_generic: v.is_generic(),
            notice_type: v.notice_type(),
            producer_type: v.producer_type(),
            trap_number: v.trap_number(),
            issuer_lid: v.issuer_lid(),
            notice_toggle: v.notice_toggle(),
            notice_count: v.notice_count(),
            data_details,
            issuer_gid,
        })
    }

    /// 80: the full form. An SMP carries only the first 64 bytes, which
    /// `emit` handles by leaving IssuerGID out when the buffer is short.
    pub fn buffer_len(&self) -> usize {
        field::FULL_LEN
    }

    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, v: &mut Notice<T>) {
        v.set_is_generic(self.is_generic);
        v.set_notice_type(self.notice_type);
        v.set_producer_type(self.producer_type);
        v.set_trap_number(self.trap_number);
        v.set_issuer_lid(self.issuer_lid);
        v.set_notice_count(self.notice_count);
        v.set_notice_toggle(self.notice_toggle);
        v.data_details_mut().copy_from_slice(&self.data_details);
        v.set_issuer_gid(&self.issuer_gid);
    }

    /// Emits the 80-byte SA form.
    pub fn to_full_bytes(&self) -> [u8; NOTICE_FULL_LEN] {
        let mut buf = [0u8; NOTICE_FULL_LEN];
        self.emit(&mut Notice::new_checked(&mut buf[..]).expect("80 bytes hold a Notice"));
        buf
    }

    /// A generic trap notice from `issuer_lid` with typed details.
    pub fn generic_trap(
        notice_type: NoticeType,
        producer_type: u32,
        issuer_lid: Lid,
        details: &TrapDetails,
    ) -> Option<Self> {
        Some(NoticeRepr {
            is_generic: true,
            notice_type,
            producer_type,
            trap_number: details.trap_number()?,
            issuer_lid,
            notice_toggle: false,
            notice_count: 0,
            data_details: details.to_data_details(),
            issuer_gid: [0; 16],
        })
    }

    /// The typed details of a generic notice with a known trap number;
    /// `TrapDetails::Other` for anything else.
    pub fn trap_details(&self) -> TrapDetails {
        if self.is_generic {
            TrapDetails::parse(self.trap_number, &self.data_details)
        } else {
            TrapDetails::Other
        }
    }
}

/// DataDetails of the traps an SM acts on (IBA 14.2.5.1). Offsets are into
/// DataDetails (byte 10 of the Notice).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum TrapDetails {
    /// Trap 128: bytes 0-1 the LID of the switch whose port changed state.
    LinkStateChanged { switch_lid: Lid },
    /// Traps 129-131: bytes 2-3 the LID, byte 4 the port.
    PortError { trap: u16, lid: Lid, port: u8 },
    /// Trap 144: bytes 2-3 LID, byte 5 bit 0 OtherLocalChanges, bytes 6-9
    /// the new CapabilityMask, 10-11 ChangeFlags ([`change_flags`]), 12-13
    /// CapabilityMask2.
    LocalChanges { lid: Lid, other_local_changes: bool, capability_mask: u32, change_flags: u16, capability_mask2: u16 },
    /// Trap 256: bytes 2-3 LID, 4-5 DrSLID, 6 Method, 8-9 AttributeID, 10-13
    /// AttributeModifier, 14-21 the M_Key tried, byte 23 DrNotice(1)
    /// DrPathTruncated(1) DrHopCount(6), 24-53 the return path.
    BadMKey {
        lid: Lid,
        dr_slid: Lid,
        method: Method,
        attribute_id: AttributeId,
        attribute_modifier: u32,
        m_key: u64,
        dr_notice: bool,
        dr_path_truncated: bool,
        dr_hop_count: u8,
        dr_return_path: [u8; 30],
    },
    /// Any other trap; read `data_details` directly.
    Other,
}

impl TrapDetails {
    pub fn parse(trap_number: u16, d: &[u8; DATA_DETAILS_LEN]) -> Self {
        match trap_number {
            trap::LINK_STATE_CHANGED => TrapDetails::LinkStateChanged { switch_lid: Lid(be::u16(d, 0)) },
            trap::LINK_INTEGRITY_THRESHOLD..=trap::FLOW_CONTROL_WATCHDOG => {
                TrapDetails::PortError { trap: trap_number, lid: Lid(be::u16(d, 2)), port: d[4] }
            }
            trap::LOCAL_CHANGES => TrapDetails::LocalChanges {
                lid: Lid(be::u16(d, 2)),
                other_local_changes: d[5] & 1 != 0,
                capability_mask: be::u32(d, 6),
                change_flags: be::u16(d, 10),
                capability_mask2: be::u16(d, 12),
            },
            trap::BAD_M_KEY => {
                let mut dr_return_path = [0u8; 30];
                dr_return_path.copy_from_slice(&d[24..54]);
                TrapDetails::BadMKey {
                    lid: Lid(be::u16(d, 2)),
                    dr_slid: Lid(be::u16(d, 4)),
                    method: d[6].into(),
                    attribute_id: be::u16(d, 8).into(),
                    attribute_modifier: be::u32(d, 10),
                    m_key: be::u64(d, 14),
                    dr_notice: d[23] & 0x80 != 0,
                    dr_path_truncated: d[23] & 0x40 != 0,
                    dr_hop_count: d[23] & 0x3f,
                    dr_return_path,
                }
            }
            _ => TrapDetails::Other,
        }
    }

    /// The trap number these details belong to (None for `Other`).
    pub fn trap_number(&self) -> Option<u16> {
        match self {
            TrapDetails::LinkStateChanged { .. } => Some(trap::LINK_STATE_CHANGED),
            TrapDetails::PortError { trap, .. } => Some(*trap),
            TrapDetails::LocalChanges { .. } => Some(trap::LOCAL_CHANGES),
            TrapDetails::BadMKey { .. } => Some(trap::BAD_M_KEY),
            TrapDetails::Other => None,
        }
    }

    /// The DataDetails bytes (reserved bytes zero; all zero for `Other`).
    pub fn to_data_details(&self) -> [u8; DATA_DETAILS_LEN] {
        let mut d = [0u8; DATA_DETAILS_LEN];
        match *self {
            TrapDetails::LinkStateChanged { switch_lid } => be::set_u16(&mut d, 0, switch_lid.0),
            TrapDetails::PortError { lid, port, .. } => {
                be::set_u16(&mut d, 2, lid.0);
                d[4] = port;
            }
            TrapDetails::LocalChanges { lid, other_local_changes, capability_mask, change_flags, capability_mask2 } => {
                be::set_u16(&mut d, 2, lid.0);
                d[5] = other_local_changes as u8;
                be::set_u32(&mut d, 6, capability_mask);
                be::set_u16(&mut d, 10, change_flags);
                be::set_u16(&mut d, 12, capability_mask2);
            }
            TrapDetails::BadMKey {
                lid,
                dr_slid,
                method,
                attribute_id,
                attribute_modifier,
                m_key,
                dr_notice,
                dr_path_truncated,
                dr_hop_count,
                dr_return_path,
            } => {
                be::set_u16(&mut d, 2, lid.0);
                be::set_u16(&mut d, 4, dr_slid.0);
                d[6] = method.into();
                be::set_u16(&mut d, 8, attribute_id.into());
                be::set_u32(&mut d, 10, attribute_modifier);
                be::set_u64(&mut d, 14, m_key);
                d[23] = (dr_notice as u8) << 7 | (dr_path_truncated as u8) << 6 | (dr_hop_count & 0x3f);
                d[24..54].copy_from_slice(&dr_return_path);
            }
            TrapDetails::Other => {}
        }
        d
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::WireError;
    use proptest::prelude::*;

    fn trap128() -> NoticeRepr {
        NoticeRepr::generic_trap(
            NoticeType::Urgent,
            producer_type::SWITCH,
            Lid(5),
            &TrapDetails::LinkStateChanged { switch_lid: Lid(5) },
        )
        .unwrap()
    }

    #[test]
    fn layout_of_trap_128() {
        let mut r = trap128();
        r.notice_toggle = true;
        r.notice_count = 0x1234;
        let b = r.to_bytes();
        assert_eq!(&b[0..10], &[0x81, 0, 0, 2, 0, 128, 0, 5, 0x92, 0x34]);
        assert_eq!(&b[10..12], &[0, 5]);
        assert_eq!(NoticeRepr::parse_bytes(&b).unwrap(), r);
        assert_eq!(r.trap_details(), TrapDetails::LinkStateChanged { switch_lid: Lid(5) });
    }

    #[test]
    fn issuer_gid_only_in_long_form() {
        let mut r = trap128();
        r.issuer_gid = [0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0, 2, 0xc9, 3, 0, 0, 0, 1];
        let full = r.to_full_bytes();
        assert_eq!(&full[64..80], &r.issuer_gid);
        assert_eq!(NoticeRepr::parse_bytes(&full).unwrap(), r);
        let short = NoticeRepr::parse_bytes(&r.to_bytes()).unwrap();
        assert_eq!(short.issuer_gid, [0; 16]);
        assert_eq!(
            NoticeRepr::parse_bytes(&full[..63]),
            Err(WireError::Truncated { what: "Notice", len: 63, need: 64 })
        );
    }

    #[test]
    fn trap_144_and_256_offsets() {
        let d = TrapDetails::LocalChanges {
            lid: Lid(0x1234),
            other_local_changes: true,
            capability_mask: 0x0251_084a,
            change_flags: change_flags::NODE_DESCRIPTION | change_flags::SM_PRIORITY,
            capability_mask2: 0x0010,
        };
        let dd = d.to_data_details();
        assert_eq!(&dd[0..14], &[0, 0, 0x12, 0x34, 0, 1, 0x02, 0x51, 0x08, 0x4a, 0, 9, 0, 0x10]);
        assert_eq!(TrapDetails::parse(144, &dd), d);

        let m = TrapDetails::BadMKey {
            lid: Lid(7),
            dr_slid: Lid(0xffff),
            method: Method::Set,
            attribute_id: AttributeId::PortInfo,
            attribute_modifier: 3,
            m_key: 0x0102_0304_0506_0708,
            dr_notice: true,
            dr_path_truncated: false,
            dr_hop_count: 2,
            dr_return_path: [9; 30],
        };
        let dd = m.to_data_details();
        assert_eq!(&dd[2..14], &[0, 7, 0xff, 0xff, 2, 0, 0, 0x15, 0, 0, 0, 3]);
        assert_eq!(&dd[14..24], &[1, 2, 3, 4, 5, 6, 7, 8, 0, 0x82]);
        assert_eq!(TrapDetails::parse(256, &dd), m);

        let p = TrapDetails::PortError { trap: 130, lid: Lid(9), port: 4 };
        assert_eq!(TrapDetails::parse(130, &p.to_data_details()), p);
        assert_eq!(TrapDetails::parse(999, &dd), TrapDetails::Other);
    }

    #[test]
    fn vendor_notice_has_no_trap_details() {
        let mut r = trap128();
        r.is_generic = false;
        assert_eq!(r.trap_details(), TrapDetails::Other);
    }

    proptest! {
        #[test]
        fn round_trip(a in proptest::array::uniform32(any::<u8>()), c in proptest::array::uniform32(any::<u8>()),
                      g in proptest::array::uniform16(any::<u8>())) {
            let mut b = [0u8; 80];
            b[..32].copy_from_slice(&a);
            b[32..64].copy_from_slice(&c);
            b[64..].copy_from_slice(&g);
            let r = NoticeRepr::parse_bytes(&b).unwrap();
            prop_assert_eq!(r.to_full_bytes(), b);
            let d = r.trap_details();
            if d != TrapDetails::Other {
                prop_assert_eq!(TrapDetails::parse(r.trap_number, &d.to_data_details()), d);
            }
        }
    }
}
