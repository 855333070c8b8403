//! Candidate records on the wire and the one way they are matched.
//!
//! A [`Table`] holds one attribute's records as emitted bytes, built once
//! per snapshot, with hash indexes on the components a Get usually names
//! (a LID, a GUID), so a query that names one looks at a handful of
//! records instead of all. Every candidate, indexed or generated on the
//! fly, goes through [`Query::offer`]: `components_match` on the wire bytes
//! of the query and the record (IBA 15.2.1.3), the secret fields of an
//! untrusted requester hidden, and the answer's size bounded.
//!
//! Each record also names the ports it belongs to ([`Owners`]), so a scan
//! can leave out, without emitting anything again, the records an
//! untrusted requester may not see (`super::visibility`).

use std::collections::HashMap;

use crate::mad::sa::{components_match, field_is_zero, unknown_components, Component, SaRecord};
use crate::types::Guid;

/// The ports whose partitions decide who may see a record: the port it
/// describes (both the same), or the two ends of a link (a requester must
/// see both).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Owners(pub Guid, pub Guid);

impl Owners {
    pub fn port(guid: Guid) -> Owners {
        Owners(guid, guid)
    }

    /// Whether `sees` lets a requester see every owner.
    pub fn seen_by(self, sees: &impl Fn(Guid) -> bool) -> bool {
        sees(self.0) && (self.1 == self.0 || sees(self.1))
    }
}

/// How an attribute's records look on the wire.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Spec {
    pub components: &'static [Component],
    /// Bytes of one record.
    pub len: usize,
    /// Components an untrusted requester sees as zero (M_Key, ServiceKey,
    /// SM_Key), by index into `components`.
    pub secrets: &'static [usize],
}

impl Spec {
    pub fn of<R: SaRecord>(secrets: &'static [usize]) -> Spec {
        Spec { components: R::COMPONENTS, len: R::LEN, secrets }
    }
    /// Record spacing in a GetTableResp, in 8-byte words (IBA 15.2.1.1).
    pub fn attribute_offset(&self) -> u16 {
        self.len.div_ceil(8) as u16
    }
    pub fn stride(&self) -> usize {
        usize::from(self.attribute_offset()) * 8
    }
}

/// The value of a component of at most 64 bits in `b`, right-aligned.
pub(crate) fn component_value(c: Component, b: &[u8]) -> Option<u64> {
    let (start, bits) = (usize::from(c.bit_offset), usize::from(c.bits));
    if bits == 0 || bits > 64 || (start + bits).div_ceil(8) > b.len() {
        return None;
    }
    let mut v = 0u64;
    for bit in start..start + bits {
        v = v << 1 | u64::from((b[bit / 8] >> (7 - bit % 8)) & 1);
    }
    Some(v)
}

/// Zeroes the bits of `c` in `b` (as far as `b` reaches).
pub(crate) fn zero_component(c: Component, b: &mut [u8]) {
    let start = usize::from(c.bit_offset);
    for bit in start..start + usize::from(c.bits) {
        if let Some(byte) = b.get_mut(bit / 8) {
            *byte &= !(1 << (7 - bit % 8));
        }
    }
}

/// Whether `mask` has a bit that names no component of `R`.
pub(crate) fn unknown_mask<R: SaRecord>(mask: u64) -> bool {
    unknown_components(R::COMPONENTS, mask) != 0
}

/// Why a query gets no records.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum QueryError {
    /// A mask bit names no component, or the data is shorter than a record
    /// (ERR_REQ_INVALID).
    Invalid,
    /// The answer would exceed the size cap (ERR_NO_RESOURCES).
    TooLarge,
}

/// One query against one attribute: the matching rule and the answer
/// being collected.
pub(crate) struct Query<'a> {
    spec: Spec,
    data: &'a [u8],
    /// The mask matched on the wire (secret components of an untrusted
    /// requester removed: they match only a zero query value).
    mask: u64,
    trusted: bool,
    /// A Get needs no more than two matches to answer.
    get: bool,
    max_bytes: usize,
    out: Vec<u8>,
    count: usize,
    too_large: bool,
    /// A secret component an untrusted requester asked for with a non-zero
    /// value: nothing can match it.
    impossible: bool,
    /// Components matched as "at least the query's bits set" instead of
    /// equal, with the query's value.
    superset: Vec<(Component, u64)>,
}

impl<'a> Query<'a> {
    /// Checks the mask and the data length first.
    pub fn new(
        spec: Spec,
        data: &'a [u8],
        mask: u64,
        trusted: bool,
        get: bool,
        max_bytes: usize,
    ) -> Result<Self, QueryError> {
        if unknown_components(spec.components, mask) != 0 || data.len() < spec.len {
            return Err(QueryError::Invalid);
        }
        let mut mask_on_wire = mask;
        let mut impossible = false;
        if !trusted {
            for &i in spec.secrets {
                if mask >> i & 1 == 1 {
                    mask_on_wire &= !(1 << i);
                    impossible |= !field_is_zero(spec.components[i], data);
                }
            }
        }
        Ok(Query {
            spec,
            data,
            mask: mask_on_wire,
            trusted,
            get,
            max_bytes,
            out: Vec::new(),
            count: 0,
            too_large: false,
            impossible,
            superset: Vec::new(),
        })
    }

    /// Leaves the components in `ignore` out of the match (request flags
    /// that are no record field, such as PortInfoRecord.Options), and
    /// matches those in `superset` as bit sets the record must contain
    /// (PortInfoRecord's CapabilityMask match, IBA 15.2.5.3).
    pub fn relax(&mut self, ignore: u64, superset: u64) {
        self.mask &= !ignore;
        for (i, &c) in self.spec.components.iter().enumerate() {
            if (superset & self.mask) >> i & 1 == 1 {
                if let Some(v) = component_value(c, self.data) {
                    self.mask &= !(1 << i);
                    self.superset.push((c, v));
                }
            }
        }
    }

    /// The value the query asks for in component `i`, when the mask names
    /// it (and it fits 64 bits): what an index or a generator narrows by.
    pub fn key(&self, i: usize) -> Option<u64> {
        if self.mask >> i & 1 == 0 {
            return None;
        }
        component_value(*self.spec.components.get(i)?, self.data)
    }

    /// Whether more candidates can change the answer.
    pub fn wants_more(&self) -> bool {
        !self.too_large && !self.impossible && (!self.get || self.count < 2)
    }

    /// Takes `record` into the answer if it matches. Returns whether to go
    /// on offering.
    pub fn offer(&mut self, record: &[u8]) -> bool {
        if !self.wants_more() {
            return false;
        }
        if record.len() < self.spec.len || !components_match(self.spec.components, self.mask, self.data, record) {
            return true;
        }
        if !self.superset.iter().all(|&(c, want)| component_value(c, record).is_some_and(|have| have & want == want)) {
            return true;
        }
        let stride = self.spec.stride();
        if self.out.len() + stride > self.max_bytes {
            self.too_large = true;
            return false;
        }
        let at = self.out.len();
        self.out.extend_from_slice(&record[..self.spec.len]);
        self.out.resize(at + stride, 0);
        if !self.trusted {
            for &i in self.spec.secrets {
                zero_component(self.spec.components[i], &mut self.out[at..at + self.spec.len]);
            }
        }
        self.count += 1;
        self.wants_more()
    }

    /// The records collected (each `stride` bytes) and how many.
    pub fn finish(self) -> Result<(Vec<u8>, usize), QueryError> {
        if self.too_large {
            return Err(QueryError::TooLarge);
        }
        Ok((self.out, self.count))
    }
}

/// An index on one component: value -> records.
#[derive(Debug, Default)]
struct KeyIndex {
    component: usize,
    map: HashMap<u64, Vec<u32>>,
}

/// One attribute's records, emitted once per snapshot.
#[derive(Debug)]
pub(crate) struct Table {
    spec: Spec,
    bytes: Vec<u8>,
    /// Record i's owners.
    owners: Vec<Owners>,
    indexes: Vec<KeyIndex>,
}

impl Table {
    /// An empty table indexed on `indexed` components (each at most 64 bits).
    pub fn new(spec: Spec, indexed: &[usize]) -> Self {
        let indexes = indexed.iter().map(|&component| KeyIndex { component, map: HashMap::new() }).collect();
        Table { spec, bytes: Vec::new(), owners: Vec::new(), indexes }
    }

    pub fn spec(&self) -> Spec {
        self.spec
    }

    pub fn len(&self) -> usize {
        self.bytes.len() / self.spec.len
    }

    pub fn record(&self, i: usize) -> &[u8] {
        &self.bytes[i * self.spec.len..(i + 1) * self.spec.len]
    }

    /// Appends one record, which belongs to `owners`.
    pub fn push<R: SaRecord>(&mut self, r: &R, owners: Owners) {
        debug_assert_eq!(R::LEN, self.spec.len);
        let at = self.bytes.len();
        self.bytes.resize(at + self.spec.len, 0);
        if r.emit(&mut self.bytes[at..]).is_err() {
            // Cannot happen (the buffer is LEN bytes); keep the table whole.
            self.bytes.truncate(at);
            return;
        }
        self.owners.push(owners);
        let i = (at / self.spec.len) as u32;
        for ix in &mut self.indexes {
            if let Some(v) = component_value(self.spec.components[ix.component], &self.bytes[at..]) {
                ix.map.entry(v).or_default().push(i);
            }
        }
    }

    /// Offers `query` every candidate `sees` lets the requester see (every
    /// owner of the record): those an index gives for a key the query
    /// names, or all.
    pub fn scan(&self, query: &mut Query<'_>, sees: impl Fn(Guid) -> bool) {
        let indexed = self.indexes.iter().find_map(|ix| {
            let secret = self.spec.secrets.contains(&ix.component);
            query.key(ix.component).filter(|_| !secret).map(|v| ix.map.get(&v))
        });
        let mut offer = |i: usize| !self.owners[i].seen_by(&sees) || query.offer(self.record(i));
        match indexed {
            Some(Some(hits)) => {
                for &i in hits {
                    if !offer(i as usize) {
                        return;
                    }
                }
            }
            // The key names no record.
            Some(None) => {}
            None => {
                for i in 0..self.len() {
                    if !offer(i) {
                        return;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::WireResult;

    /// A 10-byte test record: key (16) | secret (32) | four bytes of data.
    #[derive(Debug, Clone)]
    struct Rec([u8; 10]);
    impl SaRecord for Rec {
        const ATTRIBUTE: crate::mad::SaAttributeId = crate::mad::SaAttributeId::NodeRecord;
        const LEN: usize = 10;
        const COMPONENTS: &'static [Component] =
            &[Component::bytes(0, 2), Component::bytes(2, 4), Component::bytes(6, 4)];
        fn parse_bytes(b: &[u8]) -> WireResult<Self> {
            Ok(Rec(b[..10].try_into().unwrap()))
        }
        fn emit(&self, out: &mut [u8]) -> WireResult<()> {
            out[..10].copy_from_slice(&self.0);
            Ok(())
        }
    }

    fn rec(key: u16, secret: u32, data: u32) -> Rec {
        let mut b = [0u8; 10];
        b[..2].copy_from_slice(&key.to_be_bytes());
        b[2..6].copy_from_slice(&secret.to_be_bytes());
        b[6..].copy_from_slice(&data.to_be_bytes());
        Rec(b)
    }

    fn table() -> Table {
        let mut t = Table::new(Spec::of::<Rec>(&[1]), &[0]);
        for k in 0..100u16 {
            t.push(&rec(k % 50, 0xdead, u32::from(k)), Owners(Guid(u64::from(k % 10)), Guid(u64::from(k % 7))));
        }
        t
    }

    fn run(
        t: &Table,
        q: &Rec,
        mask: u64,
        trusted: bool,
        get: bool,
        max: usize,
    ) -> Result<(Vec<u8>, usize), QueryError> {
        let mut query = Query::new(t.spec(), &q.0, mask, trusted, get, max)?;
        t.scan(&mut query, |_| true);
        query.finish()
    }

    #[test]
    fn indexed_and_scanned_queries_agree_and_masks_are_exact() {
        let t = table();
        let (bytes, n) = run(&t, &rec(7, 0, 0), 0b001, true, false, 1 << 20).unwrap();
        assert_eq!(n, 2, "keys 7 and 57 % 50");
        assert_eq!(bytes.len(), 32, "two records, each padded to 16 bytes");
        assert_eq!(&bytes[6..10], &7u32.to_be_bytes());
        assert_eq!(&bytes[16 + 6..16 + 10], &57u32.to_be_bytes());
        let (_, n) = run(&t, &rec(7, 0, 57), 0b101, true, false, 1 << 20).unwrap();
        assert_eq!(n, 1);
        let (_, n) = run(&t, &rec(0, 0, 57), 0b100, true, false, 1 << 20).unwrap();
        assert_eq!(n, 1, "found by scanning");
        let (_, n) = run(&t, &rec(999, 0, 0), 0b001, true, false, 1 << 20).unwrap();
        assert_eq!(n, 0);
        assert_eq!(run(&t, &rec(0, 0, 0), 0, true, false, 1 << 20).unwrap().1, 100);
        assert_eq!(run(&t, &rec(0, 0, 0), 0b1000, true, false, 1 << 20).unwrap_err(), QueryError::Invalid);
    }

    #[test]
    fn gets_stop_at_two_and_the_cap_refuses() {
        let t = table();
        assert_eq!(run(&t, &rec(0, 0, 0), 0, true, true, 1 << 20).unwrap().1, 2);
        assert_eq!(run(&t, &rec(0, 0, 0), 0, true, false, 16 * 99).unwrap_err(), QueryError::TooLarge);
        assert_eq!(run(&t, &rec(0, 0, 0), 0, true, false, 16 * 100).unwrap().1, 100);
    }

    #[test]
    fn secrets_are_hidden_from_untrusted_requesters() {
        let t = table();
        let (bytes, _) = run(&t, &rec(3, 0, 0), 0b001, false, false, 1 << 20).unwrap();
        assert_eq!(&bytes[2..6], &[0; 4], "zeroed");
        let (bytes, _) = run(&t, &rec(3, 0, 0), 0b001, true, false, 1 << 20).unwrap();
        assert_eq!(&bytes[2..6], &0xdeadu32.to_be_bytes());
        // An untrusted guess at the secret never matches; a zero one is
        // matched against the zeroed record.
        assert_eq!(run(&t, &rec(3, 0xdead, 0), 0b011, false, false, 1 << 20).unwrap().1, 0);
        assert_eq!(run(&t, &rec(3, 0, 0), 0b011, false, false, 1 << 20).unwrap().1, 2);
        assert_eq!(run(&t, &rec(3, 0xdead, 0), 0b011, true, false, 1 << 20).unwrap().1, 2);
    }

    #[test]
    fn relaxed_components_are_ignored_or_matched_as_bit_sets() {
        let t = table();
        // Data bits 0b11 set: records whose data holds both bits (3, 7, ...).
        let q = rec(0, 0, 0b11);
        let mut query = Query::new(t.spec(), &q.0, 0b100, true, false, 1 << 20).unwrap();
        query.relax(0, 0b100);
        t.scan(&mut query, |_| true);
        let (_, n) = query.finish().unwrap();
        assert_eq!(n, (0..100u32).filter(|k| k & 0b11 == 0b11).count());
        let q = rec(5, 0, 12345);
        let mut query = Query::new(t.spec(), &q.0, 0b101, true, false, 1 << 20).unwrap();
        query.relax(0b100, 0);
        t.scan(&mut query, |_| true);
        assert_eq!(query.finish().unwrap().1, 2, "the data is a flag, not matched");
    }

    #[test]
    fn scans_skip_records_whose_owners_the_requester_may_not_see() {
        let t = table();
        // Record k belongs to ports k % 10 and k % 7: a requester seeing
        // ports 0-4 sees the records whose both owners are below 5.
        let sees = |g: Guid| g.0 < 5;
        let want: Vec<u32> = (0..100u32).filter(|k| k % 10 < 5 && k % 7 < 5).collect();
        let q = rec(0, 0, 0);
        let mut query = Query::new(t.spec(), &q.0, 0, true, false, 1 << 20).unwrap();
        t.scan(&mut query, sees);
        let (bytes, n) = query.finish().unwrap();
        let got: Vec<u32> = bytes.chunks(16).map(|c| u32::from_be_bytes(c[6..10].try_into().unwrap())).collect();
        assert_eq!((n, got), (want.len(), want));
        // Through the index too: key 7 is records 7 (owners 7, 0) and 57
        // (7, 1); neither is seen.
        let q7 = rec(7, 0, 0);
        let mut query = Query::new(t.spec(), &q7.0, 0b001, true, false, 1 << 20).unwrap();
        t.scan(&mut query, sees);
        assert_eq!(query.finish().unwrap().1, 0);
        // Key 20: records 20 (0, 6) and 70 (0, 0); only 70 is seen.
        let q20 = rec(20, 0, 0);
        let mut query = Query::new(t.spec(), &q20.0, 0b001, true, true, 1 << 20).unwrap();
        t.scan(&mut query, sees);
        let (bytes, n) = query.finish().unwrap();
        assert_eq!((n, &bytes[6..10]), (1, &70u32.to_be_bytes()[..]));
    }

    #[test]
    fn component_values_read_any_alignment() {
        let b = [0b1010_1100, 0xFF];
        assert_eq!(component_value(Component::at(0, 2, 4), &b), Some(0b1011));
        assert_eq!(component_value(Component::bytes(0, 2), &b), Some(0xACFF));
        assert_eq!(component_value(Component::bytes(1, 2), &b), None);
        let mut c = b;
        zero_component(Component::at(0, 4, 8), &mut c);
        assert_eq!(c, [0b1010_0000, 0x0F]);
    }
}
