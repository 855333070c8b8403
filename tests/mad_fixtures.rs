//! Byte-exact checks of the SMP attribute layouts against two sources that
//! share no code with ibsm: libibmad's field encoders and a live ibsim, both
//! recorded in fixtures/mads/ by tools/fixturegen/regen.sh.
//!
//! For every `<name>.hex` (a 64-byte SMP data area):
//! - parse it with our Repr and compare every field with `<name>.fields`
//!   (values libibmad encoded, or decoded from the ibsim capture), requiring
//!   that every Repr field is listed;
//! - emit the Repr and compare with the `.hex` bytes exactly;
//! - for ibsim captures, also compare with smpquery's (or ibroute's) text.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use ibsm::mad::notice::TrapDetails;
use ibsm::mad::*;

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/mads")
}

fn read_hex(path: &Path) -> Vec<u8> {
    let text = fs::read_to_string(path).unwrap();
    let digits: String = text
        .lines()
        .filter(|l| !l.trim_start().starts_with('#'))
        .flat_map(|l| l.chars())
        .filter(|c| !c.is_whitespace())
        .collect();
    assert_eq!(digits.len() % 2, 0, "{}: odd number of hex digits", path.display());
    (0..digits.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&digits[i..i + 2], 16).unwrap_or_else(|e| panic!("{}: {e}", path.display())))
        .collect()
}

fn read_fields(path: &Path) -> BTreeMap<String, String> {
    let text = fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.is_empty())
        .map(|l| {
            let (k, v) = l.split_once('=').unwrap_or_else(|| panic!("{}: bad line {l:?}", path.display()));
            (k.to_string(), v.to_string())
        })
        .collect()
}

fn num(s: &str) -> u64 {
    let s = s.trim();
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    }
    .unwrap_or_else(|e| panic!("not a number {s:?}: {e}"))
}

fn list(s: &str) -> Vec<u64> {
    s.split(',').map(num).collect()
}

/// Every field of a Repr as (name, value), named like the .fields files.
type Named = Vec<(String, u64)>;

fn n(name: &str, v: impl Into<u64>) -> (String, u64) {
    (name.to_string(), v.into())
}

fn node_info_fields(r: &NodeInfoRepr) -> Named {
    vec![
        n("base_version", r.base_version),
        n("class_version", r.class_version),
        n("node_type", u8::from(r.node_type)),
        n("num_ports", r.num_ports),
        n("system_image_guid", r.system_image_guid.0),
        n("node_guid", r.node_guid.0),
        n("port_guid", r.port_guid.0),
        n("partition_cap", r.partition_cap),
        n("device_id", r.device_id),
        n("revision", r.revision),
        n("local_port_num", r.local_port_num),
        n("vendor_id", r.vendor_id),
    ]
}

fn port_info_fields(r: &PortInfoRepr) -> Named {
    vec![
        n("m_key", r.m_key),
        n("gid_prefix", r.gid_prefix),
        n("lid", r.lid.0),
        n("master_sm_lid", r.master_sm_lid.0),
        n("capability_mask", r.capability_mask),
        n("diag_code", r.diag_code),
        n("m_key_lease_period", r.m_key_lease_period),
        n("local_port_num", r.local_port_num),
        n("link_width_enabled", r.link_width_enabled),
        n("link_width_supported", r.link_width_supported),
        n("link_width_active", r.link_width_active),
        n("link_speed_supported", r.link_speed_supported),
        n("port_state", u8::from(r.port_state)),
        n("port_physical_state", u8::from(r.port_physical_state)),
        n("link_down_default_state", u8::from(r.link_down_default_state)),
        n("m_key_protect_bits", r.m_key_protect_bits),
        n("lmc", r.lmc),
        n("link_speed_active", r.link_speed_active),
        n("link_speed_enabled", r.link_speed_enabled),
        n("neighbor_mtu", r.neighbor_mtu),
        n("master_sm_sl", r.master_sm_sl),
        n("vl_cap", r.vl_cap),
        n("init_type", r.init_type),
        n("vl_high_limit", r.vl_high_limit),
        n("vl_arbitration_high_cap", r.vl_arbitration_high_cap),
        n("vl_arbitration_low_cap", r.vl_arbitration_low_cap),
        n("init_type_reply", r.init_type_reply),
        n("mtu_cap", r.mtu_cap),
        n("vl_stall_count", r.vl_stall_count),
        n("hoq_life", r.hoq_life),
        n("operational_vls", r.operational_vls),
        n("partition_enforcement_inbound", r.partition_enforcement_inbound),
        n("partition_enforcement_outbound", r.partition_enforcement_outbound),
        n("filter_raw_inbound", r.filter_raw_inbound),
        n("filter_raw_outbound", r.filter_raw_outbound),
        n("m_key_violations", r.m_key_violations),
        n("p_key_violations", r.p_key_violations),
        n("q_key_violations", r.q_key_violations),
        n("guid_cap", r.guid_cap),
        n("client_reregister", r.client_reregister),
        n("multicast_pkey_trap_suppression_enabled", r.multicast_pkey_trap_suppression_enabled),
        n("subnet_timeout", r.subnet_timeout),
        n("resp_time_value", r.resp_time_value),
        n("local_phy_errors", r.local_phy_errors),
        n("overrun_errors", r.overrun_errors),
        n("max_credit_hint", r.max_credit_hint),
        n("link_round_trip_latency", r.link_round_trip_latency),
        n("capability_mask2", r.capability_mask2),
        n("link_speed_ext_active", r.link_speed_ext_active),
        n("link_speed_ext_supported", r.link_speed_ext_supported),
        n("link_speed_ext_enabled", r.link_speed_ext_enabled),
    ]
}

fn switch_info_fields(r: &SwitchInfoRepr) -> Named {
    vec![
        n("linear_fdb_cap", r.linear_fdb_cap),
        n("random_fdb_cap", r.random_fdb_cap),
        n("multicast_fdb_cap", r.multicast_fdb_cap),
        n("linear_fdb_top", r.linear_fdb_top),
        n("default_port", r.default_port),
        n("default_mcast_primary_port", r.default_mcast_primary_port),
        n("default_mcast_not_primary_port", r.default_mcast_not_primary_port),
        n("life_time_value", r.life_time_value),
        n("port_state_change", r.port_state_change),
        n("optimized_sl_to_vl_mapping_programming", r.optimized_sl_to_vl_mapping_programming),
        n("lids_per_port", r.lids_per_port),
        n("partition_enforcement_cap", r.partition_enforcement_cap),
        n("inbound_enforcement_cap", r.inbound_enforcement_cap),
        n("outbound_enforcement_cap", r.outbound_enforcement_cap),
        n("filter_raw_inbound_cap", r.filter_raw_inbound_cap),
        n("filter_raw_outbound_cap", r.filter_raw_outbound_cap),
        n("enhanced_port0", r.enhanced_port0),
        n("multicast_fdb_top", r.multicast_fdb_top),
    ]
}

fn sm_info_fields(r: &SmInfoRepr) -> Named {
    vec![
        n("guid", r.guid.0),
        n("sm_key", r.sm_key),
        n("act_count", r.act_count),
        n("priority", r.priority),
        n("sm_state", u8::from(r.sm_state)),
    ]
}

fn guid_info_fields(r: &GuidInfoBlockRepr) -> Named {
    r.guids.iter().enumerate().map(|(i, g)| n(&format!("guids[{i}]"), g.0)).collect()
}

fn notice_fields(r: &NoticeRepr) -> Named {
    let mut v = vec![
        n("is_generic", r.is_generic),
        n("notice_type", u8::from(r.notice_type)),
        n("producer_type", r.producer_type),
        n("trap_number", r.trap_number),
        n("issuer_lid", r.issuer_lid.0),
        n("notice_count", r.notice_count),
        n("notice_toggle", r.notice_toggle),
    ];
    match r.trap_details() {
        TrapDetails::LinkStateChanged { switch_lid } => v.push(n("trap128.switch_lid", switch_lid.0)),
        TrapDetails::LocalChanges { lid, capability_mask, .. } => {
            v.push(n("trap144.lid", lid.0));
            v.push(n("trap144.capability_mask", capability_mask));
        }
        _ => {}
    }
    v
}

/// Compares a Repr's fields with a .fields map: every listed value must
/// match and every Repr field must be listed. Returns the fields checked.
fn compare(name: &str, ours: &Named, theirs: &BTreeMap<String, String>, skip: &[&str]) -> usize {
    let mut seen = 0;
    for (k, v) in ours {
        match theirs.get(k) {
            Some(t) => {
                assert_eq!(*v, num(t), "{name}: field {k}: ours {v:#x}, fixture {t}");
                seen += 1;
            }
            None => panic!("{name}: fixture does not list field {k}"),
        }
    }
    for k in theirs.keys() {
        assert!(
            ours.iter().any(|(o, _)| o == k) || skip.contains(&k.as_str()),
            "{name}: fixture field {k} has no counterpart"
        );
    }
    seen
}

/// Parses, compares fields, emits and compares bytes for one attribute.
fn check_attr<R>(
    name: &str,
    hex: &[u8],
    fields: &BTreeMap<String, String>,
    to_fields: fn(&R) -> Named,
    skip: &[&str],
) -> R
where
    R: SmpAttribute + std::fmt::Debug + PartialEq,
{
    let r = R::parse_data(hex).unwrap_or_else(|e| panic!("{name}: {e}"));
    compare(name, &to_fields(&r), fields, skip);
    assert_eq!(&r.to_data()[..], hex, "{name}: emit differs from fixture bytes");
    r
}

/// `Name:....value` lines of smpquery output.
fn smpquery_lines(path: &Path) -> Vec<(String, String)> {
    fs::read_to_string(path)
        .unwrap()
        .lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with('\t'))
        .filter_map(|l| {
            let (k, v) = l.split_once(':')?;
            Some((k.trim().to_string(), v.trim_start_matches('.').trim().to_string()))
        })
        .collect()
}

/// libibmad's dump names -> ours.
fn smpquery_name(attr: &str, name: &str) -> Option<&'static str> {
    Some(match (attr, name) {
        ("nodeinfo", "BaseVers") => "base_version",
        ("nodeinfo", "ClassVers") => "class_version",
        ("nodeinfo", "NodeType") => "node_type",
        ("nodeinfo", "NumPorts") => "num_ports",
        ("nodeinfo", "SystemGuid") => "system_image_guid",
        ("nodeinfo", "Guid") => "node_guid",
        ("nodeinfo", "PortGuid") => "port_guid",
        ("nodeinfo", "PartCap") => "partition_cap",
        ("nodeinfo", "DevId") => "device_id",
        ("nodeinfo", "Revision") => "revision",
        ("nodeinfo", "LocalPort") => "local_port_num",
        ("nodeinfo", "VendorId") => "vendor_id",
        ("portinfo", "GidPrefix") => "gid_prefix",
        ("portinfo", "Lid") => "lid",
        ("portinfo", "SMLid") => "master_sm_lid",
        ("portinfo", "CapMask") => "capability_mask",
        ("portinfo", "DiagCode") => "diag_code",
        ("portinfo", "MkeyLeasePeriod") => "m_key_lease_period",
        ("portinfo", "LocalPort") => "local_port_num",
        ("portinfo", "LinkWidthEnabled") => "link_width_enabled",
        ("portinfo", "LinkWidthSupported") => "link_width_supported",
        ("portinfo", "LinkWidthActive") => "link_width_active",
        ("portinfo", "LinkSpeedSupported") => "link_speed_supported",
        ("portinfo", "LinkState") => "port_state",
        ("portinfo", "PhysLinkState") => "port_physical_state",
        ("portinfo", "LinkDownDefState") => "link_down_default_state",
        ("portinfo", "ProtectBits") => "m_key_protect_bits",
        ("portinfo", "LMC") => "lmc",
        ("portinfo", "LinkSpeedActive") => "link_speed_active",
        ("portinfo", "LinkSpeedEnabled") => "link_speed_enabled",
        ("portinfo", "NeighborMTU") => "neighbor_mtu",
        ("portinfo", "SMSL") => "master_sm_sl",
        ("portinfo", "VLCap") => "vl_cap",
        ("portinfo", "InitType") => "init_type",
        ("portinfo", "VLHighLimit") => "vl_high_limit",
        ("portinfo", "VLArbHighCap") => "vl_arbitration_high_cap",
        ("portinfo", "VLArbLowCap") => "vl_arbitration_low_cap",
        ("portinfo", "InitReply") => "init_type_reply",
        ("portinfo", "MtuCap") => "mtu_cap",
        ("portinfo", "VLStallCount") => "vl_stall_count",
        ("portinfo", "HoqLife") => "hoq_life",
        ("portinfo", "OperVLs") => "operational_vls",
        ("portinfo", "PartEnforceInb") => "partition_enforcement_inbound",
        ("portinfo", "PartEnforceOutb") => "partition_enforcement_outbound",
        ("portinfo", "FilterRawInb") => "filter_raw_inbound",
        ("portinfo", "FilterRawOutb") => "filter_raw_outbound",
        ("portinfo", "MkeyViolations") => "m_key_violations",
        ("portinfo", "PkeyViolations") => "p_key_violations",
        ("portinfo", "QkeyViolations") => "q_key_violations",
        ("portinfo", "GuidCap") => "guid_cap",
        ("portinfo", "ClientReregister") => "client_reregister",
        ("portinfo", "McastPkeyTrapSuppressionEnabled") => "multicast_pkey_trap_suppression_enabled",
        ("portinfo", "SubnetTimeout") => "subnet_timeout",
        ("portinfo", "RespTimeVal") => "resp_time_value",
        ("portinfo", "LocalPhysErr") => "local_phy_errors",
        ("portinfo", "OverrunErr") => "overrun_errors",
        ("portinfo", "MaxCreditHint") => "max_credit_hint",
        ("portinfo", "RoundTrip") => "link_round_trip_latency",
        ("portinfo", "CapabilityMask2") => "capability_mask2",
        ("portinfo", "LinkSpeedExtActive") => "link_speed_ext_active",
        ("portinfo", "LinkSpeedExtSupported") => "link_speed_ext_supported",
        ("portinfo", "LinkSpeedExtEnabled") => "link_speed_ext_enabled",
        ("switchinfo", "LinearFdbCap") => "linear_fdb_cap",
        ("switchinfo", "RandomFdbCap") => "random_fdb_cap",
        ("switchinfo", "McastFdbCap") => "multicast_fdb_cap",
        ("switchinfo", "LinearFdbTop") => "linear_fdb_top",
        ("switchinfo", "DefPort") => "default_port",
        ("switchinfo", "DefMcastPrimPort") => "default_mcast_primary_port",
        ("switchinfo", "DefMcastNotPrimPort") => "default_mcast_not_primary_port",
        ("switchinfo", "LifeTime") => "life_time_value",
        ("switchinfo", "StateChange") => "port_state_change",
        ("switchinfo", "OptSLtoVLMapping") => "optimized_sl_to_vl_mapping_programming",
        ("switchinfo", "LidsPerPort") => "lids_per_port",
        ("switchinfo", "PartEnforceCap") => "partition_enforcement_cap",
        ("switchinfo", "InboundPartEnf") => "inbound_enforcement_cap",
        ("switchinfo", "OutboundPartEnf") => "outbound_enforcement_cap",
        ("switchinfo", "FilterRawInbound") => "filter_raw_inbound_cap",
        ("switchinfo", "FilterRawOutbound") => "filter_raw_outbound_cap",
        ("switchinfo", "EnhancedPort0") => "enhanced_port0",
        ("switchinfo", "MulticastFDBTop") => "multicast_fdb_top",
        _ => return None,
    })
}

/// smpquery's text for one value, as the raw code, when it names a single
/// value. Multi-value forms ("1X or 4X") return None and are covered by the
/// libibmad-decoded .fields instead.
fn smpquery_value(field: &str, text: &str) -> Option<u64> {
    if text.contains(" or ") || text == "<not displayed>" {
        return None;
    }
    if let Some(h) = text.strip_prefix("0x") {
        return u64::from_str_radix(h, 16).ok();
    }
    if let Ok(v) = text.parse::<u64>() {
        return Some(match field {
            "neighbor_mtu" | "mtu_cap" => port_info::mtu::from_bytes(v as u32)? as u64,
            _ => v,
        });
    }
    let named = match (field, text) {
        ("node_type", "Channel Adapter") => 1,
        ("node_type", "Switch") => 2,
        ("node_type", "Router") => 3,
        ("port_state", "Down") => 1,
        ("port_state", "Initialize") => 2,
        ("port_state", "Armed") => 3,
        ("port_state", "Active") => 4,
        ("port_physical_state", "Sleep") => 1,
        ("port_physical_state", "Polling") => 2,
        ("port_physical_state", "Disabled") => 3,
        ("port_physical_state", "PortConfigurationTraining") => 4,
        ("port_physical_state", "LinkUp") => 5,
        ("link_down_default_state", "Sleep") => 1,
        ("link_down_default_state", "Polling") => 2,
        ("link_width_enabled" | "link_width_supported" | "link_width_active", w) => match w {
            "1X" => 1,
            "4X" => 2,
            "8X" => 4,
            "12X" => 8,
            "2X" => 16,
            _ => return None,
        },
        ("link_speed_active" | "link_speed_enabled" | "link_speed_supported", s) => match s {
            "2.5 Gbps" => 1,
            "5.0 Gbps" => 2,
            "10.0 Gbps" => 4,
            _ => return None,
        },
        ("link_speed_ext_active", "No Extended Speed") => 0,
        ("vl_cap" | "operational_vls", vl) => match vl {
            "VL0" => 1,
            "VL0-1" => 2,
            "VL0-3" => 3,
            "VL0-7" => 4,
            "VL0-14" => 5,
            _ => return None,
        },
        _ => return None,
    };
    Some(named)
}

/// Checks a field-table attribute against smpquery's text; returns
/// (compared, skipped).
fn compare_smpquery(attr: &str, name: &str, ours: &Named, path: &Path) -> (usize, usize) {
    let (mut compared, mut skipped) = (0, 0);
    for (k, text) in smpquery_lines(path) {
        let Some(field) = smpquery_name(attr, &k) else {
            assert!(k == "Mkey", "{name}: smpquery field {k} unmapped");
            continue;
        };
        let ours_v = ours.iter().find(|(o, _)| o == field).map(|(_, v)| *v).unwrap();
        match smpquery_value(field, &text) {
            Some(v) => {
                assert_eq!(ours_v, v, "{name}: {field} ours {ours_v:#x}, smpquery says {text:?}");
                compared += 1;
            }
            None => skipped += 1,
        }
    }
    (compared, skipped)
}

/// "   0: 0xffff 0x0000 ..." table lines of smpquery pkeys/guidinfo.
fn smpquery_table(path: &Path) -> Vec<u64> {
    let mut out = Vec::new();
    for l in fs::read_to_string(path).unwrap().lines() {
        let Some((idx, rest)) = l.split_once(':') else {
            continue;
        };
        let Ok(idx) = idx.trim().parse::<usize>() else {
            continue;
        };
        assert_eq!(idx, out.len(), "{}: table index", path.display());
        out.extend(rest.split_whitespace().map(num));
    }
    out
}

#[derive(Default)]
struct Tally {
    files: usize,
    ibsim: usize,
    smpquery_compared: usize,
}

fn check_file(hex_path: &Path, t: &mut Tally) {
    let stem = hex_path.file_stem().unwrap().to_str().unwrap().to_string();
    let (ibsim, rest) = match stem.strip_prefix("ibsim_") {
        Some(r) => (true, r),
        None => (false, stem.as_str()),
    };
    let attr = rest.split('_').next().unwrap();
    let hex = read_hex(hex_path);
    assert_eq!(hex.len(), SMP_DATA_LEN, "{stem}: fixture length");
    let fields = read_fields(&hex_path.with_extension("fields"));
    let smpq = hex_path.with_extension("smpquery.txt");
    let name = stem.as_str();
    t.files += 1;
    t.ibsim += ibsim as usize;

    let ours: Option<Named> = match attr {
        "nodeinfo" => Some(node_info_fields(&check_attr::<NodeInfoRepr>(name, &hex, &fields, node_info_fields, &[]))),
        "portinfo" => Some(port_info_fields(&check_attr::<PortInfoRepr>(name, &hex, &fields, port_info_fields, &[]))),
        "switchinfo" => {
            Some(switch_info_fields(&check_attr::<SwitchInfoRepr>(name, &hex, &fields, switch_info_fields, &[])))
        }
        "sminfo" => Some(sm_info_fields(&check_attr::<SmInfoRepr>(name, &hex, &fields, sm_info_fields, &[]))),
        "guidinfo" => {
            let r = check_attr::<GuidInfoBlockRepr>(name, &hex, &fields, guid_info_fields, &[]);
            if smpq.exists() {
                let table = smpquery_table(&smpq);
                assert!(table.len() >= 8, "{name}: smpquery GUID table");
                for (i, g) in r.guids.iter().enumerate() {
                    assert_eq!(g.0, table[i], "{name}: guid {i} vs smpquery");
                }
                t.smpquery_compared += 8;
            }
            None
        }
        "notice" => {
            let r = check_attr::<NoticeRepr>(name, &hex, &fields, notice_fields, &["data_details"]);
            let dd = fields["data_details"].as_str();
            let want: Vec<u8> =
                (0..dd.len()).step_by(2).map(|i| u8::from_str_radix(&dd[i..i + 2], 16).unwrap()).collect();
            assert_eq!(&r.data_details[..], &want[..], "{name}: data_details");
            None
        }
        "nodedesc" => {
            let r = NodeDescriptionRepr::parse_data(&hex).unwrap();
            assert_eq!(r.text, fields["text"], "{name}: text");
            assert_eq!(&r.to_data()[..], &hex[..], "{name}: emit");
            if smpq.exists() {
                let lines = smpquery_lines(&smpq);
                assert_eq!(lines[0].0, "Node Description");
                assert_eq!(lines[0].1, r.text, "{name}: vs smpquery");
                t.smpquery_compared += 1;
            }
            None
        }
        "lft" => {
            let r = LftBlockRepr::parse_data(&hex).unwrap();
            let want = list(&fields["ports"]);
            assert_eq!(r.ports.iter().map(|&p| p as u64).collect::<Vec<_>>(), want, "{name}: ports");
            assert_eq!(&r.to_data()[..], &hex[..], "{name}: emit");
            let ibroute = hex_path.with_extension("ibroute.txt");
            if ibroute.exists() {
                let mut n = 0;
                for l in fs::read_to_string(&ibroute).unwrap().lines() {
                    let mut w = l.split_whitespace();
                    let (Some(lid), Some(port)) = (w.next(), w.next()) else {
                        continue;
                    };
                    let Some(lid) = lid.strip_prefix("0x") else {
                        continue;
                    };
                    let lid = usize::from_str_radix(lid, 16).unwrap();
                    assert_eq!(r.ports[lid] as u64, port.parse::<u64>().unwrap(), "{name}: LID {lid} vs ibroute");
                    n += 1;
                }
                assert!(n >= 4, "{name}: ibroute listed {n} LIDs");
                t.smpquery_compared += n;
            }
            None
        }
        "pkeys" => {
            let r = PKeyTableBlockRepr::parse_data(&hex).unwrap();
            let want = list(&fields["pkeys"]);
            assert_eq!(r.pkeys.iter().map(|&p| p as u64).collect::<Vec<_>>(), want, "{name}: pkeys");
            assert_eq!(&r.to_data()[..], &hex[..], "{name}: emit");
            if smpq.exists() {
                let table = smpquery_table(&smpq);
                assert!(table.len() >= 32, "{name}: smpquery table");
                for (i, (&ours, &theirs)) in r.pkeys.iter().zip(&table).enumerate() {
                    assert_eq!(ours as u64, theirs, "{name}: pkey {i} vs smpquery");
                }
                t.smpquery_compared += 32;
            }
            None
        }
        "mft" => {
            let r = MftBlockRepr::parse_data(&hex).unwrap();
            assert_eq!(r.port_masks.iter().map(|&p| p as u64).collect::<Vec<_>>(), list(&fields["port_masks"]));
            assert_eq!(&r.to_data()[..], &hex[..], "{name}: emit");
            None
        }
        "sl2vl" => {
            let r = SlToVlTableRepr::parse_data(&hex).unwrap();
            assert_eq!(r.vl.iter().map(|&p| p as u64).collect::<Vec<_>>(), list(&fields["vl"]));
            assert_eq!(&r.to_data()[..], &hex[..], "{name}: emit");
            None
        }
        "vlarb" => {
            let r = VlArbTableRepr::parse_data(&hex).unwrap();
            let want: Vec<(u64, u64)> = fields["entries"]
                .split(',')
                .map(|e| {
                    let (a, b) = e.split_once(':').unwrap();
                    (num(a), num(b))
                })
                .collect();
            let got: Vec<(u64, u64)> = r.entries.iter().map(|e| (e.vl as u64, e.weight as u64)).collect();
            assert_eq!(got, want, "{name}: entries");
            assert_eq!(&r.to_data()[..], &hex[..], "{name}: emit");
            None
        }
        other => panic!("{name}: no checker for attribute {other}"),
    };

    if let Some(ours) = ours {
        if smpq.exists() {
            let (compared, skipped) = compare_smpquery(attr, name, &ours, &smpq);
            assert!(compared >= 3 * skipped, "{name}: only {compared} smpquery fields compared, {skipped} skipped");
            t.smpquery_compared += compared;
        } else {
            assert!(!ibsim, "{name}: ibsim capture without smpquery text");
        }
    }
}

#[test]
fn every_fixture_matches_byte_for_byte() {
    let mut paths: Vec<PathBuf> = fs::read_dir(fixtures_dir())
        .expect("fixtures/mads exists")
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "hex"))
        .collect();
    paths.sort();
    let mut t = Tally::default();
    for p in &paths {
        check_file(p, &mut t);
    }
    eprintln!(
        "{} fixtures, {} from ibsim, {} values compared with smpquery/ibroute",
        t.files, t.ibsim, t.smpquery_compared
    );
    // Guard against a silently empty or shrunken fixture set.
    assert!(t.files >= 45, "only {} fixtures", t.files);
    assert!(t.ibsim >= 15, "only {} ibsim captures", t.ibsim);
    assert!(t.smpquery_compared >= 300, "only {} values compared with smpquery", t.smpquery_compared);
    for attr in [
        "nodeinfo",
        "portinfo",
        "switchinfo",
        "sminfo",
        "guidinfo",
        "notice",
        "nodedesc",
        "lft",
        "pkeys",
        "mft",
        "sl2vl",
        "vlarb",
    ] {
        assert!(
            paths.iter().any(|p| p.file_name().unwrap().to_str().unwrap().starts_with(&format!("{attr}_"))),
            "no libibmad/hand-encoded fixture for {attr}"
        );
    }
}

/// The ibsim captures say concrete things about the simulated fabric; check
/// a few through the typed API, not just field-by-field.
#[test]
fn ibsim_captures_read_as_the_fabric() {
    let d = fixtures_dir();
    let sw = NodeInfoRepr::parse_data(&read_hex(&d.join("ibsim_nodeinfo_0-1.hex"))).unwrap();
    assert_eq!(sw.node_type, NodeType::Switch);
    assert_eq!(sw.num_ports, 8);
    assert_eq!(sw.local_port_num, 1, "Hca1 is cabled to Switch1 port 1");
    let hca = NodeInfoRepr::parse_data(&read_hex(&d.join("ibsim_nodeinfo_0.hex"))).unwrap();
    assert_eq!(hca.node_type, NodeType::Ca);
    let pi = PortInfoRepr::parse_data(&read_hex(&d.join("ibsim_portinfo_0-1_port3.hex"))).unwrap();
    assert_eq!(pi.port_state, PortState::Init, "no SM has run: links stop at Init");
    assert_eq!(pi.port_physical_state, PhysState::LinkUp);
    assert_eq!(pi.neighbor_mtu_bytes(), Some(2048));
    let si = SwitchInfoRepr::parse_data(&read_hex(&d.join("ibsim_switchinfo_0-1.hex"))).unwrap();
    assert!(si.linear_fdb_cap > 0);
    let nd = NodeDescriptionRepr::parse_data(&read_hex(&d.join("ibsim_nodedesc_0-1.hex"))).unwrap();
    assert_eq!(nd.text, "Switch1");
    let pk = PKeyTableBlockRepr::parse_data(&read_hex(&d.join("ibsim_pkeys_0.hex"))).unwrap();
    assert_eq!(pk.pkeys[0], pkey_table::DEFAULT_PKEY);
    let lft = LftBlockRepr::parse_data(&read_hex(&d.join("ibsim_lft_0-1.hex"))).unwrap();
    assert_eq!(&lft.ports[..5], &[255, 1, 2, 0, 3]);
}
