//! The SA's knobs: the `[sa]` section of the configuration file. Every
//! limit here bounds memory or work a requester can make the SA spend.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// What a SA that may not answer yet does with a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Deserialize, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NotServing {
    /// Answer with MAD status BUSY (0x0001, IBA 13.4.7 Table 107: the
    /// responder is temporarily unable to answer; ask again later), so a
    /// requester learns at once instead of timing out.
    Busy,
    /// Answer nothing, as OpenSM does (osm_sa_mad_ctrl.c, citing IBA
    /// C15-0.1.3: no response while the SM is not master or before its
    /// first master sweep).
    Silent,
}

/// The `[sa]` section. Defaults are sized for a 50,000-port fabric on one
/// SM host; see each field.
#[derive(Debug, Clone, Deserialize, Serialize, PartialEq)]
#[serde(deny_unknown_fields, default)]
pub struct SaConfig {
    /// The SM_Key that makes a requester trusted (OpenSM `sa_key`, default
    /// 1 there too). A request with SM_Key 0 is answered as untrusted; one
    /// with any other key is dropped (IBA C15-0.1.5, as OpenSM does).
    #[serde(deserialize_with = "crate::config::hex_u64", serialize_with = "crate::config::hex_string")]
    pub sa_key: u64,
    /// PacketLifeTime and ClassPortInfo.RespTimeValue base, 4.096 µs × 2^n.
    /// Not a key of `[sa]`: the runtime copies `[sm] subnet_timeout`, the
    /// one value OpenSM uses for both.
    #[serde(skip)]
    pub subnet_timeout: u8,
    /// The SM_Key every message of the state stream between SMs carries.
    /// Not a key of `[sa]`: the runtime copies `[sm] sm_key`.
    #[serde(skip)]
    pub sm_key: u64,
    /// What a standby's SA, or the master's before its first sweep, does.
    pub not_serving: NotServing,
    /// Multi-MAD (RMPP) answers being sent at once; one more is refused
    /// with ERR_NO_RESOURCES and counted.
    pub max_rmpp_sends: usize,
    /// Of those, to one requester (by LID), so one busy client cannot
    /// hold every slot; one more is refused with ERR_NO_RESOURCES and
    /// counted. OpenSM has no such cap.
    pub max_rmpp_sends_per_requester: usize,
    /// The largest answer, in bytes of SA data (records × AttributeOffset
    /// × 8). 16 MiB holds every PortInfoRecord of a 50,000-port fabric; a
    /// query that would match more is refused with ERR_NO_RESOURCES before
    /// more than this is built.
    pub max_answer_bytes: usize,
    /// Bytes of all multi-MAD answers in flight together.
    pub max_rmpp_bytes: usize,
    /// ServiceRecords registered through one port, and in all.
    pub max_services_per_port: usize,
    pub max_services: usize,
    /// InformInfo subscriptions of one port, and in all.
    pub max_subscriptions_per_port: usize,
    pub max_subscriptions: usize,
    /// Alias GUIDs (GUIDInfoRecord Set) of one port, and in all.
    pub max_alias_guids_per_port: usize,
    pub max_alias_guids: usize,
    /// Multicast groups (MCMemberRecord joins, IBA 15.2.5.17), the
    /// well-known ones of the partitions included; a join that would
    /// create one more is refused with ERR_NO_RESOURCES. The MLID space
    /// (0xC000 up to the smallest switch's MulticastFDBCap) bounds them
    /// too. OpenSM has no cap but the MLIDs.
    pub max_mcast_groups: usize,
    /// Members of one group (the IPoIB broadcast group holds every host
    /// of its partition, so this is sized for the whole fabric).
    pub max_mcast_members_per_group: usize,
    /// Groups one port is a member of: a port flooding joins fills only
    /// its own share (ERR_NO_RESOURCES past it).
    pub max_mcast_groups_per_port: usize,
    /// Memberships of all groups together.
    pub max_mcast_members: usize,
    /// IPv6 Solicited-Node multicast groups (`ff1s:601b:<P_Key>::1:ffXX:XXXX`,
    /// one per IPv6 host) of one scope and partition share one MLID, as
    /// OpenSM's option of the same name: a fabric of N IPv6 hosts then
    /// spends one MLID on them, not N, at the price of each host's
    /// neighbour solicitations reaching every host of the partition.
    /// Off, as in OpenSM.
    pub consolidate_ipv6_snm_req: bool,
    /// Reports waiting for a ReportResp or a retry, in all; a Report that
    /// finds no room is dropped and counted.
    pub max_reports: usize,
    /// Of those, to one subscriber (by LID), so one that never answers
    /// cannot fill `max_reports` for everyone; past it its Reports are
    /// dropped and counted. OpenSM has no such cap.
    pub max_reports_per_subscriber: usize,
    /// A Report is sent again after this long without a ReportResp.
    pub report_timeout_ms: u64,
    /// Resends after the first Report before giving up.
    pub report_retries: u32,
    /// RMPP: how long a sender waits for an ACK before resending.
    pub rmpp_timeout_ms: u64,
    /// RMPP: resends of a window before the sender gives up (ABORT).
    pub rmpp_retries: u32,
    /// RMPP: the longest one answer may take to send (the kernel's
    /// receiver gives up after 40 s).
    pub rmpp_total_timeout_ms: u64,
    /// Answers waiting for `poll_transmit`; more are dropped and counted
    /// (the runtime drains after every input, so this only fills when
    /// nothing sends).
    pub max_queued: usize,
    /// At most one log line per reason per this many seconds (floods,
    /// drops); counts are always kept in the stats.
    pub log_period_s: u64,
    /// A standby reads the master's ServiceRecords, InformInfoRecords and
    /// GUIDInfoRecords this often (trusted, with `sa_key`, which must be
    /// the master's too) and takes them over if it becomes master
    /// (`crate::sa::mirror`); 0 turns mirroring off. OpenSM has no such
    /// thing: its state survives a failover only through a dump file.
    pub mirror_interval_s: u64,
    /// The master pushes every change of what requesters registered to
    /// each ibsm standby as it happens (`crate::sa::sync`), so a takeover
    /// serves the master's last joins and registrations and sets no
    /// ClientReregister. Off, a standby keeps only the periodic mirror,
    /// and a takeover sets ClientReregister on every port.
    pub state_sync: bool,
}

impl Default for SaConfig {
    fn default() -> Self {
        SaConfig {
            sa_key: 1,
            subnet_timeout: 18,
            sm_key: 0,
            not_serving: NotServing::Busy,
            max_rmpp_sends: 64,
            max_rmpp_sends_per_requester: 4,
            max_answer_bytes: 16 << 20,
            max_rmpp_bytes: 64 << 20,
            max_services_per_port: 64,
            max_services: 16_384,
            max_subscriptions_per_port: 64,
            max_subscriptions: 16_384,
            max_alias_guids_per_port: 127,
            max_alias_guids: 65_536,
            max_mcast_groups: 8192,
            max_mcast_members_per_group: 65_536,
            max_mcast_groups_per_port: 256,
            max_mcast_members: 1 << 20,
            consolidate_ipv6_snm_req: false,
            max_reports: 4096,
            max_reports_per_subscriber: 64,
            report_timeout_ms: 1000,
            report_retries: 3,
            rmpp_timeout_ms: 200,
            rmpp_retries: 3,
            rmpp_total_timeout_ms: 40_000,
            max_queued: 4096,
            log_period_s: 10,
            mirror_interval_s: 10,
            state_sync: true,
        }
    }
}

impl SaConfig {
    pub fn report_timeout(&self) -> Duration {
        Duration::from_millis(self.report_timeout_ms.max(1))
    }
    pub fn rmpp_timeout(&self) -> Duration {
        Duration::from_millis(self.rmpp_timeout_ms.max(1))
    }
    pub fn rmpp_total_timeout(&self) -> Duration {
        Duration::from_millis(self.rmpp_total_timeout_ms.max(1))
    }
    pub fn log_period(&self) -> Duration {
        Duration::from_secs(self.log_period_s)
    }
    /// How often a standby reads the master's SA state; `None` is off.
    pub fn mirror_interval(&self) -> Option<Duration> {
        (self.mirror_interval_s > 0).then(|| Duration::from_secs(self.mirror_interval_s))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_section_parses_with_defaults_for_what_it_omits() {
        let c: SaConfig = toml::from_str("sa_key = \"0x10\"\nnot_serving = \"silent\"\nmax_services = 5").unwrap();
        assert_eq!((c.sa_key, c.not_serving, c.max_services), (0x10, NotServing::Silent, 5));
        assert_eq!(c.max_rmpp_sends, SaConfig::default().max_rmpp_sends);
        assert!(toml::from_str::<SaConfig>("no_such_key = 1").is_err());
        assert!(toml::from_str::<SaConfig>("sa_key = -1").is_err());
    }
}
