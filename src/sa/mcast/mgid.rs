//! Multicast GIDs (IBA 4.1.1): what a requested MGID may be, the ones the
//! SA makes up, and the IPoIB ones (RFC 4391 section 4) that must agree
//! with their partition's broadcast group.
//! ```text
//! byte  0    1          2-3         4-15
//!       0xff Flags|Scope Signature  (signature-specific)
//! IPv4 over IB: ff1s:401b:<P_Key>:0000:0000:0000:<low 28 bits of the IPv4 group>
//!   broadcast:  ff1s:401b:<P_Key>:0000:0000:0000:ffff:ffff
//! IPv6 over IB: ff1s:601b:<P_Key>:<low 80 bits of the IPv6 group>
//! SA-made here: ff1s:a01b:<subnet prefix (64)>:<32-bit counter>
//! ```

/// The IPv4-over-IB signature (RFC 4391).
pub const IPOIB_V4: u16 = 0x401B;
/// The IPv6-over-IB signature (RFC 4391).
pub const IPOIB_V6: u16 = 0x601B;
/// The signature of MGIDs the SA assigns (IBA 4.1.1: link-local scope
/// with it is the SA's alone).
pub const SA_ASSIGNED: u16 = 0xA01B;

/// Bytes 2-3.
pub fn signature(mgid: &[u8; 16]) -> u16 {
    u16::from_be_bytes([mgid[2], mgid[3]])
}

/// The Scope nibble of byte 1.
pub fn scope(mgid: &[u8; 16]) -> u8 {
    mgid[1] & 0x0F
}

/// An IPv4 or IPv6 over IB group (any of them, the broadcast one too).
pub fn is_ipoib(mgid: &[u8; 16]) -> bool {
    mgid[0] == 0xFF && matches!(signature(mgid), IPOIB_V4 | IPOIB_V6)
}

/// The IPv4 broadcast MGID of the partition whose P_Key (as written in
/// IPoIB MGIDs, the full bit set) is `pkey`, at `scope`.
pub fn ipoib_broadcast(scope: u8, pkey: u16) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[0] = 0xFF;
    g[1] = 0x10 | (scope & 0x0F);
    g[2..4].copy_from_slice(&IPOIB_V4.to_be_bytes());
    g[4..6].copy_from_slice(&pkey.to_be_bytes());
    g[12..16].copy_from_slice(&[0xFF; 4]);
    g
}

/// The broadcast group an IPoIB MGID belongs with: the IPv4 broadcast
/// MGID of the same scope and P_Key (IPv6 groups too: IPoIB takes its
/// parameters from the IPv4 broadcast group for both). None for other
/// MGIDs.
pub fn broadcast_of(mgid: &[u8; 16]) -> Option<[u8; 16]> {
    is_ipoib(mgid).then(|| ipoib_broadcast(scope(mgid), u16::from_be_bytes([mgid[4], mgid[5]])))
}

/// Whether `mgid` is an IPv6 Solicited-Node multicast group over IB
/// (RFC 4391 and RFC 4291 2.7.1): `ff1s:601b:<P_Key>:0000:0000:0001:ffXX:XXXX`,
/// XX:XXXX the low 24 bits of an interface address. Every IPv6 host
/// joins its own, so a fabric has about one per host. As OpenSM tests it:
/// bits 1-3 of byte 11 are not looked at.
pub fn is_ipv6_snm(mgid: &[u8; 16]) -> bool {
    mgid[0] == 0xFF
        && mgid[1] & 0x10 != 0
        && signature(mgid) == IPOIB_V6
        && mgid[6..11] == [0, 0, 0, 0, 0]
        && mgid[11] & 0xF1 == 0x01
        && mgid[12] == 0xFF
}

/// The part Solicited-Node MGIDs that share an MLID have in common
/// (`consolidate_ipv6_snm_req`): all but the low 24 bits, so one scope
/// and one P_Key.
pub fn snm_family(mgid: &[u8; 16]) -> [u8; 13] {
    mgid[..13].try_into().expect("13 bytes")
}

/// Whether `mgid` is an IPoIB broadcast group.
pub fn is_ipoib_broadcast(mgid: &[u8; 16]) -> bool {
    broadcast_of(mgid) == Some(*mgid)
}

/// Whether a requester may name `mgid` for a new group (IBA o15-0.1.5 as
/// OpenSM reads it): it starts with 0xFF; IPoIB MGIDs are then taken as
/// they are; others must leave the three reserved flag bits zero and may
/// not use the SA's signature with link-local scope.
pub fn requestable(mgid: &[u8; 16]) -> bool {
    if mgid[0] != 0xFF {
        return false;
    }
    if is_ipoib(mgid) {
        return true;
    }
    mgid[1] & 0xE0 == 0
        && !(signature(mgid) == SA_ASSIGNED && scope(mgid) == crate::mad::sa::mc_member_record::scope::LINK_LOCAL)
}

/// The MGID the SA makes for a join that asked for none: the SA
/// signature, the joining port's subnet prefix, then `counter`.
pub fn sa_assigned(scope: u8, prefix: u64, counter: u32) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[0] = 0xFF;
    g[1] = 0x10 | (scope & 0x0F);
    g[2..4].copy_from_slice(&SA_ASSIGNED.to_be_bytes());
    g[4..12].copy_from_slice(&prefix.to_be_bytes());
    g[12..16].copy_from_slice(&counter.to_be_bytes());
    g
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> [u8; 16] {
        let ip: std::net::Ipv6Addr = s.parse().unwrap();
        ip.octets()
    }

    #[test]
    fn ipoib_groups_find_their_broadcast_group() {
        let bcast = parse("ff12:401b:ffff::ffff:ffff");
        assert_eq!(ipoib_broadcast(2, 0xffff), bcast);
        assert!(is_ipoib_broadcast(&bcast));
        // IPv4 all-nodes (224.0.0.1), IPv6 all-nodes and a solicited-node group.
        for g in ["ff12:401b:ffff::1", "ff12:601b:ffff::1", "ff12:601b:ffff::1:ff12:3456"] {
            let g = parse(g);
            assert!(is_ipoib(&g) && !is_ipoib_broadcast(&g));
            assert_eq!(broadcast_of(&g), Some(bcast));
        }
        assert_eq!(broadcast_of(&parse("ff15:401b:8001::1")), Some(parse("ff15:401b:8001::ffff:ffff")));
        assert_eq!(broadcast_of(&parse("ff12:a01b::1")), None);
        assert!(!is_ipoib(&parse("fe80:401b::1")), "not multicast");
    }

    #[test]
    fn requested_mgids_follow_o15_0_1_5() {
        assert!(requestable(&parse("ff15:a01b::1")), "the SA signature, site-local");
        assert!(!requestable(&parse("ff12:a01b::1")), "link-local SA signature is the SA's");
        assert!(!requestable(&parse("ff32::1")), "a reserved flag bit");
        assert!(!requestable(&parse("fe80::1")));
        assert!(requestable(&parse("ff0e::1")));
        assert!(requestable(&parse("ff12:401b:ffff::1")));
        let made = sa_assigned(2, 0xfe80_0000_0000_0000, 7);
        assert_eq!(made, parse("ff12:a01b:fe80::7"));
        assert_eq!((signature(&made), scope(&made)), (SA_ASSIGNED, 2));
    }

    #[test]
    fn solicited_node_groups_are_told_apart() {
        for g in ["ff12:601b:ffff::1:ff12:3456", "ff15:601b:8001::1:ffab:cdef", "ff12:601b:ffff::3:ff00:1"] {
            assert!(is_ipv6_snm(&parse(g)), "{g}");
        }
        for g in [
            "ff12:601b:ffff::1",
            "ff12:401b:ffff::1:ff12:3456",
            "ff02:601b:ffff::1:ff12:3456",
            "ff12:601b:ffff::2:ff12:3456",
            "ff12:601b:ffff:1::1:ff12:3456",
            "ff12:601b:ffff::1:fe12:3456",
        ] {
            assert!(!is_ipv6_snm(&parse(g)), "{g}");
        }
        let (a, b) = (parse("ff12:601b:ffff::1:ff12:3456"), parse("ff12:601b:ffff::1:ff65:4321"));
        assert_eq!(snm_family(&a), snm_family(&b));
        assert_ne!(snm_family(&a), snm_family(&parse("ff12:601b:8001::1:ff12:3456")), "another partition");
        assert_ne!(snm_family(&a), snm_family(&parse("ff15:601b:ffff::1:ff12:3456")), "another scope");
    }
}
