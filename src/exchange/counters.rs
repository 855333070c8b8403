//! What the transaction layer counts, per MAD kind: sends, retries,
//! timeouts, answers, strays. Kept apart from the transaction table so the
//! table reads as the protocol and these read as the bookkeeping that
//! `/metrics`, `/status` and the benchmarks show.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use crate::mad::{AttributeId, MadHeader, Method, MgmtClass};

/// The key benchmarks group counters by: management class, attribute and
/// request method (a response is filed under the method it answers).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize)]
pub struct MadKey {
    pub class: u8,
    pub attribute: u16,
    pub method: u8,
}

impl MadKey {
    /// The key of a MAD header; the response bit is cleared so a GetResp
    /// counts under Get.
    pub fn of<T: AsRef<[u8]>>(h: &MadHeader<T>) -> Self {
        let method = u8::from(h.method());
        let method = if method & 0x80 != 0 { method & 0x7f } else { method };
        MadKey { class: h.mgmt_class().into(), attribute: h.attribute_id().into(), method }
    }
    pub fn class(&self) -> MgmtClass {
        self.class.into()
    }
    pub fn attribute(&self) -> AttributeId {
        self.attribute.into()
    }
    pub fn method(&self) -> Method {
        self.method.into()
    }
}

impl fmt::Display for MadKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{:?} {:?} {:?}", self.class(), self.method(), self.attribute())
    }
}

/// Counters for one [`MadKey`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, serde::Serialize)]
pub struct MadCounters {
    /// MADs put on the wire, retries and unsolicited sends included.
    pub sent: u64,
    /// Of `sent`, the re-sends after a timeout.
    pub retries: u64,
    /// Attempts whose timer expired (each leads to a retry or a failure).
    pub timeouts: u64,
    /// Transactions given up after the last retry.
    pub failed: u64,
    /// Responses that completed a transaction.
    pub responses: u64,
    /// Of `responses`, those answering an earlier attempt than the last.
    pub late: u64,
    /// Responses that matched no live transaction (dropped).
    pub strays: u64,
    /// Requests, traps and reports from others, and SA-class responses
    /// that answer none of ours (for the SA agent).
    pub unsolicited: u64,
    /// RMPP segments received for a transfer being reassembled (repeats
    /// included).
    pub segments: u64,
    /// RMPP ACKs and ABORTs sent by our receivers (also in `sent`).
    pub acks: u64,
}

/// A snapshot of the transaction layer's counters and gauges.
#[derive(Debug, Clone, Default, PartialEq, Eq, serde::Serialize)]
pub struct TxnStats {
    /// Serialised as a list of `{class, attribute, method, name, sent, ...}`
    /// (JSON maps need string keys).
    #[serde(serialize_with = "by_mad_as_list")]
    pub by_mad: BTreeMap<MadKey, MadCounters>,
    /// Received buffers too short to hold a MAD header.
    pub malformed: u64,
    /// Sum and maximum of response times (first transmit of the answered
    /// attempt to its response), for the mean RTT.
    pub rtt_total: Duration,
    pub rtt_max: Duration,
    /// Transactions on the wire now.
    pub in_flight: usize,
    /// Transactions waiting for window space (new and retries).
    pub queued: usize,
    /// Transactions whose RMPP answer is being reassembled.
    pub receiving: usize,
}

fn by_mad_as_list<S: serde::Serializer>(m: &BTreeMap<MadKey, MadCounters>, s: S) -> Result<S::Ok, S::Error> {
    #[derive(serde::Serialize)]
    struct Entry<'a> {
        #[serde(flatten)]
        key: &'a MadKey,
        name: String,
        #[serde(flatten)]
        counters: &'a MadCounters,
    }
    s.collect_seq(m.iter().map(|(key, counters)| Entry { key, name: key.to_string(), counters }))
}

impl TxnStats {
    /// The counters summed over every key.
    pub fn totals(&self) -> MadCounters {
        let mut t = MadCounters::default();
        for c in self.by_mad.values() {
            t.sent += c.sent;
            t.retries += c.retries;
            t.timeouts += c.timeouts;
            t.failed += c.failed;
            t.responses += c.responses;
            t.late += c.late;
            t.strays += c.strays;
            t.unsolicited += c.unsolicited;
            t.segments += c.segments;
            t.acks += c.acks;
        }
        t
    }
}
