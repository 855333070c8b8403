//! Open enums for MAD code points: management class, method, attribute ID.

macro_rules! open_enum {
    ($(#[$m:meta])* $name:ident : $raw:ty { $($(#[$vm:meta])* $var:ident = $val:expr,)* }) => {
        $(#[$m])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        pub enum $name {
            $($(#[$vm])* $var,)*
            Unknown($raw),
        }
        impl From<$raw> for $name {
            fn from(v: $raw) -> Self {
                match v {
                    $($val => $name::$var,)*
                    other => $name::Unknown(other),
                }
            }
        }
        impl From<$name> for $raw {
            fn from(v: $name) -> $raw {
                match v {
                    $($name::$var => $val,)*
                    $name::Unknown(other) => other,
                }
            }
        }
    };
}
pub(crate) use open_enum;

open_enum! {
    /// Management class (IBA 13.4.4, Table 105).
    MgmtClass: u8 {
        SubnMgmtLid = 0x01,
        SubnAdm = 0x03,
        Perf = 0x04,
        SubnMgmtDirected = 0x81,
    }
}

open_enum! {
    /// Method (IBA 13.4.5, Table 106); the response bit is 0x80.
    Method: u8 {
        Get = 0x01,
        Set = 0x02,
        Send = 0x03,
        Trap = 0x05,
        Report = 0x06,
        TrapRepress = 0x07,
        GetTable = 0x12,
        GetTraceTable = 0x13,
        GetMulti = 0x14,
        Delete = 0x15,
        GetResp = 0x81,
        ReportResp = 0x86,
        GetTableResp = 0x92,
        GetTraceTableResp = 0x93,
        GetMultiResp = 0x94,
        DeleteResp = 0x95,
    }
}

impl Method {
    /// True for methods with the response bit set (IBA 13.4.5).
    pub fn is_response(self) -> bool {
        u8::from(self) & 0x80 != 0 || self == Method::TrapRepress
    }

    /// Whether a MAD of this method is a request that gets an answer, so
    /// a refusal is a status answer (IBA 13.4.5, 13.4.7): Get, Set and the
    /// class-specific requests 0x10..=0x7F (GetTable, GetMulti, Delete,
    /// ...). Send, Trap, Report and TrapRepress are one-way, responses are
    /// answers, and the other codes below 0x10 (0x00, 0x04, 0x08..=0x0F)
    /// are no request Table 106 defines: none of them is ever answered.
    pub fn expects_response(self) -> bool {
        let raw = u8::from(self);
        matches!(self, Method::Get | Method::Set) || (raw & 0x80 == 0 && raw >= 0x10)
    }

    /// The method that answers this one (IBA 13.4.5, Table 106: a Set is
    /// answered by GetResp, every other request by its code with the
    /// response bit set).
    pub fn response(self) -> Method {
        match self {
            Method::Set => Method::GetResp,
            other => Method::from(u8::from(other) | 0x80),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_answers_and_one_way_methods() {
        let expecting: Vec<u8> = (0..=255u8).filter(|&m| Method::from(m).expects_response()).collect();
        let mut want = vec![0x01, 0x02];
        want.extend(0x10..=0x7F);
        assert_eq!(expecting, want, "Get, Set and the class requests; not Send/Trap/Report/TrapRepress");
        for m in [Method::Send, Method::Trap, Method::Report, Method::TrapRepress, Method::GetResp] {
            assert!(!m.expects_response(), "{m:?}");
        }
        assert_eq!(Method::Set.response(), Method::GetResp);
        assert_eq!(Method::Get.response(), Method::GetResp);
        assert_eq!(Method::GetTable.response(), Method::GetTableResp);
        assert_eq!(Method::GetMulti.response(), Method::GetMultiResp);
        assert_eq!(Method::Delete.response(), Method::DeleteResp);
        assert_eq!(Method::Report.response(), Method::ReportResp);
        assert_eq!(Method::from(0x7E).response(), Method::Unknown(0xFE));
    }
}

open_enum! {
    /// Attribute IDs of the subnet management class (IBA 14.2.5, Table 145).
    /// SA attribute IDs share numbers with these but live in their own enum.
    AttributeId: u16 {
        ClassPortInfo = 0x0001,
        Notice = 0x0002,
        InformInfo = 0x0003,
        NodeDescription = 0x0010,
        NodeInfo = 0x0011,
        SwitchInfo = 0x0012,
        GuidInfo = 0x0014,
        PortInfo = 0x0015,
        PKeyTable = 0x0016,
        SlToVlMappingTable = 0x0017,
        VlArbitrationTable = 0x0018,
        LinearForwardingTable = 0x0019,
        RandomForwardingTable = 0x001A,
        MulticastForwardingTable = 0x001B,
        SmInfo = 0x0020,
        VendorDiag = 0x0030,
        LedInfo = 0x0031,
    }
}
