//! SMInfo (IBA 14.2.5.13): an SM's
//! identity and state, exchanged between SMs for election and handover
//! (IBA 14.4.1).
//!
//! ```text
//!  0: GUID (64)
//!  8: SM_Key (64)
//! 16: ActCount (32)
//! 20: Priority(4) SMState(4)
//! ```
//!
//! A SubnGet(SMInfo) answers SM_Key only to a requester that presented the
//! right SM_Key; others read 0 there (IBA 14.4.1.1). On SubnSet the
//! AttributeModifier is the control verb, see [`SmControl`].

use super::codes::open_enum;
use super::{attribute_view, be, AttributeId, WireResult};
use crate::types::Guid;

mod field {
    use crate::mad::Bits;
    pub const GUID: usize = 0;
    pub const SM_KEY: usize = 8;
    pub const ACT_COUNT: usize = 16;
    pub const PRIORITY: Bits = Bits::new(20, 4, 4);
    pub const SM_STATE: Bits = Bits::new(20, 0, 4);
    pub const LEN: usize = 21;
}

open_enum! {
    /// SMInfo.SMState (IBA 14.4.1).
    SmState: u8 {
        NotActive = 0,
        Discovering = 1,
        Standby = 2,
        Master = 3,
    }
}

open_enum! {
    /// The AttributeModifier of SubnSet(SMInfo) (IBA 14.4.1):
    /// what the sending SM asks the receiving SM to do.
    SmControl: u32 {
        /// Master to standby: take over mastership.
        Handover = 1,
        /// New master to old: handover received.
        Acknowledge = 2,
        /// Go to NotActive.
        Disable = 3,
        /// Go to Standby.
        Standby = 4,
        /// Go to Discovering.
        Discover = 5,
    }
}

attribute_view! {
    /// A zero-copy view of an SMInfo attribute (21 bytes).
    SmInfo, SmInfoRepr, "SMInfo", field::LEN, AttributeId::SmInfo
}

impl<T: AsRef<[u8]>> SmInfo<T> {
    /// Bytes 0-7: the port GUID of the SM.
    pub fn guid(&self) -> Guid {
        Guid(be::u64(self.buffer.as_ref(), field::GUID))
    }
    /// Bytes 8-15: the SM_Key (0 unless the requester proved it knows it).
    pub fn sm_key(&self) -> u64 {
        be::u64(self.buffer.as_ref(), field::SM_KEY)
    }
    /// Bytes 16-19: a counter the master bumps as it works; standbys poll it
    /// to see the master is alive.
    pub fn act_count(&self) -> u32 {
        be::u32(self.buffer.as_ref(), field::ACT_COUNT)
    }
    /// Byte 20 bits 7-4: election priority (higher wins).
    pub fn priority(&self) -> u8 {
        field::PRIORITY.get(self.buffer.as_ref())
    }
    /// Byte 20 bits 3-0.
    pub fn sm_state(&self) -> SmState {
        field::SM_STATE.get(self.buffer.as_ref()).into()
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> SmInfo<T> {
    pub fn set_guid(&mut self, v: Guid) {
        be::set_u64(self.buffer.as_mut(), field::GUID, v.0);
    }
    pub fn set_sm_key(&mut self, v: u64) {
        be::set_u64(self.buffer.as_mut(), field::SM_KEY, v);
    }
    pub fn set_act_count(&mut self, v: u32) {
        be::set_u32(self.buffer.as_mut(), field::ACT_COUNT, v);
    }
    /// Keeps the low 4 bits.
    pub fn set_priority(&mut self, v: u8) {
        field::PRIORITY.set(self.buffer.as_mut(), v);
    }
    /// Keeps the low 4 bits of the code.
    pub fn set_sm_state(&mut self, v: SmState) {
        field::SM_STATE.set(self.buffer.as_mut(), v.into());
    }
}

/// The owned form of SMInfo.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SmInfoRepr {
    pub guid: Guid,
    pub sm_key: u64,
    pub act_count: u32,
    /// 4 bits.
    pub priority: u8,
    pub sm_state: SmState,
}

impl SmInfoRepr {
    pub fn parse<T: AsRef<[u8]>>(v: &SmInfo<T>) -> WireResult<Self> {
        Ok(SmInfoRepr {
            guid: v.guid(),
            sm_key: v.sm_key(),
            act_count: v.act_count(),
            priority: v.priority(),
            sm_state: v.sm_state(),
        })
    }

    pub fn buffer_len(&self) -> usize {
        field::LEN
    }

    pub fn emit<T: AsRef<[u8]> + AsMut<[u8]>>(&self, v: &mut SmInfo<T>) {
        v.set_guid(self.guid);
        v.set_sm_key(self.sm_key);
        v.set_act_count(self.act_count);
        v.set_priority(self.priority);
        v.set_sm_state(self.sm_state);
    }

    /// The election order of IBA 14.4.1.1: higher priority wins, then the
    /// lower GUID. True if `self` should be master over `other`.
    pub fn outranks(&self, other: &SmInfoRepr) -> bool {
        (self.priority, std::cmp::Reverse(self.guid)) > (other.priority, std::cmp::Reverse(other.guid))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::WireError;
    use proptest::prelude::*;

    #[test]
    fn layout() {
        let r = SmInfoRepr {
            guid: Guid(0x0002_c903_0000_0001),
            sm_key: 0x0102_0304_0506_0708,
            act_count: 0xdead_beef,
            priority: 14,
            sm_state: SmState::Master,
        };
        let b = r.to_bytes();
        assert_eq!(&b[0..8], &[0, 2, 0xc9, 3, 0, 0, 0, 1]);
        assert_eq!(&b[8..16], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(&b[16..21], &[0xde, 0xad, 0xbe, 0xef, 0xe3]);
        assert!(b[21..].iter().all(|&x| x == 0));
        assert_eq!(SmInfoRepr::parse_bytes(&b).unwrap(), r);
        assert_eq!(SmInfoRepr::parse_bytes(&b[..21]).unwrap(), r);
        assert_eq!(SmInfoRepr::parse_bytes(&b[..20]), Err(WireError::Truncated { what: "SMInfo", len: 20, need: 21 }));
    }

    #[test]
    fn unknown_state_and_controls() {
        let mut b = [0u8; 64];
        b[20] = 0x0c;
        assert_eq!(SmInfoRepr::parse_bytes(&b).unwrap().sm_state, SmState::Unknown(12));
        assert_eq!(SmControl::from(1), SmControl::Handover);
        assert_eq!(SmControl::from(5), SmControl::Discover);
        assert_eq!(u32::from(SmControl::Acknowledge), 2);
        assert_eq!(SmControl::from(0), SmControl::Unknown(0));
    }

    #[test]
    fn election_order() {
        let a = SmInfoRepr { guid: Guid(2), sm_key: 0, act_count: 0, priority: 5, sm_state: SmState::Standby };
        let b = SmInfoRepr { guid: Guid(1), ..a };
        let c = SmInfoRepr { priority: 6, guid: Guid(9), ..a };
        assert!(b.outranks(&a) && !a.outranks(&b));
        assert!(c.outranks(&b));
        assert!(!a.outranks(&a));
    }

    proptest! {
        #[test]
        fn round_trip(g: u64, k: u64, ac: u32, p in 0u8..16, s in 0u8..16) {
            let r = SmInfoRepr { guid: Guid(g), sm_key: k, act_count: ac, priority: p, sm_state: s.into() };
            prop_assert_eq!(SmInfoRepr::parse_bytes(&r.to_bytes()).unwrap(), r);
        }
    }
}
