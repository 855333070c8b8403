//! Typed SA queries over any [`Transport`]: SubnAdmGet and
//! SubnAdmGetTable go to the SM's LID on QP1, and what comes back is
//! checked to answer them.
//!
//! A GetTable's answer is an RMPP transfer (IBA 13.6) the transport
//! reassembles ([`Transport::request_rmpp`]); its records follow the SA
//! header at AttributeOffset × 8 bytes each (IBA 15.2.1.1). With no records
//! the offset may be 0 (OpenSM sends 0 then); with records it may not, and
//! the records must fill the data exactly.

use super::{Datagram, MadAddress, Transport, TransportError};
use crate::mad::header::status;
use crate::mad::sa::{path_mask, sa_status, SaMad, SaRecord, SA_DATA_OFFSET};
use crate::mad::{AttributeId, MadHeader, MadHeaderRepr, Method, MgmtClass, PathRecordRepr, WireError, MAD_SIZE};
use crate::types::Lid;

/// Why an SA query produced no record.
#[derive(Debug, thiserror::Error)]
pub enum SaError {
    #[error("no SM is known on the local port (its SM LID is 0): nothing to query")]
    NoSm,
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// The SA answered with a non-zero status (IBA 13.4.7, 15.2.1.2).
    #[error("{query}: SA status {status:#06x} ({})", describe(*status))]
    Status { query: String, status: u16 },
    #[error("{query}: the response is {method:?} of attribute {attribute:#06x}")]
    Unexpected { query: String, method: Method, attribute: u16 },
    #[error("{query}: unreadable response: {error}")]
    Wire { query: String, error: WireError },
    /// A GetTableResp whose records cannot be split: an AttributeOffset of
    /// 0 with data, one shorter than a record, or data that is not a whole
    /// number of records.
    #[error("{query}: {data_len} bytes of records at AttributeOffset {attribute_offset} (8-byte words) do not split into {record_len}-byte records")]
    Table { query: String, attribute_offset: u16, data_len: usize, record_len: usize },
}

fn describe(status: u16) -> String {
    let sa = sa_status::code(status);
    let common = status & 0x00FF;
    match (sa, common) {
        (0, _) => status::describe(common).to_string(),
        (_, 0) => sa_status::describe(sa).to_string(),
        _ => format!("{}; {}", sa_status::describe(sa), status::describe(common)),
    }
}

/// The name of a query in messages: record type and its query fields.
fn query_name<R: SaRecord>(method: &str, mask: u64) -> String {
    format!("{method}({:?}) mask {mask:#x}", R::ATTRIBUTE)
}

/// SA queries from one port, all with one SM_Key.
#[derive(Clone)]
pub struct SaClient<T> {
    transport: T,
    sa: MadAddress,
    sm_key: u64,
}

/// A SubnAdm request MAD (IBA 15.2.1.1): `method` of `attribute` with
/// `sm_key` and the component `mask`, the record left zero and TID 0 (a
/// transport assigns its own).
pub fn blank_request(method: Method, attribute: u16, sm_key: u64, mask: u64) -> Vec<u8> {
    let mut mad = vec![0u8; MAD_SIZE];
    let header = MadHeaderRepr {
        mgmt_class: MgmtClass::SubnAdm,
        class_version: 2,
        method,
        status: 0,
        class_specific: 0,
        transaction_id: 0,
        attribute_id: AttributeId::from(attribute),
        attribute_modifier: 0,
    };
    header.emit(&mut MadHeader::new_checked(&mut mad[..]).expect("a whole MAD holds a header"));
    let mut sa = SaMad::new_checked(&mut mad[..]).expect("a whole MAD holds the SA header");
    sa.set_sm_key(sm_key);
    sa.set_component_mask(mask);
    mad
}

/// [`blank_request`] for `R` with `template`'s bytes as the record. Fails
/// only if `R` does not fit in the SA data or cannot be emitted.
pub fn request_mad<R: SaRecord>(method: Method, sm_key: u64, mask: u64, template: &R) -> Result<Vec<u8>, WireError> {
    let mut mad = blank_request(method, R::ATTRIBUTE.into(), sm_key, mask);
    let mut sa = SaMad::new_checked(&mut mad[..]).expect("a whole MAD holds the SA header");
    let data = sa.data_mut();
    if R::LEN > data.len() {
        return Err(WireError::Oversized { what: "SA query record", len: R::LEN, max: data.len() });
    }
    template.emit(&mut data[..R::LEN])?;
    Ok(mad)
}

impl<T: Transport> SaClient<T> {
    /// A client of the SA at the local port's SM LID, SL 0, SM_Key 0 (an
    /// untrusted requester, as an application is).
    pub fn new(transport: T) -> Result<Self, SaError> {
        let sm_lid = transport.local_port().sm_lid;
        if sm_lid == Lid(0) {
            return Err(SaError::NoSm);
        }
        Ok(SaClient { transport, sa: MadAddress::gsi(sm_lid, 0), sm_key: 0 })
    }

    /// A trusted client: every query carries `sm_key`, so an SA whose
    /// SM_Key it is answers with the secret fields (IBA 15.4.5; OpenSM's
    /// `sa_key`).
    pub fn with_sm_key(mut self, sm_key: u64) -> Self {
        self.sm_key = sm_key;
        self
    }

    /// The port the queries go out from.
    pub fn local_port(&self) -> super::LocalPort {
        self.transport.local_port()
    }

    /// The SA's address (the SM LID the port reports).
    pub fn sa_lid(&self) -> Lid {
        self.sa.lid
    }

    /// The path from `slid` to `dlid` (SubnAdmGet(PathRecord) with SLID
    /// and DLID in the component mask).
    pub async fn path_record(&self, slid: Lid, dlid: Lid) -> Result<PathRecordRepr, SaError> {
        let template = PathRecordRepr { slid: slid.0, dlid: dlid.0, ..Default::default() };
        self.get(path_mask::SLID | path_mask::DLID, &template).await
    }

    /// Every path from `slid` to `dlid` (SubnAdmGetTable(PathRecord) with
    /// SLID and DLID in the mask): one per SL/LMC combination the SA
    /// offers.
    pub async fn path_records(&self, slid: Lid, dlid: Lid) -> Result<Vec<PathRecordRepr>, SaError> {
        let template = PathRecordRepr { slid: slid.0, dlid: dlid.0, ..Default::default() };
        self.get_table(path_mask::SLID | path_mask::DLID, &template).await
    }

    /// SubnAdmGet of the one record of type `R` that agrees with `template`
    /// on the components in `mask` (IBA 15.2.1.3).
    pub async fn get<R: SaRecord>(&self, mask: u64, template: &R) -> Result<R, SaError> {
        let query = query_name::<R>("Get", mask);
        let request = self.request::<R>(Method::Get, mask, template, &query)?;
        let reply = self.transport.request(request).await?;
        let data = self.check(&reply, Method::GetResp, R::ATTRIBUTE.into(), &query)?;
        R::parse_bytes(data).map_err(|error| SaError::Wire { query, error })
    }

    /// SubnAdmSet of `record` with the components in `mask` (a
    /// registration: ServiceRecord, InformInfo, GUIDInfoRecord); returns the
    /// record as the SA stored it (IBA 15.2.4: a Set is answered by GetResp).
    pub async fn set<R: SaRecord>(&self, mask: u64, record: &R) -> Result<R, SaError> {
        let query = query_name::<R>("Set", mask);
        let request = self.request::<R>(Method::Set, mask, record, &query)?;
        let reply = self.transport.request(request).await?;
        let data = self.check(&reply, Method::GetResp, R::ATTRIBUTE.into(), &query)?;
        R::parse_bytes(data).map_err(|error| SaError::Wire { query, error })
    }

    /// SubnAdmDelete of `record` with the components in `mask` (ends a
    /// registration: a ServiceRecord, an alias GUID, a multicast
    /// membership); returns the record as the SA held it (IBA 15.2.4: a
    /// Delete is answered by DeleteResp).
    pub async fn delete<R: SaRecord>(&self, mask: u64, record: &R) -> Result<R, SaError> {
        let query = query_name::<R>("Delete", mask);
        let request = self.request::<R>(Method::Delete, mask, record, &query)?;
        let reply = self.transport.request(request).await?;
        let data = self.check(&reply, Method::DeleteResp, R::ATTRIBUTE.into(), &query)?;
        R::parse_bytes(data).map_err(|error| SaError::Wire { query, error })
    }

    /// SubnAdmGetTable of every record of type `R` that agrees with
    /// `template` on the components in `mask`; an empty table is `Ok`.
    pub async fn get_table<R: SaRecord>(&self, mask: u64, template: &R) -> Result<Vec<R>, SaError> {
        let query = query_name::<R>("GetTable", mask);
        let request = self.request::<R>(Method::GetTable, mask, template, &query)?;
        let reply = self.transport.request_rmpp(request).await?;
        let data = self.check(&reply, Method::GetTableResp, R::ATTRIBUTE.into(), &query)?;
        let offset =
            SaMad::new_checked(&reply.mad[..]).map_err(|error| SaError::Wire { query: query.clone(), error })?;
        split_records(data, offset.attribute_offset(), &query)
    }

    /// The request MAD: header, SM_Key, mask and the template record.
    fn request<R: SaRecord>(&self, method: Method, mask: u64, template: &R, query: &str) -> Result<Datagram, SaError> {
        let mad = request_mad(method, self.sm_key, mask, template)
            .map_err(|error| SaError::Wire { query: query.to_string(), error })?;
        Ok(Datagram { addr: self.sa, mad })
    }

    /// Checks that `reply` is a successful `method` of `attribute` and
    /// returns everything after the SA header.
    fn check<'a>(&self, reply: &'a Datagram, method: Method, attribute: u16, query: &str) -> Result<&'a [u8], SaError> {
        let wire = |error| SaError::Wire { query: query.to_string(), error };
        let head = &reply.mad[..reply.mad.len().min(MAD_SIZE)];
        let h = MadHeaderRepr::parse(&MadHeader::new_checked(head).map_err(wire)?).map_err(wire)?;
        if h.status != 0 {
            return Err(SaError::Status { query: query.to_string(), status: h.status });
        }
        let got = u16::from(h.attribute_id);
        if h.method != method || got != attribute {
            return Err(SaError::Unexpected { query: query.to_string(), method: h.method, attribute: got });
        }
        SaMad::new_checked(&reply.mad[..]).map_err(wire)?;
        Ok(&reply.mad[SA_DATA_OFFSET..])
    }
}

/// Splits a GetTableResp's data into records `offset` 8-byte words apart.
fn split_records<R: SaRecord>(data: &[u8], offset: u16, query: &str) -> Result<Vec<R>, SaError> {
    if data.is_empty() {
        return Ok(Vec::new());
    }
    let stride = usize::from(offset) * 8;
    let bad = || SaError::Table {
        query: query.to_string(),
        attribute_offset: offset,
        data_len: data.len(),
        record_len: R::LEN,
    };
    if stride == 0 || stride < R::LEN || !data.len().is_multiple_of(stride) {
        return Err(bad());
    }
    data.chunks_exact(stride)
        .map(|rec| R::parse_bytes(rec).map_err(|error| SaError::Wire { query: query.to_string(), error }))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::sa::PATH_RECORD_LEN;
    use crate::rmpp::{is_rmpp_active, RmppConfig, RmppSender};
    use crate::transport::{DeviceError, LocalPort, MadDevice, MadTransport, TransportStats, TxnConfig};
    use std::collections::HashMap;
    use std::future::Future;
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    fn port(sm_lid: u16) -> LocalPort {
        LocalPort::fake(3, sm_lid)
    }

    /// Answers every request with a canned GetResp built from the request;
    /// has no RMPP (the trait's default `request_rmpp`).
    struct FakeSa {
        sm_lid: u16,
        status: u16,
        sl: u8,
        seen: Mutex<Vec<Datagram>>,
    }

    impl Transport for &'static FakeSa {
        fn request(&self, d: Datagram) -> impl Future<Output = Result<Datagram, TransportError>> + Send {
            self.seen.lock().unwrap().push(d.clone());
            let mut mad = d.mad.clone();
            mad[3] = u8::from(Method::GetResp);
            mad[4..6].copy_from_slice(&self.status.to_be_bytes());
            let rec = &mut mad[56 + 52..56 + 54];
            rec[1] = self.sl;
            let out = Datagram { addr: d.addr, mad };
            async move { Ok(out) }
        }
        fn send(&self, _: Datagram) -> Result<(), TransportError> {
            Ok(())
        }
        fn local_port(&self) -> LocalPort {
            port(self.sm_lid)
        }
        fn stats(&self) -> TransportStats {
            TransportStats::default()
        }
    }

    fn fake(sm_lid: u16, status: u16, sl: u8) -> &'static FakeSa {
        Box::leak(Box::new(FakeSa { sm_lid, status, sl, seen: Mutex::new(Vec::new()) }))
    }

    #[tokio::test]
    async fn path_record_query_is_well_formed_and_answer_read() {
        let sa = fake(7, 0, 5);
        let client = SaClient::new(sa).unwrap();
        let rec = client.path_record(Lid(3), Lid(9)).await.unwrap();
        assert_eq!((rec.slid, rec.dlid, rec.sl), (3, 9, 5));
        let sent = sa.seen.lock().unwrap()[0].clone();
        assert_eq!(sent.addr, MadAddress::gsi(Lid(7), 0));
        assert_eq!(&sent.mad[..4], &[1, 0x03, 2, 0x01], "base 1, SA class, version 2, Get");
        assert_eq!(&sent.mad[16..18], &[0x00, 0x35], "PathRecord");
        assert_eq!(&sent.mad[36..44], &[0; 8], "untrusted: SM_Key 0");
        assert_eq!(&sent.mad[48..56], &[0, 0, 0, 0, 0, 0, 0, 0x30], "SLID and DLID in the mask");
        assert_eq!(&sent.mad[56 + 40..56 + 44], &[0, 9, 0, 3]);
    }

    #[tokio::test]
    async fn refusals_are_named() {
        assert!(matches!(SaClient::new(fake(0, 0, 0)), Err(SaError::NoSm)));
        let client = SaClient::new(fake(7, 0x0300, 0)).unwrap();
        let e = client.path_record(Lid(3), Lid(9)).await.unwrap_err().to_string();
        assert!(e.contains("Get(PathRecord) mask 0x30") && e.contains("ERR_NO_RECORDS"), "{e}");
        // A transport without RMPP cannot run a GetTable.
        let e = client.path_records(Lid(3), Lid(9)).await.unwrap_err();
        assert!(matches!(e, SaError::Transport(TransportError::RmppUnsupported { .. })), "{e}");
    }

    /// Answers a GetTable at once with a canned reassembled MAD: the
    /// request's header as a GetTableResp, `offset` and `data`.
    struct CannedTable {
        offset: u16,
        data: Vec<u8>,
        seen: Mutex<Vec<Datagram>>,
    }

    impl Transport for &'static CannedTable {
        async fn request(&self, _: Datagram) -> Result<Datagram, TransportError> {
            Err(TransportError::Closed)
        }
        fn request_rmpp(&self, d: Datagram) -> impl Future<Output = Result<Datagram, TransportError>> + Send {
            self.seen.lock().unwrap().push(d.clone());
            let mut mad = d.mad[..SA_DATA_OFFSET].to_vec();
            mad[3] = u8::from(Method::GetTableResp);
            mad[44..46].copy_from_slice(&self.offset.to_be_bytes());
            mad.extend_from_slice(&self.data);
            async move { Ok(Datagram { addr: d.addr, mad }) }
        }
        fn send(&self, _: Datagram) -> Result<(), TransportError> {
            Ok(())
        }
        fn local_port(&self) -> LocalPort {
            port(7)
        }
        fn stats(&self) -> TransportStats {
            TransportStats::default()
        }
    }

    fn canned(offset: u16, data: Vec<u8>) -> &'static CannedTable {
        Box::leak(Box::new(CannedTable { offset, data, seen: Mutex::new(Vec::new()) }))
    }

    fn paths(n: u16) -> Vec<PathRecordRepr> {
        (0..n).map(|i| PathRecordRepr { slid: 3, dlid: 100 + i, sl: (i % 16) as u8, ..Default::default() }).collect()
    }

    fn wire(records: &[PathRecordRepr], stride: usize) -> Vec<u8> {
        let mut out = Vec::new();
        for r in records {
            let mut b = r.to_bytes();
            b.resize(stride, 0);
            out.extend_from_slice(&b);
        }
        out
    }

    #[tokio::test]
    async fn tables_are_split_by_attribute_offset() {
        let recs = paths(5);
        let sa = canned(8, wire(&recs, 64));
        let client = SaClient::new(sa).unwrap().with_sm_key(0x1122_3344_5566_7788);
        assert_eq!(client.path_records(Lid(3), Lid(0)).await.unwrap(), recs);
        let sent = sa.seen.lock().unwrap()[0].clone();
        assert_eq!((sent.mad[3], &sent.mad[16..18]), (0x12, &[0x00, 0x35][..]), "GetTable(PathRecord)");
        assert_eq!(&sent.mad[36..44], &0x1122_3344_5566_7788u64.to_be_bytes(), "a trusted client's SM_Key");
        assert_eq!(&sent.mad[48..56], &0x30u64.to_be_bytes());

        // A wider stride than the record (a newer SA's longer records).
        let sa = canned(10, wire(&recs, 80));
        assert_eq!(SaClient::new(sa).unwrap().get_table(0, &PathRecordRepr::default()).await.unwrap(), recs);

        // No records: OpenSM's AttributeOffset is 0 then.
        let sa = canned(0, Vec::new());
        assert_eq!(SaClient::new(sa).unwrap().path_records(Lid(3), Lid(9)).await.unwrap(), vec![]);

        // Records that cannot be split are an error naming the numbers.
        for (offset, data) in [(0, wire(&recs, 64)), (8, wire(&recs, 64)[..300].to_vec()), (4, vec![0; 64])] {
            let sa = canned(offset, data.clone());
            match SaClient::new(sa).unwrap().path_records(Lid(3), Lid(9)).await {
                Err(SaError::Table { attribute_offset, data_len, record_len, .. }) => {
                    assert_eq!((attribute_offset, data_len, record_len), (offset, data.len(), PATH_RECORD_LEN))
                }
                other => panic!("offset {offset}: {other:?}"),
            }
        }
    }

    /// An SA in virtual time behind a real [`MadTransport`]: answers each
    /// GetTable(PathRecord) with `records` through an [`RmppSender`], and
    /// loses the first transmission of segment `lose`.
    struct RmppSa {
        clock: Duration,
        latency: Duration,
        wire: Vec<(Duration, Datagram)>,
        senders: HashMap<u32, RmppSender>,
        table: Vec<u8>,
        lose: Option<u32>,
        seen: Arc<Mutex<SaSeen>>,
    }

    #[derive(Default)]
    struct SaSeen {
        requests: usize,
        acks: usize,
        lost: usize,
        resent: u64,
        done: usize,
    }

    impl RmppSa {
        fn pump(&mut self) {
            let mut seen = self.seen.lock().unwrap();
            for s in self.senders.values_mut() {
                while let Some(m) = s.poll_transmit(self.clock) {
                    let n = u32::from_be_bytes([m[28], m[29], m[30], m[31]]);
                    if m[25] == 1 && Some(n) == self.lose {
                        self.lose = None;
                        seen.lost += 1;
                        continue;
                    }
                    // As the kernel does, the SA's segments carry our TID
                    // with the high bits the client's agent put there.
                    self.wire.push((self.clock + self.latency, Datagram { addr: MadAddress::gsi(Lid(1), 0), mad: m }));
                }
            }
            seen.resent = self.senders.values().map(|s| s.stats().resent).sum();
            seen.done = self.senders.values().filter(|s| s.is_done()).count();
        }
    }

    impl MadDevice for RmppSa {
        fn now(&self) -> Duration {
            self.clock
        }
        fn send(&mut self, d: &Datagram) -> Result<(), DeviceError> {
            let tid = u32::from_be_bytes([d.mad[12], d.mad[13], d.mad[14], d.mad[15]]);
            if is_rmpp_active(&d.mad) {
                self.seen.lock().unwrap().acks += 1;
                assert_eq!(d.addr, MadAddress::gsi(Lid(1), 0), "ACKs go back to the SA's QP1");
                if let Some(s) = self.senders.get_mut(&tid) {
                    s.handle_mad(self.clock, &d.mad).expect("a well-formed ACK");
                }
            } else {
                assert_eq!(d.mad[3], 0x12, "a GetTable");
                self.seen.lock().unwrap().requests += 1;
                let mut template = d.mad[..SA_DATA_OFFSET].to_vec();
                template[3] = 0x92;
                template[8..12].copy_from_slice(&[0, 0, 0, 9]);
                template[44..46].copy_from_slice(&8u16.to_be_bytes());
                let cfg = RmppConfig { segment_timeout: Duration::from_millis(50), ..RmppConfig::default() };
                let s = RmppSender::new(self.clock, &template, self.table.clone(), cfg).unwrap();
                self.senders.insert(tid, s);
            }
            self.pump();
            Ok(())
        }
        fn recv(&mut self, deadline: Duration) -> Result<Option<Datagram>, DeviceError> {
            loop {
                let next_wire = self.wire.iter().enumerate().min_by_key(|(_, w)| w.0).map(|(i, w)| (i, w.0));
                let next_timer = self.senders.values().filter_map(|s| s.poll_timeout()).min();
                let limit = deadline.max(self.clock);
                match (next_wire, next_timer) {
                    (Some((i, at)), t) if at <= limit && t.is_none_or(|t| at <= t) => {
                        self.clock = self.clock.max(at);
                        return Ok(Some(self.wire.swap_remove(i).1));
                    }
                    (_, Some(t)) if t <= limit => {
                        self.clock = self.clock.max(t);
                        let now = self.clock;
                        self.senders.values_mut().for_each(|s| s.handle_timeout(now));
                        self.pump();
                    }
                    _ => {
                        self.clock = limit;
                        return Ok(None);
                    }
                }
            }
        }
        fn local_port(&self) -> LocalPort {
            port(1)
        }
    }

    fn rmpp_sa(records: &[PathRecordRepr], lose: Option<u32>) -> (RmppSa, Arc<Mutex<SaSeen>>) {
        let seen = Arc::new(Mutex::new(SaSeen::default()));
        let sa = RmppSa {
            clock: Duration::ZERO,
            latency: Duration::from_micros(200),
            wire: Vec::new(),
            senders: HashMap::new(),
            table: wire(records, 64),
            lose,
            seen: seen.clone(),
        };
        (sa, seen)
    }

    fn rt() -> tokio::runtime::Runtime {
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap()
    }

    #[test]
    fn a_table_in_many_segments_with_one_lost_arrives_whole() {
        let recs = paths(40);
        let (dev, seen) = rmpp_sa(&recs, Some(3));
        let (t, _unsol) = MadTransport::spawn(dev, TxnConfig::default());
        let client = SaClient::new(t.clone()).unwrap();
        let got = rt().block_on(async {
            tokio::time::timeout(Duration::from_secs(20), client.path_records(Lid(3), Lid(0))).await.expect("in time")
        });
        assert_eq!(got.unwrap(), recs);
        let s = seen.lock().unwrap();
        assert_eq!((s.requests, s.lost), (1, 1), "one query, one lost segment");
        assert!(s.resent >= 1, "the lost segment was sent again: {}", s.resent);
        let c = t.stats().txn.totals();
        assert_eq!(c.responses, 1);
        assert!(c.segments >= 13, "2560 bytes are 13 segments: {}", c.segments);
        assert_eq!(c.acks as usize, s.acks, "every ACK counted");
        assert_eq!(c.sent, 1 + c.acks);
        drop(s);
        // The final ACK reaches the SA and ends its side too (the I/O
        // thread sends it just after the reply).
        let wall = std::time::Instant::now();
        while seen.lock().unwrap().done == 0 {
            assert!(wall.elapsed() < Duration::from_secs(5), "the SA's transfer never ended");
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    #[test]
    fn one_segment_and_empty_tables_through_the_transport() {
        for n in [0u16, 1, 3] {
            let recs = paths(n);
            let (dev, seen) = rmpp_sa(&recs, None);
            let (t, _unsol) = MadTransport::spawn(dev, TxnConfig::default());
            let got = rt().block_on(SaClient::new(t.clone()).unwrap().path_records(Lid(3), Lid(0)));
            assert_eq!(got.unwrap(), recs, "{n} records");
            assert_eq!(seen.lock().unwrap().requests, 1);
            assert_eq!(t.stats().txn.totals().segments, 1, "{n} records fit one segment");
        }
    }
}
