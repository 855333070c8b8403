//! Typed SMP requests over any [`Transport`]: build the SMP, send it as a
//! transaction and check that what came back answers it.

use super::Transport;
use crate::datagram::{Datagram, MadAddress};
pub use crate::exchange::smp::{check_response, describe_status, SmpError, SmpTarget};
use crate::mad::{AttributeId, DrPath, Method, SmpRepr, SMP_DATA_LEN};
use crate::types::Lid;

/// SMP requests with one M_Key in every SMP.
#[derive(Clone)]
pub struct SmpClient<T> {
    transport: T,
    m_key: u64,
}

impl<T: Transport> SmpClient<T> {
    /// A client sending M_Key 0 (what an unconfigured fabric expects).
    pub fn new(transport: T) -> Self {
        SmpClient { transport, m_key: 0 }
    }
    pub fn with_m_key(transport: T, m_key: u64) -> Self {
        SmpClient { transport, m_key }
    }
    pub fn m_key(&self) -> u64 {
        self.m_key
    }
    pub fn set_m_key(&mut self, m_key: u64) {
        self.m_key = m_key;
    }
    pub fn transport(&self) -> &T {
        &self.transport
    }

    /// SubnGet(attr, amod) along a directed route.
    pub async fn dr_get(&self, path: &DrPath, attr: AttributeId, amod: u32) -> Result<SmpRepr, SmpError> {
        self.dr_get_with_data(path, attr, amod, [0; SMP_DATA_LEN]).await
    }

    /// SubnGet(attr, amod) along a directed route with a payload in the
    /// request: a Get(SMInfo) carries the requester's SM_Key, which the
    /// answering SM checks before it shows its own (IBA 14.4.1.1).
    pub async fn dr_get_with_data(
        &self,
        path: &DrPath,
        attr: AttributeId,
        amod: u32,
        data: [u8; SMP_DATA_LEN],
    ) -> Result<SmpRepr, SmpError> {
        self.directed(Method::Get, path, attr, amod, data).await
    }

    /// SubnSet(attr, amod) along a directed route; returns the GetResp.
    pub async fn dr_set(
        &self,
        path: &DrPath,
        attr: AttributeId,
        amod: u32,
        data: [u8; SMP_DATA_LEN],
    ) -> Result<SmpRepr, SmpError> {
        self.directed(Method::Set, path, attr, amod, data).await
    }

    async fn directed(
        &self,
        method: Method,
        path: &DrPath,
        attr: AttributeId,
        amod: u32,
        data: [u8; SMP_DATA_LEN],
    ) -> Result<SmpRepr, SmpError> {
        let smp = SmpRepr::directed_request(method, attr, amod, *path, self.m_key, data);
        self.exchange(SmpTarget::Directed(*path), MadAddress::smi_permissive(), smp).await
    }

    /// SubnGet(attr, amod) to a LID.
    pub async fn lid_get(&self, lid: Lid, attr: AttributeId, amod: u32) -> Result<SmpRepr, SmpError> {
        let smp = SmpRepr::lid_request(Method::Get, attr, amod, self.m_key, [0; SMP_DATA_LEN]);
        self.exchange(SmpTarget::Lid(lid), MadAddress::smi(lid), smp).await
    }

    /// SubnSet(attr, amod) to a LID; returns the GetResp.
    pub async fn lid_set(
        &self,
        lid: Lid,
        attr: AttributeId,
        amod: u32,
        data: [u8; SMP_DATA_LEN],
    ) -> Result<SmpRepr, SmpError> {
        let smp = SmpRepr::lid_request(Method::Set, attr, amod, self.m_key, data);
        self.exchange(SmpTarget::Lid(lid), MadAddress::smi(lid), smp).await
    }

    async fn exchange(&self, path: SmpTarget, addr: MadAddress, smp: SmpRepr) -> Result<SmpRepr, SmpError> {
        let (method, attr, amod) = (smp.header.method, smp.header.attribute_id, smp.header.attribute_modifier);
        let resp = self.transport.request(Datagram { addr, mad: smp.to_bytes().to_vec() }).await?;
        check_response(path, method, attr, amod, &resp.mad)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::smp::SmpRoute;
    use crate::mad::WireError;
    use crate::transport::{LocalPort, TransportError, TransportStats};
    use std::future::Future;
    use std::sync::{Arc, Mutex};

    /// A transport that answers with a canned transformation of the request
    /// and records what it was asked.
    #[derive(Clone)]
    struct Canned {
        asked: Arc<Mutex<Vec<Datagram>>>,
        answer: fn(SmpRepr) -> SmpRepr,
    }

    impl Transport for Canned {
        fn request(&self, d: Datagram) -> impl Future<Output = Result<Datagram, TransportError>> + Send {
            self.asked.lock().unwrap().push(d.clone());
            let r = (self.answer)(SmpRepr::parse_bytes(&d.mad).unwrap());
            async move { Ok(Datagram { addr: d.addr, mad: r.to_bytes().to_vec() }) }
        }
        fn send(&self, _: Datagram) -> Result<(), TransportError> {
            Ok(())
        }
        fn local_port(&self) -> LocalPort {
            LocalPort::fake(1, 1)
        }
        fn stats(&self) -> TransportStats {
            TransportStats::default()
        }
    }

    fn respond(mut r: SmpRepr) -> SmpRepr {
        r.header.method = Method::GetResp;
        if let SmpRoute::Directed { inbound, .. } = &mut r.route {
            *inbound = true;
        }
        r.data[0] = 0x42;
        r
    }

    fn client(answer: fn(SmpRepr) -> SmpRepr) -> (SmpClient<Canned>, Arc<Mutex<Vec<Datagram>>>) {
        let asked = Arc::new(Mutex::new(Vec::new()));
        (SmpClient::with_m_key(Canned { asked: asked.clone(), answer }, 0xfeed), asked)
    }

    fn block<F: Future>(f: F) -> F::Output {
        tokio::runtime::Builder::new_current_thread().build().unwrap().block_on(f)
    }

    #[test]
    fn dr_get_builds_the_request_and_returns_the_answer() {
        let (c, asked) = client(respond);
        let path = DrPath::from_ports(&[1, 3]).unwrap();
        let r = block(c.dr_get(&path, AttributeId::PortInfo, 2)).unwrap();
        assert_eq!(r.data[0], 0x42);
        let sent = SmpRepr::parse_bytes(&asked.lock().unwrap()[0].mad).unwrap();
        assert_eq!(sent.header.method, Method::Get);
        assert_eq!(sent.header.attribute_modifier, 2);
        assert_eq!(sent.m_key, 0xfeed, "the client's M_Key is in every SMP");
        assert_eq!(sent.path(), Some(path));
        assert_eq!(asked.lock().unwrap()[0].addr, MadAddress::smi_permissive());
    }

    #[test]
    fn dr_get_with_data_sends_the_payload_as_a_get() {
        let (c, asked) = client(respond);
        let path = DrPath::from_ports(&[2]).unwrap();
        let mut data = [0u8; 64];
        data[8..16].copy_from_slice(&0x1122_3344_5566_7788u64.to_be_bytes());
        block(c.dr_get_with_data(&path, AttributeId::SmInfo, 0, data)).unwrap();
        let sent = SmpRepr::parse_bytes(&asked.lock().unwrap()[0].mad).unwrap();
        assert_eq!((sent.header.method, sent.header.attribute_id), (Method::Get, AttributeId::SmInfo));
        assert_eq!(&sent.data[8..16], &data[8..16], "the SM_Key rides in the Get");
        assert_eq!(sent.path(), Some(path));
    }

    #[test]
    fn lid_set_carries_data_and_address() {
        let (c, asked) = client(respond);
        let mut data = [0u8; 64];
        data[5] = 9;
        block(c.lid_set(Lid(7), AttributeId::SwitchInfo, 0, data)).unwrap();
        let d = &asked.lock().unwrap()[0];
        assert_eq!(d.addr, MadAddress::smi(Lid(7)));
        let sent = SmpRepr::parse_bytes(&d.mad).unwrap();
        assert_eq!((sent.header.method, sent.data[5]), (Method::Set, 9));
        assert_eq!(sent.route, SmpRoute::Lid);
    }

    #[test]
    fn status_is_an_error_naming_the_attribute_and_path() {
        let (c, _) = client(|r| {
            let mut r = respond(r);
            r.header.status = crate::mad::header::status::INVALID_FIELD;
            r
        });
        let path = DrPath::from_ports(&[4]).unwrap();
        match block(c.dr_get(&path, AttributeId::SwitchInfo, 0)) {
            Err(e @ SmpError::Status { status, attr, path: SmpTarget::Directed(p), .. }) => {
                assert_eq!((status, attr, p), (0x1c, AttributeId::SwitchInfo, path));
                let text = e.to_string();
                assert!(text.contains("0,4") && text.contains("invalid attribute"), "{text}");
            }
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn wrong_attribute_or_method_is_unexpected() {
        let (c, _) = client(|r| {
            let mut r = respond(r);
            r.header.attribute_id = AttributeId::NodeDescription;
            r
        });
        let e = block(c.lid_get(Lid(3), AttributeId::NodeInfo, 0)).unwrap_err();
        assert!(matches!(e, SmpError::Unexpected { got_attr: AttributeId::NodeDescription, .. }), "{e:?}");
        let (c, _) = client(|r| r);
        let e = block(c.lid_get(Lid(3), AttributeId::NodeInfo, 0)).unwrap_err();
        assert!(matches!(e, SmpError::Unexpected { got_method: Method::Get, .. }), "{e:?}");
    }

    #[test]
    fn truncated_response_is_a_wire_error() {
        let r = check_response(SmpTarget::Lid(Lid(1)), Method::Get, AttributeId::NodeInfo, 0, &[1, 0x81, 1]);
        assert!(matches!(r, Err(SmpError::Wire { error: WireError::Truncated { .. }, .. })));
    }
}
