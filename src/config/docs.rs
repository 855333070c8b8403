//! `ibsm config --print-default`: every key of every section with its
//! default and a one-line comment, as TOML that reads back as
//! `Config::default()`.
//!
//! The values come from serializing `Config::default()`, so they cannot
//! drift from the code; only the comments live here. A key without a
//! comment, or a key the parser accepts that the output does not show,
//! fails the tests below.

use super::Config;

/// One line per section, printed above its header.
const SECTIONS: &[(&str, &str)] = &[
    ("sm", "The subnet manager. Keys follow OpenSM's opensm.conf where one exists."),
    ("qos", "Fabric QoS tables (OpenSM qos_* keys); engines that use VLs program SL-to-VL tables anyway."),
    ("transport", "MADs on the wire: windows, timeouts, retries."),
    ("port", "Which local port the SM runs on; nothing set = the first active IB port."),
    ("metrics", "The Prometheus endpoint."),
    ("sa", "The subnet administrator: answers only as MASTER after its first sweep."),
    ("log", "Logging; IBSM_LOG (tracing's filter syntax), when set, wins over this section."),
    ("perfmgr", "The performance manager: PortCounters of every port, exported on /metrics."),
];

/// `section.key` and its comment. Aliases are not listed: the output
/// shows each key under its own name.
const KEYS: &[(&str, &str)] = &[
    (
        "sm.sweep_interval_s",
        "seconds between periodic sweeps, 0 = on traps only (opensm: sweep_interval); live on SIGHUP",
    ),
    ("sm.priority", "election priority 0-15, higher wins (opensm: sm_priority, also accepted here)"),
    ("sm.sm_key", "SMInfo.SM_Key, the SMs' shared secret (opensm: sm_key)"),
    (
        "sm.sminfo_polling_timeout_ms",
        "how often a standby polls the master (opensm: sminfo_polling_timeout, 10000 there)",
    ),
    ("sm.polling_retry_number", "missed polls in a row before a standby takes over (opensm: polling_retry_number)"),
    ("sm.master_preemption", "hand the subnet to a returning higher-priority SM; false = only on SIGUSR1"),
    ("sm.lmc", "LID mask control 0-7: 2^lmc LIDs per port (opensm: lmc)"),
    ("sm.lmc_esp0", "give switch enhanced port 0 the LMC too (opensm: lmc_esp0)"),
    ("sm.reassign_lids", "ignore current LIDs and guid2lid on the first sweep (opensm: reassign_lids, -r)"),
    ("sm.subnet_prefix", "upper 64 bits of every port GID (opensm: subnet_prefix)"),
    ("sm.m_key", "subnet-wide M_Key, 0 = no protection (opensm: m_key)"),
    ("sm.m_key_protection_level", "PortInfo.M_KeyProtectBits 0-3 (opensm: m_key_protection_level)"),
    ("sm.m_key_lease_period", "PortInfo.M_KeyLeasePeriod in seconds, 0 = never expires (opensm: m_key_lease_period)"),
    ("sm.subnet_timeout", "PortInfo.SubnetTimeOut 0-31: 4.096 us * 2^n, 18 = about 1 s (opensm: subnet_timeout)"),
    ("sm.packet_life_time", "SwitchInfo.LifeTimeValue 0-31 (opensm: packet_life_time)"),
    ("sm.max_op_vls", "VLCap code 1-5 capping PortInfo.OperationalVLs: 1 = VL0, 5 = VL0-14 (opensm: max_op_vls)"),
    ("sm.sm_sl", "SL of SMP traffic toward the SM, PortInfo.MasterSMSL (opensm: sm_sl)"),
    ("sm.cache_dir", "where guid2lid is kept, in OpenSM's format (opensm: $OSM_CACHE_DIR); --cache-dir overrides"),
    (
        "sm.routing_engine",
        "engines tried in order: auto (picked by topology, checked for credit loops; last only), minhop, updn, \
         dnup, ftree, sssp, dfsssp, dor, nue (opensm: routing_engine)",
    ),
    (
        "sm.partition_config_file",
        "OpenSM's partitions.conf (opensm: partition_config_file, -P); unset = all in 0x7fff; live on SIGHUP",
    ),
    ("sm.part_enforce", "partition enforcement on switch ports: both, in, out, off (opensm: part_enforce); live"),
    ("sm.allow_both_pkeys", "a port may hold the full and the limited key of one partition (opensm: allow_both_pkeys)"),
    (
        "sm.flap_downs",
        "a cable down this many times in flap_window_s is held down (not routed, ports left INIT); 0 = off",
    ),
    ("sm.flap_window_s", "the window flap_downs counts in, seconds"),
    ("sm.flap_hold_s", "how long a flapping cable is held down, seconds; then it is looked at again"),
    ("qos.enabled", "program VLArbitration tables and VLHighLimit (opensm: qos); [qos] is live on SIGHUP"),
    ("qos.high_limit", "PortInfo.VLHighLimit (opensm: qos_high_limit)"),
    ("qos.vlarb_high", "high-priority arbitration table, VL:weight pairs, VL 0-14 (opensm: qos_vlarb_high)"),
    ("qos.vlarb_low", "low-priority arbitration table (opensm: qos_vlarb_low)"),
    ("qos.sl2vl", "16 VLs, one per SL, 15 = drop (opensm: qos_sl2vl)"),
    ("transport.window", "SMPs in flight at once (opensm: max_wire_smps, 4 there)"),
    ("transport.gmp_window", "GMPs in flight at once per management class (SA, PerfMgt, ...)"),
    ("transport.timeout_ms", "per-attempt MAD timeout (opensm: transaction_timeout)"),
    ("transport.retries", "retries after the first attempt (opensm: transaction_retries)"),
    (
        "transport.smp_lost_after_ms",
        "an SMP unanswered this long is presumed lost and frees its window slot (its timeout still runs); 0 = off (opensm: max_smps_timeout, in µs)",
    ),
    (
        "transport.smp_window_with_lost",
        "SMPs out at once counting those presumed lost, at least transport.window (opensm: max_wire_smps2)",
    ),
    (
        "transport.trap_rate_limit",
        "traps taken per second from one source LID, the rest dropped unanswered and counted; 0 = no limit",
    ),
    ("port.ca", "HCA name, e.g. \"mlx5_0\"; unset = the first with an active port"),
    ("port.port", "port number on that HCA"),
    ("port.guid", "or the port by GUID (opensm: guid)"),
    ("metrics.listen", "address:port of the Prometheus endpoint; \"\" = none"),
    ("sa.sa_key", "SM_Key that makes a requester trusted; 0 = untrusted, any other key is dropped (opensm: sa_key)"),
    ("sa.not_serving", "standby / before the first sweep: \"busy\" (MAD status 0x0001) or \"silent\" (OpenSM)"),
    ("sa.max_rmpp_sends", "multi-MAD answers being sent at once; more get ERR_NO_RESOURCES"),
    ("sa.max_rmpp_sends_per_requester", "of those, to one requester LID (opensm: no such cap)"),
    ("sa.max_answer_bytes", "the largest answer; a query matching more gets ERR_NO_RESOURCES"),
    ("sa.max_rmpp_bytes", "bytes of all multi-MAD answers in flight together"),
    ("sa.max_services_per_port", "ServiceRecords registered through one port"),
    ("sa.max_services", "ServiceRecords in all"),
    ("sa.max_subscriptions_per_port", "InformInfo subscriptions of one port"),
    ("sa.max_subscriptions", "InformInfo subscriptions in all"),
    ("sa.max_alias_guids_per_port", "alias GUIDs (GUIDInfoRecord Set) of one port"),
    ("sa.max_alias_guids", "alias GUIDs in all"),
    ("sa.max_mcast_groups", "multicast groups, well-known ones included (opensm: MLIDs only)"),
    ("sa.max_mcast_members_per_group", "members of one group (the IPoIB broadcast group holds every host)"),
    ("sa.max_mcast_groups_per_port", "groups one port may be a member of: a join flood fills only its own share"),
    ("sa.max_mcast_members", "memberships of all groups together"),
    (
        "sa.consolidate_ipv6_snm_req",
        "IPv6 solicited-node groups of one scope and partition share one MLID (opensm: consolidate_ipv6_snm_req)",
    ),
    ("sa.max_reports", "Reports waiting for a ReportResp, in all"),
    ("sa.max_reports_per_subscriber", "of those, to one subscriber LID (opensm: no such cap)"),
    ("sa.report_timeout_ms", "a Report is resent after this long without a ReportResp"),
    ("sa.report_retries", "resends of a Report before giving up"),
    ("sa.rmpp_timeout_ms", "RMPP: wait for an ACK before a window is resent"),
    ("sa.rmpp_retries", "RMPP: resends of a window before the sender aborts"),
    ("sa.rmpp_total_timeout_ms", "RMPP: the longest one answer may take (the kernel's receiver gives up after 40 s)"),
    ("sa.max_queued", "answers waiting to be sent; more are dropped and counted"),
    ("sa.log_period_s", "at most one log line per reason per period for floods and drops"),
    ("sa.mirror_interval_s", "a standby copies the master's services, subscriptions, alias GUIDs this often; 0 = off"),
    ("sa.state_sync", "the master pushes each SA change to ibsm standbys at once; off: a takeover re-registers every client"),
    ("perfmgr.enabled", "poll every port's PortCounters/PortCountersExtended (opensm: perfmgr, off there)"),
    (
        "perfmgr.interval_s",
        "seconds from one polling cycle to the next (opensm: perfmgr_sweep_time_s, 180 there); live",
    ),
    (
        "perfmgr.max_in_flight",
        "PerfMgt queries outstanding at once (opensm: perfmgr_max_outstanding_queries, 500 there)",
    ),
    ("perfmgr.on_standby", "also poll while this SM is a standby"),
    ("perfmgr.error_threshold", "an error counter rising by more than this in one cycle is logged as an error jump"),
    ("perfmgr.error_rate_factor", "or rising this many times faster than the cycle before; 0 = off"),
    (
        "perfmgr.port_series",
        "ports /metrics exports one by one: errors (error counters of ports with errors), all, none; live",
    ),
    (
        "perfmgr.port_series_max_ports",
        "with errors: the most erring ports exported, at most (fabric sums always; every port in /dump/port-counters)",
    ),
    ("log.level", "off, error, warn, info, debug, trace, or directives like \"info,ibsm::sa=debug\"; live on SIGHUP"),
];

/// Keys whose default is "unset": TOML has no null, so they are shown
/// commented out, with an example value.
const UNSET_EXAMPLES: &[(&str, &str)] = &[
    ("sm.partition_config_file", "\"/etc/opensm/partitions.conf\""),
    ("port.ca", "\"mlx5_0\""),
    ("port.port", "1"),
    ("port.guid", "\"0x0002c903000a1b2c\""),
];

/// The comment for `section.key`, if there is one.
pub fn comment(key: &str) -> Option<&'static str> {
    KEYS.iter().find(|(k, _)| *k == key).map(|(_, c)| *c)
}

/// Every key of every section with its default value, as TOML.
pub fn default_toml() -> String {
    let body = toml::to_string(&Config::default()).expect("the default config serializes");
    let mut out = String::from(
        "# ibsm configuration: every key with its default (`ibsm config --print-default`).\n\
         # Every key is optional. `ibsm config --check FILE` validates a file;\n\
         # `ibsm config --from-opensm opensm.conf` converts OpenSM's.\n",
    );
    let mut section = String::new();
    let flush_unset = |out: &mut String, section: &str| {
        for (key, example) in UNSET_EXAMPLES {
            if let Some(name) = key.strip_prefix(section).and_then(|k| k.strip_prefix('.')) {
                push_comment(out, key);
                out.push_str(&format!("# {name} = {example}\n"));
            }
        }
    };
    for line in body.lines() {
        let trimmed = line.trim();
        if let Some(name) = trimmed.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            flush_unset(&mut out, &section);
            section = name.to_string();
            out.push('\n');
            if let Some((_, about)) = SECTIONS.iter().find(|(s, _)| *s == name) {
                out.push_str(&format!("# {about}\n"));
            }
            out.push_str(line);
            out.push('\n');
        } else if let Some((key, _)) = trimmed.split_once(" = ") {
            push_comment(&mut out, &format!("{section}.{key}"));
            out.push_str(line);
            out.push('\n');
        } else if !trimmed.is_empty() {
            out.push_str(line);
            out.push('\n');
        }
    }
    flush_unset(&mut out, &section);
    out
}

fn push_comment(out: &mut String, key: &str) {
    // A key without a comment still prints; the tests make sure there is none.
    if let Some(c) = comment(key) {
        out.push_str(&format!("# {c}\n"));
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;
    use std::path::Path;

    use super::*;

    /// The keys a `deny_unknown_fields` table accepts, read from serde's
    /// "unknown field `x`, expected one of ..." message.
    fn accepted(section: Option<&str>) -> Vec<String> {
        let doc = match section {
            Some(s) => format!("[{s}]\nno_such_key_for_the_test = 1\n"),
            None => "no_such_key_for_the_test = 1\n".to_string(),
        };
        let err = toml::from_str::<Config>(&doc).unwrap_err().message().to_string();
        let list = err.split_once("expected").map(|(_, l)| l).unwrap_or_else(|| panic!("{err}"));
        list.split('`').skip(1).step_by(2).map(str::to_string).collect()
    }

    /// serde lists aliases among the fields it expects; the output shows
    /// each key once, under its own name.
    const ALIASES: &[&str] = &["sm.sm_priority"];

    #[test]
    fn print_default_reads_back_as_the_default() {
        let text = default_toml();
        assert_eq!(Config::parse(&text, Path::new("default.toml")).unwrap(), Config::default());
    }

    #[test]
    fn every_key_of_the_serialized_default_is_printed_with_a_comment() {
        let text = default_toml();
        let value = toml::Value::try_from(Config::default()).unwrap();
        let mut n = 0;
        for (section, table) in value.as_table().unwrap() {
            for key in table.as_table().unwrap_or_else(|| panic!("{section} is a table")).keys() {
                let full = format!("{section}.{key}");
                assert!(comment(&full).is_some(), "{full} has no comment in docs::KEYS");
                let shown = text.lines().any(|l| l.starts_with(&format!("{key} = ")));
                assert!(shown, "{full} missing from print-default");
                n += 1;
            }
        }
        assert!(n > 50, "only {n} keys");
    }

    #[test]
    fn every_key_the_parser_accepts_is_printed() {
        let text = default_toml();
        let sections = accepted(None);
        assert!(sections.contains(&"sm".to_string()) && sections.contains(&"log".to_string()), "{sections:?}");
        let mut all = BTreeSet::new();
        for section in &sections {
            assert!(text.contains(&format!("\n[{section}]\n")), "[{section}] missing");
            for key in accepted(Some(section)) {
                let full = format!("{section}.{key}");
                if ALIASES.contains(&full.as_str()) {
                    continue;
                }
                let shown =
                    text.lines().any(|l| l.starts_with(&format!("{key} = ")) || l.starts_with(&format!("# {key} = ")));
                assert!(shown, "{full} is accepted but not printed");
                assert!(comment(&full).is_some(), "{full} has no comment");
                all.insert(full);
            }
        }
        // No comment for a key that no longer exists.
        for (key, _) in KEYS {
            assert!(all.contains(*key), "docs::KEYS has {key}, which the parser rejects");
        }
    }

    #[test]
    fn unset_examples_parse_and_differ_from_the_default() {
        // Uncommenting an example gives a valid file that sets the key.
        for (key, example) in UNSET_EXAMPLES {
            let (section, name) = key.split_once('.').unwrap();
            let c = Config::parse(&format!("[{section}]\n{name} = {example}\n"), Path::new("x")).unwrap();
            assert_ne!(c, Config::default(), "{key}");
        }
    }

    #[test]
    fn the_sample_in_deploy_is_print_default() {
        let sample = include_str!("../../deploy/ibsm.toml");
        assert!(
            sample == default_toml(),
            "deploy/ibsm.toml is stale: cargo run -- config --print-default > deploy/ibsm.toml"
        );
    }
}
