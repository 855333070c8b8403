//! Typed SA queries over any [`Transport`]: a SubnAdmGet goes to the SM's
//! LID on QP1, and what comes back is checked to answer it.
//!
//! Only single-record Gets so far (one MAD each way, no RMPP): what a tool
//! needs to read the SL, MTU and rate of one path.

use super::{Datagram, MadAddress, Transport, TransportError};
use crate::mad::header::status;
use crate::mad::sa::{path_mask, sa_status, SaMad, PATH_RECORD_LEN};
use crate::mad::{
    AttributeId, MadHeader, MadHeaderRepr, Method, MgmtClass, PathRecordRepr, SaAttributeId, WireError, MAD_SIZE,
};
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

/// SA queries from one port, all with one SM_Key.
#[derive(Clone)]
pub struct SaClient<T> {
    transport: T,
    sa: MadAddress,
    sm_key: u64,
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

    /// The SA's address (the SM LID the port reports).
    pub fn sa_lid(&self) -> Lid {
        self.sa.lid
    }

    /// The path from `slid` to `dlid` (SubnAdmGet(PathRecord) with SLID
    /// and DLID in the component mask).
    pub async fn path_record(&self, slid: Lid, dlid: Lid) -> Result<PathRecordRepr, SaError> {
        let query = format!("PathRecord {}->{}", slid.0, dlid.0);
        let record = PathRecordRepr { slid: slid.0, dlid: dlid.0, ..Default::default() };
        let mut data = [0u8; PATH_RECORD_LEN];
        record.emit(&mut data).map_err(|error| SaError::Wire { query: query.clone(), error })?;
        let response = self.get(SaAttributeId::PathRecord, path_mask::SLID | path_mask::DLID, &data, &query).await?;
        PathRecordRepr::parse_bytes(&response).map_err(|error| SaError::Wire { query, error })
    }

    /// One SubnAdmGet; returns the response's SA data.
    async fn get(&self, attribute: SaAttributeId, mask: u64, data: &[u8], query: &str) -> Result<Vec<u8>, SaError> {
        let mut mad = vec![0u8; MAD_SIZE];
        let header = MadHeaderRepr {
            mgmt_class: MgmtClass::SubnAdm,
            class_version: 2,
            method: Method::Get,
            status: 0,
            class_specific: 0,
            transaction_id: 0,
            attribute_id: AttributeId::from(u16::from(attribute)),
            attribute_modifier: 0,
        };
        header.emit(&mut MadHeader::new_checked(&mut mad[..]).expect("a whole MAD holds a header"));
        let mut sa = SaMad::new_checked(&mut mad[..]).expect("a whole MAD holds the SA header");
        sa.set_sm_key(self.sm_key);
        sa.set_component_mask(mask);
        sa.data_mut()[..data.len()].copy_from_slice(data);

        let reply = self.transport.request(Datagram { addr: self.sa, mad }).await?;
        let wire = |error| SaError::Wire { query: query.to_string(), error };
        let h = MadHeaderRepr::parse(&MadHeader::new_checked(&reply.mad[..]).map_err(wire)?).map_err(wire)?;
        if h.status != 0 {
            return Err(SaError::Status { query: query.to_string(), status: h.status });
        }
        let got = u16::from(h.attribute_id);
        if h.method != Method::GetResp || got != u16::from(attribute) {
            return Err(SaError::Unexpected { query: query.to_string(), method: h.method, attribute: got });
        }
        let view = SaMad::new_checked(&reply.mad[..]).map_err(wire)?;
        Ok(view.data().to_vec())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::transport::{LocalPort, TransportStats};
    use crate::types::Guid;
    use std::future::Future;
    use std::sync::Mutex;

    /// Answers every request with a canned GetResp built from the request.
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
            LocalPort {
                ca_name: "fake".into(),
                port_num: 1,
                port_guid: Guid(1),
                node_guid: Guid(1),
                lid: Lid(3),
                sm_lid: Lid(self.sm_lid),
            }
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
        assert_eq!(&sent.mad[48..56], &[0, 0, 0, 0, 0, 0, 0, 0x30], "SLID and DLID in the mask");
        assert_eq!(&sent.mad[56 + 40..56 + 44], &[0, 9, 0, 3]);
    }

    #[tokio::test]
    async fn refusals_are_named() {
        assert!(matches!(SaClient::new(fake(0, 0, 0)), Err(SaError::NoSm)));
        let client = SaClient::new(fake(7, 0x0300, 0)).unwrap();
        let e = client.path_record(Lid(3), Lid(9)).await.unwrap_err().to_string();
        assert!(e.contains("PathRecord 3->9") && e.contains("ERR_NO_RECORDS"), "{e}");
    }
}
