//! ibsm's SA state stream between SMs: SubnAdmSet of a vendor-specific
//! SA attribute (IBA 13.4.4: attribute IDs 0xFF00-0xFFFF are vendor
//! specific), sent to QP1 like any SA MAD. The master pushes every change
//! of what requesters registered to each standby that asked for the
//! stream; a standby acknowledges (`crate::sa::sync` keeps the protocol).
//!
//! Why the SA class and not a vendor class of our own: every SM registers
//! the SA class, so a message that reaches an SM that does not speak the
//! stream (OpenSM) is answered with an error status or dropped. A class
//! nobody registered is dropped by the kernel, but kills the receiving
//! process under ibsim's libumad2sim, which dereferences the missing
//! agent. Set because every SA agent registers that method (IBA
//! 15.2.5.1); no GetResp follows: the stream's Hellos acknowledge.
//!
//! ```text
//! bytes   0-23   MAD common header (class 0x03, version 2, method Set,
//!                AttributeID 0xFF5C, AttributeModifier 0)
//!        24-35   RMPP header, 0 (never segmented)
//!        36-43   SM_Key: the sender's [sm] sm_key (both SMs share it)
//!        44-55   AttributeOffset, reserved, ComponentMask: 0
//!        56-63   Epoch: the master's stream (a new master, a new stream)
//!        64-71   Sequence: a Change's or Reset's own number; a Hello's
//!                next number expected (all below it are held); a Beat's
//!                next number the master will give
//!        72      Kind: 1 Hello, 2 Change, 3 Reset, 4 Beat, 5 Changes
//!        73      Table (Change): 1 ServiceRecord, 2 InformInfoRecord,
//!                3 GUIDInfoRecord, 4 MCMemberRecord, 5 a LID assignment
//!                (guid2lid: port GUID 8 bytes, base LID 2, LMC 1), 6 a
//!                switch's MFT digest (switch GUID 8 bytes, digest 8), 7 a
//!                switch of a multicast group's tree (MLID 2 bytes, switch
//!                GUID 8, its port towards the root 1: 0 at the root);
//!                Flags (Hello): bit 0, the standby takes Changes; bit 1,
//!                it takes tables 6 and 7;
//!                Count (Changes): how many, 1-28
//!        74      Op (Change): 1 add, 2 remove
//!        75      Part (Change): 0 a whole record, 1 its first part (the
//!                rest comes with the next number), 2 its last part
//!        76-77   Length of this part (Change), 1-144
//!        78-79   reserved, 0
//!        80-223  the record as the SA emits it (IBA 15.2.5), or a part
//!       224-255  reserved, 0
//! ```
//!
//! Changes (kind 5) packs several whole records, numbered from Sequence
//! on, into bytes 80-223: each is Table (1 byte), Op (1), Length (2), then
//! the record. Two MCMemberRecords fit, or nine LID assignments, where a
//! Change carries one. A master sends them only to a standby whose Hello
//! says it takes them, so a standby of an older ibsm still gets Changes.
//!
//! Bytes 224-255 stay unused because ibsim's libumad2sim hands a receiver
//! only the first 224 bytes of every MAD (its receive buffer is a
//! `struct sim_request` less the umad header); the rest reads as garbage.
//! A ServiceRecord (176 bytes) therefore goes in two parts.

use super::header::{MadHeader, MadHeaderRepr};
use super::{AttributeId, Method, MgmtClass, WireError, WireResult, MAD_HEADER_LEN};

/// The stream's attribute, in the vendor-specific range.
pub const SM_SYNC_ATTRIBUTE: u16 = 0xFF5C;
pub const SM_SYNC_MAD_LEN: usize = 256;
/// The most of a record one Change carries.
pub const MAX_RECORD_LEN: usize = field::RECORD_END - field::RECORD;
/// What each record of a Changes takes beyond its bytes: Table, Op, Length.
pub const PACKED_HEADER_LEN: usize = 4;
/// The most records one Changes carries (1-byte records, as none is).
pub const MAX_PACKED: usize = MAX_RECORD_LEN / (PACKED_HEADER_LEN + 1);
/// A Hello's flags: this standby takes Changes, and tables 6 and 7.
const TAKES_PACKS: u8 = 1;
const TAKES_MCAST: u8 = 2;

mod field {
    use std::ops::Range;
    pub const SM_KEY: Range<usize> = 36..44;
    pub const EPOCH: Range<usize> = 56..64;
    pub const SEQ: Range<usize> = 64..72;
    pub const KIND: usize = 72;
    pub const TABLE: usize = 73;
    pub const OP: usize = 74;
    pub const LEN: Range<usize> = 76..78;
    pub const PART: usize = 75;
    pub const RECORD: usize = 80;
    pub const RECORD_END: usize = 224;
}

/// Whether `mad` is of the stream: an SA MAD with its attribute (a
/// request, or an SM's error answer to one).
pub fn is_sync_mad(mad: &[u8]) -> bool {
    mad.len() >= 24
        && mad[1] == u8::from(MgmtClass::SubnAdm)
        && u16::from_be_bytes([mad[16], mad[17]]) == SM_SYNC_ATTRIBUTE
}

/// Which of the SA's registrations a Change is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SyncTable {
    Services = 1,
    Subscriptions = 2,
    GuidInfo = 3,
    McMembers = 4,
    Lids = 5,
    /// What the master knows a switch's MulticastForwardingTable holds,
    /// as a digest ([`MftDigestRecord`]): a new master whose own multicast
    /// routes give the same digest writes that switch without reading it.
    MftDigests = 6,
    /// Each multicast group's tree, a record per tree switch
    /// ([`McastTreeRecord`]): a new master builds its trees along them, so
    /// that they are the ones the switches hold, whatever order the old
    /// master routed the groups in.
    McastTrees = 7,
}

/// How many tables the stream carries.
pub const SYNC_TABLES: usize = 7;

/// A [`SyncTable::Lids`] record, one guid2lid entry: port GUID (8 bytes),
/// base LID (2), big-endian, and LMC (1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct LidMapRecord {
    pub port_guid: u64,
    pub base_lid: u16,
    pub lmc: u8,
}

impl LidMapRecord {
    pub const LEN: usize = 11;

    pub fn to_bytes(&self) -> [u8; Self::LEN] {
        let mut r = [0u8; Self::LEN];
        r[..8].copy_from_slice(&self.port_guid.to_be_bytes());
        r[8..10].copy_from_slice(&self.base_lid.to_be_bytes());
        r[10] = self.lmc;
        r
    }

    pub fn parse(r: &[u8]) -> WireResult<Self> {
        let r: &[u8; Self::LEN] = r.try_into().map_err(|_| record_length("guid2lid record", r.len(), Self::LEN))?;
        Ok(LidMapRecord { port_guid: be64(&r[..8]), base_lid: u16::from_be_bytes([r[8], r[9]]), lmc: r[10] })
    }
}

/// A [`SyncTable::MftDigests`] record: switch GUID, digest (8 bytes each,
/// big-endian).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct MftDigestRecord {
    pub switch_guid: u64,
    pub digest: u64,
}

impl MftDigestRecord {
    pub const LEN: usize = 16;

    pub fn to_bytes(&self) -> [u8; Self::LEN] {
        let mut r = [0u8; Self::LEN];
        r[..8].copy_from_slice(&self.switch_guid.to_be_bytes());
        r[8..].copy_from_slice(&self.digest.to_be_bytes());
        r
    }

    pub fn parse(r: &[u8]) -> WireResult<Self> {
        let r: &[u8; Self::LEN] = r.try_into().map_err(|_| record_length("MFT digest record", r.len(), Self::LEN))?;
        Ok(MftDigestRecord { switch_guid: be64(&r[..8]), digest: be64(&r[8..]) })
    }
}

/// A [`SyncTable::McastTrees`] record: MLID (2 bytes), switch GUID (8),
/// big-endian, and the switch's port towards the tree's root (1; 0: the
/// switch is the root).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct McastTreeRecord {
    pub mlid: u16,
    pub switch_guid: u64,
    pub parent_port: u8,
}

impl McastTreeRecord {
    pub const LEN: usize = 11;

    pub fn to_bytes(&self) -> [u8; Self::LEN] {
        let mut r = [0u8; Self::LEN];
        r[..2].copy_from_slice(&self.mlid.to_be_bytes());
        r[2..10].copy_from_slice(&self.switch_guid.to_be_bytes());
        r[10] = self.parent_port;
        r
    }

    pub fn parse(r: &[u8]) -> WireResult<Self> {
        let r: &[u8; Self::LEN] =
            r.try_into().map_err(|_| record_length("multicast tree record", r.len(), Self::LEN))?;
        Ok(McastTreeRecord { mlid: u16::from_be_bytes([r[0], r[1]]), switch_guid: be64(&r[2..10]), parent_port: r[10] })
    }
}

fn record_length(what: &'static str, len: usize, need: usize) -> WireError {
    if len < need {
        WireError::Truncated { what, len, need }
    } else {
        WireError::Oversized { what, len, max: need }
    }
}

impl SyncTable {
    pub const ALL: [SyncTable; SYNC_TABLES] = [
        SyncTable::Services,
        SyncTable::Subscriptions,
        SyncTable::GuidInfo,
        SyncTable::McMembers,
        SyncTable::Lids,
        SyncTable::MftDigests,
        SyncTable::McastTrees,
    ];

    pub fn index(self) -> usize {
        self as usize - 1
    }

    fn from_wire(v: u8) -> Option<SyncTable> {
        Self::ALL.into_iter().find(|t| *t as u8 == v)
    }
}

/// Which part of a record a Change carries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SyncPart {
    Whole = 0,
    First = 1,
    Last = 2,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum SyncOp {
    Add = 1,
    Remove = 2,
}

/// One message of the stream.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SyncBody {
    /// Standby to master: "send me your stream; I hold every Change of
    /// `epoch` below `next`" (epoch 0: nothing held). Also its
    /// acknowledgement, and what it understands.
    Hello { next: u64, takes: Takes },
    /// Master to standby: one record added or removed, number `seq` (or
    /// a part of it).
    Change { seq: u64, table: SyncTable, op: SyncOp, part: SyncPart, record: Vec<u8> },
    /// Master to standby: forget the copy; the Changes after `seq` (adds)
    /// rebuild it.
    Reset { seq: u64 },
    /// Master to standby: whole records added or removed, numbered `seq`,
    /// `seq + 1`, and on.
    Changes { seq: u64, records: Vec<PackedChange> },
    /// Master to standby: "I am here; my next number is `next`".
    Beat { next: u64 },
}

/// What a standby's Hello says it understands beyond the first version
/// of the stream: a master sends it nothing else, so an older standby
/// keeps its stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Takes {
    /// Changes (several records a message).
    pub packs: bool,
    /// Records of [`SyncTable::MftDigests`] and [`SyncTable::McastTrees`].
    pub mcast: bool,
}

impl Takes {
    /// Everything this version understands.
    pub const ALL: Takes = Takes { packs: true, mcast: true };

    /// Whether records of `table` may be sent.
    pub fn table(self, table: SyncTable) -> bool {
        !matches!(table, SyncTable::MftDigests | SyncTable::McastTrees) || self.mcast
    }

    fn from_wire(flags: u8) -> Takes {
        Takes { packs: flags & TAKES_PACKS != 0, mcast: flags & TAKES_MCAST != 0 }
    }

    fn to_wire(self) -> u8 {
        (if self.packs { TAKES_PACKS } else { 0 }) | (if self.mcast { TAKES_MCAST } else { 0 })
    }
}

/// One record of a [`SyncBody::Changes`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PackedChange {
    pub table: SyncTable,
    pub op: SyncOp,
    pub record: Vec<u8>,
}

impl PackedChange {
    /// The bytes it takes in a Changes.
    pub fn packed_len(record_len: usize) -> usize {
        PACKED_HEADER_LEN + record_len
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SyncMadRepr {
    pub transaction_id: u64,
    pub sm_key: u64,
    pub epoch: u64,
    pub body: SyncBody,
}

const WHAT: &str = "SM sync MAD";

fn kind(body: &SyncBody) -> u8 {
    match body {
        SyncBody::Hello { .. } => 1,
        SyncBody::Change { .. } => 2,
        SyncBody::Reset { .. } => 3,
        SyncBody::Beat { .. } => 4,
        SyncBody::Changes { .. } => 5,
    }
}

fn be64(b: &[u8]) -> u64 {
    u64::from_be_bytes(b.try_into().expect("8 bytes"))
}

impl SyncMadRepr {
    /// Reads a whole MAD; anything but a well-formed message of this class
    /// is an error naming the field.
    pub fn parse(mad: &[u8]) -> WireResult<Self> {
        if mad.len() < SM_SYNC_MAD_LEN {
            return Err(WireError::Truncated { what: WHAT, len: mad.len(), need: SM_SYNC_MAD_LEN });
        }
        if mad.len() > SM_SYNC_MAD_LEN {
            return Err(WireError::Oversized { what: WHAT, len: mad.len(), max: SM_SYNC_MAD_LEN });
        }
        let h = MadHeaderRepr::parse(&MadHeader::new_checked(mad)?)?;
        let forbidden = |field, value: u64| Err(WireError::Forbidden { what: WHAT, field, value });
        if h.mgmt_class != MgmtClass::SubnAdm {
            return forbidden("MgmtClass", u8::from(h.mgmt_class).into());
        }
        if h.class_version != 2 {
            return Err(WireError::ClassVersion { class: 0x03, version: h.class_version });
        }
        if h.method != Method::Set {
            return forbidden("Method", u8::from(h.method).into());
        }
        if u16::from(h.attribute_id) != SM_SYNC_ATTRIBUTE {
            return forbidden("AttributeID", u16::from(h.attribute_id).into());
        }
        let seq = be64(&mad[field::SEQ]);
        let body = match mad[field::KIND] {
            1 => SyncBody::Hello { next: seq, takes: Takes::from_wire(mad[field::TABLE]) },
            2 => {
                let Some(table) = SyncTable::from_wire(mad[field::TABLE]) else {
                    return forbidden("Table", mad[field::TABLE].into());
                };
                let op = parse_op(mad[field::OP])?;
                let len = u16::from_be_bytes([mad[field::LEN.start], mad[field::LEN.start + 1]]) as usize;
                if len == 0 || len > MAX_RECORD_LEN {
                    return forbidden("Length", len as u64);
                }
                let part = match mad[field::PART] {
                    0 => SyncPart::Whole,
                    1 => SyncPart::First,
                    2 => SyncPart::Last,
                    v => return forbidden("Part", v.into()),
                };
                SyncBody::Change { seq, table, op, part, record: mad[field::RECORD..field::RECORD + len].to_vec() }
            }
            3 => SyncBody::Reset { seq },
            4 => SyncBody::Beat { next: seq },
            5 => SyncBody::Changes { seq, records: parse_packed(mad)? },
            other => return forbidden("Kind", other.into()),
        };
        Ok(SyncMadRepr {
            transaction_id: h.transaction_id,
            sm_key: be64(&mad[field::SM_KEY]),
            epoch: be64(&mad[field::EPOCH]),
            body,
        })
    }

    /// The whole MAD. A record longer than [`MAX_RECORD_LEN`] is an error.
    pub fn emit(&self) -> WireResult<Vec<u8>> {
        let mut mad = vec![0u8; SM_SYNC_MAD_LEN];
        let h = MadHeaderRepr {
            mgmt_class: MgmtClass::SubnAdm,
            class_version: 2,
            method: Method::Set,
            status: 0,
            class_specific: 0,
            transaction_id: self.transaction_id,
            attribute_id: AttributeId::from(SM_SYNC_ATTRIBUTE),
            attribute_modifier: 0,
        };
        h.emit(&mut MadHeader::new_checked(&mut mad[..MAD_HEADER_LEN]).expect("24 bytes"));
        mad[field::KIND] = kind(&self.body);
        mad[field::SM_KEY].copy_from_slice(&self.sm_key.to_be_bytes());
        mad[field::EPOCH].copy_from_slice(&self.epoch.to_be_bytes());
        let seq = match &self.body {
            SyncBody::Hello { next, takes } => {
                mad[field::TABLE] = takes.to_wire();
                *next
            }
            SyncBody::Beat { next } => *next,
            SyncBody::Changes { seq, records } => {
                if records.is_empty() || records.len() > MAX_PACKED {
                    return Err(WireError::Forbidden { what: WHAT, field: "Count", value: records.len() as u64 });
                }
                mad[field::TABLE] = records.len() as u8;
                let mut at = field::RECORD;
                for r in records {
                    let end = at + PackedChange::packed_len(r.record.len());
                    if r.record.is_empty() || end > field::RECORD_END {
                        return Err(WireError::Forbidden { what: WHAT, field: "Length", value: r.record.len() as u64 });
                    }
                    mad[at] = r.table as u8;
                    mad[at + 1] = r.op as u8;
                    mad[at + 2..at + 4].copy_from_slice(&(r.record.len() as u16).to_be_bytes());
                    mad[at + 4..end].copy_from_slice(&r.record);
                    at = end;
                }
                *seq
            }
            SyncBody::Reset { seq } => *seq,
            SyncBody::Change { seq, table, op, part, record } => {
                if record.is_empty() || record.len() > MAX_RECORD_LEN {
                    return Err(WireError::Forbidden { what: WHAT, field: "Length", value: record.len() as u64 });
                }
                mad[field::TABLE] = *table as u8;
                mad[field::OP] = *op as u8;
                mad[field::PART] = *part as u8;
                mad[field::LEN].copy_from_slice(&(record.len() as u16).to_be_bytes());
                mad[field::RECORD..field::RECORD + record.len()].copy_from_slice(record);
                *seq
            }
        };
        mad[field::SEQ].copy_from_slice(&seq.to_be_bytes());
        Ok(mad)
    }
}

fn parse_op(v: u8) -> WireResult<SyncOp> {
    match v {
        1 => Ok(SyncOp::Add),
        2 => Ok(SyncOp::Remove),
        v => Err(WireError::Forbidden { what: WHAT, field: "Op", value: v.into() }),
    }
}

/// The records of a Changes: Count of them, each whole, within bytes
/// 80-223 (the rest of that room must be zero, so one message has one
/// spelling).
fn parse_packed(mad: &[u8]) -> WireResult<Vec<PackedChange>> {
    let forbidden = |field, value: u64| WireError::Forbidden { what: WHAT, field, value };
    let count = usize::from(mad[field::TABLE]);
    if count == 0 || count > MAX_PACKED {
        return Err(forbidden("Count", count as u64));
    }
    let mut records = Vec::with_capacity(count);
    let mut at = field::RECORD;
    for _ in 0..count {
        if at + PACKED_HEADER_LEN > field::RECORD_END {
            return Err(forbidden("Count", count as u64));
        }
        let table = SyncTable::from_wire(mad[at]).ok_or_else(|| forbidden("Table", mad[at].into()))?;
        let op = parse_op(mad[at + 1])?;
        let len = usize::from(u16::from_be_bytes([mad[at + 2], mad[at + 3]]));
        let end = at + PACKED_HEADER_LEN + len;
        if len == 0 || end > field::RECORD_END {
            return Err(forbidden("Length", len as u64));
        }
        records.push(PackedChange { table, op, record: mad[at + PACKED_HEADER_LEN..end].to_vec() });
        at = end;
    }
    if mad[at..field::RECORD_END].iter().any(|&b| b != 0) {
        return Err(forbidden("Padding", (at - field::RECORD) as u64));
    }
    Ok(records)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Vec<SyncMadRepr> {
        let m = |body| SyncMadRepr { transaction_id: 0x1234, sm_key: 7, epoch: 0xabcd, body };
        vec![
            m(SyncBody::Hello { next: 5, takes: Takes::default() }),
            m(SyncBody::Change {
                seq: 9,
                table: SyncTable::McMembers,
                op: SyncOp::Remove,
                part: SyncPart::Whole,
                record: vec![3; 52],
            }),
            m(SyncBody::Change {
                seq: 10,
                table: SyncTable::Services,
                op: SyncOp::Add,
                part: SyncPart::First,
                record: vec![1; 144],
            }),
            m(SyncBody::Change {
                seq: 11,
                table: SyncTable::Services,
                op: SyncOp::Add,
                part: SyncPart::Last,
                record: vec![2; 32],
            }),
            m(SyncBody::Reset { seq: 1 }),
            m(SyncBody::Beat { next: 11 }),
            m(SyncBody::Hello { next: 6, takes: Takes::ALL }),
            m(SyncBody::Change {
                seq: 12,
                table: SyncTable::MftDigests,
                op: SyncOp::Add,
                part: SyncPart::Whole,
                record: vec![7; 16],
            }),
            m(SyncBody::Hello { next: 7, takes: Takes { packs: false, mcast: true } }),
            m(SyncBody::Changes {
                seq: 12,
                records: vec![
                    PackedChange { table: SyncTable::McMembers, op: SyncOp::Add, record: vec![4; 52] },
                    PackedChange { table: SyncTable::McMembers, op: SyncOp::Remove, record: vec![5; 52] },
                    PackedChange { table: SyncTable::Lids, op: SyncOp::Add, record: vec![6; 11] },
                ],
            }),
        ]
    }

    #[test]
    fn multicast_records_survive_emit_and_parse_and_refuse_other_lengths() {
        let d = MftDigestRecord { switch_guid: 0x0002_c903_0000_0001, digest: 0xfeed_face_0123_4567 };
        assert_eq!(MftDigestRecord::parse(&d.to_bytes()).unwrap(), d);
        let r = McastTreeRecord { mlid: 0xc01f, switch_guid: 0x0002_c903_0000_0002, parent_port: 35 };
        assert_eq!(McastTreeRecord::parse(&r.to_bytes()).unwrap(), r);
        assert!(matches!(MftDigestRecord::parse(&[0; 15]), Err(WireError::Truncated { need: 16, .. })));
        assert!(matches!(McastTreeRecord::parse(&[0; 12]), Err(WireError::Oversized { max: 11, .. })));
    }

    #[test]
    fn every_message_survives_emit_and_parse() {
        for r in sample() {
            let mad = r.emit().unwrap();
            assert_eq!((mad[1], mad[2], mad[3]), (0x03, 2, 0x02));
            assert!(is_sync_mad(&mad));
            assert_eq!(SyncMadRepr::parse(&mad).unwrap(), r);
            assert!(mad[224..].iter().all(|&b| b == 0), "bytes ibsim drops stay unused");
        }
    }

    #[test]
    fn malformed_packs_name_the_field() {
        let good = sample().last().unwrap().emit().unwrap();
        // The third record starts at 80 + 2 * 56 = 192.
        type Spoil = Box<dyn Fn(&mut Vec<u8>)>;
        let cases: Vec<(Spoil, &str)> = vec![
            (Box::new(|m| m[73] = 0), "Count"),
            (Box::new(|m| m[73] = 4), "Table"),
            (Box::new(|m| m[73] = 200), "Count"),
            (Box::new(|m| m[192] = 9), "Table"),
            (Box::new(|m| m[193] = 0), "Op"),
            (Box::new(|m| m[194..196].copy_from_slice(&40u16.to_be_bytes())), "Length"),
            (Box::new(|m| m[194..196].fill(0)), "Length"),
            (Box::new(|m| m[223] = 1), "Padding"),
        ];
        for (spoil, says) in cases {
            let mut mad = good.clone();
            spoil(&mut mad);
            let e = SyncMadRepr::parse(&mad).unwrap_err().to_string();
            assert!(e.contains(says), "{e} should name {says}");
        }
        let m = |records| SyncMadRepr {
            transaction_id: 1,
            sm_key: 0,
            epoch: 1,
            body: SyncBody::Changes { seq: 1, records },
        };
        let member = |n| PackedChange { table: SyncTable::McMembers, op: SyncOp::Add, record: vec![n; 52] };
        assert!(m(vec![]).emit().is_err(), "no records");
        assert!(m(vec![member(1), member(2), member(3)]).emit().is_err(), "three members overflow");
        assert!(m(vec![member(1), member(2)]).emit().is_ok());
    }

    #[test]
    fn malformed_messages_name_the_field() {
        let good = sample()[1].emit().unwrap();
        type Spoil = Box<dyn Fn(&mut Vec<u8>)>;
        let cases: Vec<(Spoil, &str)> = vec![
            (Box::new(|m| m.truncate(100)), "need at least 256"),
            (Box::new(|m| m[1] = 0x0A), "MgmtClass"),
            (Box::new(|m| m[2] = 1), "class version 1"),
            (Box::new(|m| m[3] = 0x81), "Method"),
            (Box::new(|m| m[17] = 9), "AttributeID"),
            (Box::new(|m| m[72] = 9), "Kind"),
            (Box::new(|m| m[73] = 0), "Table"),
            (Box::new(|m| m[74] = 3), "Op"),
            (Box::new(|m| m[75] = 3), "Part"),
            (Box::new(|m| m[76..78].copy_from_slice(&145u16.to_be_bytes())), "Length"),
            (Box::new(|m| m[76..78].fill(0)), "Length"),
        ];
        for (spoil, says) in cases {
            let mut mad = good.clone();
            spoil(&mut mad);
            let e = SyncMadRepr::parse(&mad).unwrap_err().to_string();
            assert!(e.contains(says), "{e} should name {says}");
        }
        let too_long = SyncMadRepr {
            transaction_id: 1,
            sm_key: 0,
            epoch: 1,
            body: SyncBody::Change {
                seq: 1,
                table: SyncTable::Services,
                op: SyncOp::Add,
                part: SyncPart::Whole,
                record: vec![0; 145],
            },
        };
        assert!(too_long.emit().is_err());
    }
}
