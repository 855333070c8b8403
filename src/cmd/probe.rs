//! `ibsm probe`: one directed-route SubnGet, decoded.
//!
//! The text output uses smpquery's `Name:.....value` layout and value
//! spellings, so the two can be compared field by field (tests/probe_ibsim.rs
//! does exactly that against ibsim). `--json` prints the raw values instead.
//! `--repeat N` sends the same Get N times through the transaction layer,
//! which makes the command a small transport benchmark (`--stats` prints
//! the SMPs sent by attribute and method).

use std::fmt::Write as _;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::mad::lft::LFT_BLOCK_ENTRIES;
use crate::mad::pkey_table::PKEY_BLOCK_ENTRIES;
use crate::mad::port_info::{link_speed_ext, mtu, CapabilityMask};
use crate::mad::{
    AttributeId, DrPath, LftBlockRepr, NodeDescriptionRepr, NodeInfoRepr, NodeType, PKeyTableBlockRepr, PortInfoRepr,
    SmInfoRepr, SmpAttribute, SwitchInfoRepr, WireError,
};
use crate::runtime::backend::{self, BackendError, PortArgs, Role};
use crate::transport::{SmpClient, SmpError, Transport, TransportStats, TxnConfig};
use crate::types::Guid;

/// The attributes `probe` knows how to decode.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum ProbeAttr {
    #[value(alias = "ni")]
    Nodeinfo,
    #[value(alias = "nd")]
    Nodedesc,
    #[value(alias = "pi")]
    Portinfo,
    #[value(alias = "si")]
    Switchinfo,
    #[value(alias = "pkeytable")]
    Pkeys,
    #[value(alias = "linearforwarding")]
    Lft,
    Sminfo,
}

impl ProbeAttr {
    pub fn attribute_id(self) -> AttributeId {
        match self {
            ProbeAttr::Nodeinfo => AttributeId::NodeInfo,
            ProbeAttr::Nodedesc => AttributeId::NodeDescription,
            ProbeAttr::Portinfo => AttributeId::PortInfo,
            ProbeAttr::Switchinfo => AttributeId::SwitchInfo,
            ProbeAttr::Pkeys => AttributeId::PKeyTable,
            ProbeAttr::Lft => AttributeId::LinearForwardingTable,
            ProbeAttr::Sminfo => AttributeId::SmInfo,
        }
    }
}

/// Arguments of `ibsm probe`.
#[derive(Debug, Clone, clap::Args)]
pub struct Args {
    #[command(flatten)]
    pub port: PortArgs,
    /// The directed-route path, smpquery style: 0 is the local port.
    #[arg(long, default_value = "0", value_parser = parse_path)]
    pub path: DrPath,
    /// The attribute to get.
    pub attr: ProbeAttr,
    /// The attribute modifier (PortInfo: port; P_KeyTable: block, plus port
    /// << 16 on switches; LFT: block).
    #[arg(default_value = "0", value_parser = parse_u32)]
    pub attrmod: u32,
    /// Print JSON instead of smpquery-style text.
    #[arg(long)]
    pub json: bool,
    /// M_Key to put in the SMP.
    #[arg(long, default_value = "0", value_parser = parse_u64)]
    pub m_key: u64,
    /// Per-attempt timeout.
    #[arg(long, default_value = "200")]
    pub timeout_ms: u64,
    /// Retries after the first attempt.
    #[arg(long, default_value = "3")]
    pub retries: u32,
    /// SMPs on the wire at once.
    #[arg(long, default_value = "4")]
    pub window: usize,
    /// Send the Get this many times (all submitted at once; the window
    /// paces them) and report how they fared.
    #[arg(long, default_value = "1")]
    pub repeat: u32,
    /// Print the transport counters (SMPs sent by attribute and method).
    #[arg(long)]
    pub stats: bool,
    /// Hold the port's IsSM capability while probing (opens the issm device).
    #[arg(long)]
    pub is_sm: bool,
    /// Keep the port open this long after printing (with --is-sm, so
    /// another tool can observe the capability).
    #[arg(long, default_value = "0")]
    pub hold_ms: u64,
}

fn parse_path(s: &str) -> Result<DrPath, String> {
    DrPath::parse_text(s)
}

fn parse_u64(s: &str) -> Result<u64, String> {
    let r = match s.strip_prefix("0x").or_else(|| s.strip_prefix("0X")) {
        Some(h) => u64::from_str_radix(h, 16),
        None => s.parse(),
    };
    r.map_err(|e| format!("`{s}`: {e}"))
}

fn parse_u32(s: &str) -> Result<u32, String> {
    parse_u64(s).and_then(|v| u32::try_from(v).map_err(|_| format!("`{s}` does not fit in 32 bits")))
}

/// Why the probe failed.
#[derive(Debug, thiserror::Error)]
pub enum ProbeError {
    #[error(transparent)]
    Backend(#[from] BackendError),
    #[error(transparent)]
    Smp(#[from] SmpError),
    #[error("{attr:?} at DR path {path}: cannot decode the response: {error}")]
    Decode { attr: AttributeId, path: DrPath, error: WireError },
}

/// One decoded field: its smpquery name, raw value and display text.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Field {
    pub name: String,
    pub value: Value,
    pub text: String,
    /// Extra lines smpquery prints under the field (capability bit names).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub detail: Vec<String>,
}

fn field(name: &str, value: impl Into<Value>, text: impl Into<String>) -> Field {
    Field { name: name.to_string(), value: value.into(), text: text.into(), detail: Vec::new() }
}

fn int(name: &str, v: impl Into<u64> + Copy) -> Field {
    let v: u64 = v.into();
    field(name, v, v.to_string())
}

/// `0x` and `digits` hex digits, as libibmad prints fixed-width fields.
fn hex(name: &str, v: impl Into<u64>, digits: usize) -> Field {
    let v: u64 = v.into();
    field(name, v, format!("{v:#0w$x}", w = digits + 2))
}

fn guid(name: &str, g: Guid) -> Field {
    field(name, format!("{:#018x}", g.0), format!("{:#018x}", g.0))
}

fn flag(name: &str, b: bool) -> Field {
    field(name, b, u8::from(b).to_string())
}

fn bit_list(v: u8, names: &[(u8, &str)]) -> String {
    let parts: Vec<&str> = names.iter().filter(|(b, _)| v & b != 0).map(|(_, n)| *n).collect();
    let known = names.iter().fold(0u8, |a, (b, _)| a | b);
    if v == 0 || v & !known != 0 {
        let mut s = parts.join(" or ");
        if !s.is_empty() {
            s.push_str(" or ");
        }
        s.push_str(&format!("undefined ({v})"));
        s
    } else {
        parts.join(" or ")
    }
}

const WIDTHS: &[(u8, &str)] = &[(1, "1X"), (2, "4X"), (4, "8X"), (8, "12X"), (16, "2X")];
const SPEEDS: &[(u8, &str)] = &[(1, "2.5 Gbps"), (2, "5.0 Gbps"), (4, "10.0 Gbps")];
const EXT_SPEEDS: &[(u8, &str)] = &[(1, "14.0625 Gbps"), (2, "25.78125 Gbps"), (4, "53.125 Gbps"), (8, "106.25 Gbps")];

fn width_active(v: u8) -> String {
    match WIDTHS.iter().find(|(b, _)| *b == v) {
        Some((_, n)) => n.to_string(),
        None => format!("undefined ({v})"),
    }
}

fn speed_active(v: u8) -> String {
    match SPEEDS.iter().find(|(b, _)| *b == v) {
        Some((_, n)) => n.to_string(),
        None if v == 0 => "Extended speed".into(),
        None => format!("undefined ({v})"),
    }
}

/// Supported speeds: the speed list, with smpquery's "(IBA extension)"
/// note when the set is not one of the classic ladders.
fn speed_set(v: u8) -> String {
    let s = bit_list(v, SPEEDS);
    if matches!(v, 1 | 3 | 5 | 7) || v >> 3 != 0 {
        s
    } else {
        format!("{s} (IBA extension)")
    }
}

fn width_supported(v: u8) -> String {
    let s = bit_list(v, WIDTHS);
    if matches!(v, 1 | 3 | 7 | 11 | 15 | 17 | 19 | 23 | 27 | 31) || v >> 5 != 0 {
        s
    } else {
        format!("{s} (IBA extension)")
    }
}

fn ext_speed_active(v: u8) -> String {
    if v == 0 {
        return "No Extended Speed".into();
    }
    link_speed_ext::name(v)
        .and_then(|_| EXT_SPEEDS.iter().find(|(b, _)| *b == v).map(|(_, n)| n.to_string()))
        .unwrap_or_else(|| format!("undefined ({v})"))
}

fn ext_speed_set(v: u8) -> String {
    if v == 0 {
        return "0".into();
    }
    bit_list(v, EXT_SPEEDS)
}

fn mtu_text(code: u8) -> String {
    mtu::to_bytes(code).map_or_else(|| format!("?({code})"), |b| b.to_string())
}

fn vls_text(v: u8, zero: &str) -> String {
    match v {
        0 => zero.to_string(),
        1 => "VL0".into(),
        2 => "VL0-1".into(),
        3 => "VL0-3".into(),
        4 => "VL0-7".into(),
        5 => "VL0-14".into(),
        _ => format!("?({v})"),
    }
}

fn port_state_text(v: u8) -> String {
    match v {
        0 => "NoChange".into(),
        1 => "Down".into(),
        2 => "Initialize".into(),
        3 => "Armed".into(),
        4 => "Active".into(),
        _ => format!("?({v})"),
    }
}

fn phys_state_text(v: u8) -> String {
    const NAMES: [&str; 8] = [
        "NoChange",
        "Sleep",
        "Polling",
        "Disabled",
        "PortConfigurationTraining",
        "LinkUp",
        "LinkErrorRecovery",
        "PhyTest",
    ];
    NAMES.get(v as usize).map_or_else(|| format!("?({v})"), |s| s.to_string())
}

fn node_type_text(t: NodeType) -> String {
    match t {
        NodeType::Ca => "Channel Adapter".into(),
        NodeType::Switch => "Switch".into(),
        NodeType::Router => "Router".into(),
        NodeType::Unknown(v) => format!("?({v})?"),
    }
}

fn node_info(r: &NodeInfoRepr) -> Vec<Field> {
    vec![
        int("BaseVers", r.base_version),
        int("ClassVers", r.class_version),
        field("NodeType", u8::from(r.node_type), node_type_text(r.node_type)),
        int("NumPorts", r.num_ports),
        guid("SystemGuid", r.system_image_guid),
        guid("Guid", r.node_guid),
        guid("PortGuid", r.port_guid),
        int("PartCap", r.partition_cap),
        hex("DevId", r.device_id, 4),
        hex("Revision", r.revision, 8),
        int("LocalPort", r.local_port_num),
        hex("VendorId", r.vendor_id, 6),
    ]
}

fn port_info(r: &PortInfoRepr) -> Vec<Field> {
    let mut cap = field("CapMask", r.capability_mask, format!("{:#x}", r.capability_mask));
    cap.detail =
        CapabilityMask::NAMES.iter().filter(|(b, _)| r.capability_mask & b != 0).map(|(_, n)| n.to_string()).collect();
    let ps = u8::from(r.port_state);
    let phys = u8::from(r.port_physical_state);
    let ldd = u8::from(r.link_down_default_state);
    vec![
        field("Mkey", r.m_key, "<not displayed>"),
        hex("GidPrefix", r.gid_prefix, 16),
        int("Lid", r.lid.0),
        int("SMLid", r.master_sm_lid.0),
        cap,
        hex("DiagCode", r.diag_code, 4),
        int("MkeyLeasePeriod", r.m_key_lease_period),
        int("LocalPort", r.local_port_num),
        field("LinkWidthEnabled", r.link_width_enabled, bit_list(r.link_width_enabled, WIDTHS)),
        field("LinkWidthSupported", r.link_width_supported, width_supported(r.link_width_supported)),
        field("LinkWidthActive", r.link_width_active, width_active(r.link_width_active)),
        field("LinkSpeedSupported", r.link_speed_supported, speed_set(r.link_speed_supported)),
        field("LinkState", ps, port_state_text(ps)),
        field("PhysLinkState", phys, phys_state_text(phys)),
        field(
            "LinkDownDefState",
            ldd,
            match ldd {
                0 => "NoChange".to_string(),
                1 => "Sleep".into(),
                2 => "Polling".into(),
                v => format!("?({v})"),
            },
        ),
        int("ProtectBits", r.m_key_protect_bits),
        int("LMC", r.lmc),
        field("LinkSpeedActive", r.link_speed_active, speed_active(r.link_speed_active)),
        field("LinkSpeedEnabled", r.link_speed_enabled, speed_set(r.link_speed_enabled)),
        field("NeighborMTU", r.neighbor_mtu, mtu_text(r.neighbor_mtu)),
        int("SMSL", r.master_sm_sl),
        field("VLCap", r.vl_cap, vls_text(r.vl_cap, "?(0)")),
        hex("InitType", r.init_type, 2),
        int("VLHighLimit", r.vl_high_limit),
        int("VLArbHighCap", r.vl_arbitration_high_cap),
        int("VLArbLowCap", r.vl_arbitration_low_cap),
        hex("InitReply", r.init_type_reply, 2),
        field("MtuCap", r.mtu_cap, mtu_text(r.mtu_cap)),
        int("VLStallCount", r.vl_stall_count),
        int("HoqLife", r.hoq_life),
        field("OperVLs", r.operational_vls, vls_text(r.operational_vls, "No change")),
        flag("PartEnforceInb", r.partition_enforcement_inbound),
        flag("PartEnforceOutb", r.partition_enforcement_outbound),
        flag("FilterRawInb", r.filter_raw_inbound),
        flag("FilterRawOutb", r.filter_raw_outbound),
        int("MkeyViolations", r.m_key_violations),
        int("PkeyViolations", r.p_key_violations),
        int("QkeyViolations", r.q_key_violations),
        int("GuidCap", r.guid_cap),
        flag("ClientReregister", r.client_reregister),
        int("McastPkeyTrapSuppressionEnabled", r.multicast_pkey_trap_suppression_enabled),
        int("SubnetTimeout", r.subnet_timeout),
        int("RespTimeVal", r.resp_time_value),
        int("LocalPhysErr", r.local_phy_errors),
        int("OverrunErr", r.overrun_errors),
        int("MaxCreditHint", r.max_credit_hint),
        int("RoundTrip", r.link_round_trip_latency),
        {
            let mut f = field("CapabilityMask2", r.capability_mask2, format!("{:#x}", r.capability_mask2));
            f.detail = CAP_MASK2_NAMES
                .iter()
                .enumerate()
                .filter(|(bit, _)| r.capability_mask2 & (1 << bit) != 0)
                .map(|(_, n)| n.to_string())
                .collect();
            f
        },
        field("LinkSpeedExtActive", r.link_speed_ext_active, ext_speed_active(r.link_speed_ext_active)),
        field("LinkSpeedExtSupported", r.link_speed_ext_supported, ext_speed_set(r.link_speed_ext_supported)),
        field(
            "LinkSpeedExtEnabled",
            r.link_speed_ext_enabled,
            if r.link_speed_ext_enabled == link_speed_ext::DISABLE {
                "Extended link speeds disabled".to_string()
            } else {
                ext_speed_set(r.link_speed_ext_enabled)
            },
        ),
    ]
}

/// CapabilityMask2 bit names, bit 0 first (IBA 14.2.5.6 and the 1.4/1.5
/// annexes).
const CAP_MASK2_NAMES: [&str; 11] = [
    "IsSetNodeDescriptionSupported",
    "IsPortInfoExtendedSupported",
    "IsVirtualizationSupported",
    "IsSwitchPortStateTableSupported",
    "IsLinkWidth2xSupported",
    "IsLinkSpeedHDRSupported",
    "IsMKeyProtectBitsExtSupported",
    "IsEnhancedTrap128Supported",
    "IsPartitionTopSupported",
    "IsEnhancedQoSArbiterSupported",
    "IsLinkSpeedNDRSupported",
];

fn switch_info(r: &SwitchInfoRepr) -> Vec<Field> {
    vec![
        int("LinearFdbCap", r.linear_fdb_cap),
        int("RandomFdbCap", r.random_fdb_cap),
        int("McastFdbCap", r.multicast_fdb_cap),
        int("LinearFdbTop", r.linear_fdb_top),
        int("DefPort", r.default_port),
        int("DefMcastPrimPort", r.default_mcast_primary_port),
        int("DefMcastNotPrimPort", r.default_mcast_not_primary_port),
        int("LifeTime", r.life_time_value),
        flag("StateChange", r.port_state_change),
        int("OptSLtoVLMapping", r.optimized_sl_to_vl_mapping_programming),
        int("LidsPerPort", r.lids_per_port),
        int("PartEnforceCap", r.partition_enforcement_cap),
        flag("InboundPartEnf", r.inbound_enforcement_cap),
        flag("OutboundPartEnf", r.outbound_enforcement_cap),
        flag("FilterRawInbound", r.filter_raw_inbound_cap),
        flag("FilterRawOutbound", r.filter_raw_outbound_cap),
        flag("EnhancedPort0", r.enhanced_port0),
        hex("MulticastFDBTop", r.multicast_fdb_top, 4),
    ]
}

fn sm_info(r: &SmInfoRepr) -> Vec<Field> {
    vec![
        guid("Guid", r.guid),
        field("SmKey", r.sm_key, format!("{:#018x}", r.sm_key)),
        int("ActCount", r.act_count),
        int("Priority", r.priority),
        field("SmState", u8::from(r.sm_state), format!("{:?}", r.sm_state)),
    ]
}

/// Decodes the data area of a GetResp for `attr` with modifier `amod`.
pub fn decode(attr: ProbeAttr, amod: u32, data: &[u8]) -> Result<Vec<Field>, WireError> {
    Ok(match attr {
        ProbeAttr::Nodeinfo => node_info(&NodeInfoRepr::parse_data(data)?),
        ProbeAttr::Nodedesc => {
            let r = NodeDescriptionRepr::parse_data(data)?;
            vec![field("NodeDesc", r.text.clone(), r.text)]
        }
        ProbeAttr::Portinfo => port_info(&PortInfoRepr::parse_data(data)?),
        ProbeAttr::Switchinfo => switch_info(&SwitchInfoRepr::parse_data(data)?),
        ProbeAttr::Pkeys => {
            let r = PKeyTableBlockRepr::parse_data(data)?;
            let block = (amod & 0xffff) as usize;
            (0..PKEY_BLOCK_ENTRIES)
                .map(|i| hex(&format!("PKey[{}]", block * PKEY_BLOCK_ENTRIES + i), r.pkeys[i], 4))
                .collect()
        }
        ProbeAttr::Lft => {
            let r = LftBlockRepr::parse_data(data)?;
            let first = amod as usize * LFT_BLOCK_ENTRIES;
            (0..LFT_BLOCK_ENTRIES).map(|i| int(&format!("Lid[{}]", first + i), r.ports[i])).collect()
        }
        ProbeAttr::Sminfo => sm_info(&SmInfoRepr::parse_data(data)?),
    })
}

/// smpquery's layout: the name and a colon, dots to column 33, the value.
pub fn render_text(fields: &[Field]) -> String {
    let mut out = String::new();
    for f in fields {
        let head = format!("{}:", f.name);
        let dots = 33usize.saturating_sub(head.len()).max(1);
        let _ = writeln!(out, "{head}{}{}", ".".repeat(dots), f.text);
        for d in &f.detail {
            let _ = writeln!(out, "\t\t\t\t{d}");
        }
    }
    out
}

/// What one probe run produced.
#[derive(Debug, Clone, serde::Serialize)]
pub struct ProbeReport {
    pub attribute: String,
    pub path: String,
    pub attrmod: u32,
    pub fields: Vec<Field>,
    pub repeat: u32,
    pub ok: u32,
    pub timeouts: u32,
    pub other_errors: u32,
    pub elapsed_ms: f64,
    pub window: usize,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub stats: Option<TransportStats>,
}

/// Sends the Get(s) over `client` and decodes the first answer.
pub async fn probe<T: Transport + Clone>(client: &SmpClient<T>, args: &Args) -> Result<ProbeReport, ProbeError> {
    let attr = args.attr.attribute_id();
    let started = Instant::now();
    let n = args.repeat.max(1);
    let results = {
        let (path, amod) = (args.path, args.attrmod);
        let futs = (0..n).map(|_| {
            let c = client.clone();
            async move { c.dr_get(&path, attr, amod).await }
        });
        join_all(futs).await
    };
    let elapsed = started.elapsed();
    let (mut ok, mut timeouts, mut other) = (0, 0, 0);
    let mut first_ok = None;
    let mut first_err = None;
    for r in results {
        match r {
            Ok(smp) => {
                ok += 1;
                first_ok.get_or_insert(smp);
            }
            Err(e) => {
                if matches!(e, SmpError::Transport(crate::transport::TransportError::Timeout { .. })) {
                    timeouts += 1;
                } else {
                    other += 1;
                }
                first_err.get_or_insert(e);
            }
        }
    }
    let fields = match (&first_ok, first_err) {
        (Some(smp), _) => decode(args.attr, args.attrmod, &smp.data).map_err(|error| ProbeError::Decode {
            attr,
            path: args.path,
            error,
        })?,
        // A single probe that failed is an error; a benchmark reports counts.
        (None, Some(e)) if n == 1 => return Err(e.into()),
        _ => Vec::new(),
    };
    Ok(ProbeReport {
        attribute: format!("{attr:?}"),
        path: args.path.to_string(),
        attrmod: args.attrmod,
        fields,
        repeat: n,
        ok,
        timeouts,
        other_errors: other,
        elapsed_ms: elapsed.as_secs_f64() * 1e3,
        window: args.window,
        stats: args.stats.then(|| client.transport().stats()),
    })
}

/// Polls every future to completion concurrently (no extra dependency for
/// `futures::join_all`): each is spawned on the current runtime.
async fn join_all<F>(futs: impl Iterator<Item = F>) -> Vec<F::Output>
where
    F: std::future::Future + Send + 'static,
    F::Output: Send + 'static,
{
    let handles: Vec<_> = futs.map(tokio::spawn).collect();
    let mut out = Vec::with_capacity(handles.len());
    for h in handles {
        out.push(h.await.expect("probe task panicked"));
    }
    out
}

/// Renders a report as the CLI prints it.
pub fn render(report: &ProbeReport, json_out: bool) -> String {
    if json_out {
        return serde_json::to_string_pretty(report).expect("a report serialises") + "\n";
    }
    let mut out =
        format!("# {}: DR path {} (attribute modifier {:#x})\n", report.attribute, report.path, report.attrmod);
    out.push_str(&render_text(&report.fields));
    if report.repeat > 1 {
        let _ = writeln!(
            out,
            "# {} Gets, window {}: {} answered, {} timed out, {} other errors in {:.1} ms",
            report.repeat, report.window, report.ok, report.timeouts, report.other_errors, report.elapsed_ms
        );
    }
    if let Some(s) = &report.stats {
        out.push_str(&render_stats(s));
    }
    out
}

/// "SMPs sent by attribute and method", one line per key.
pub fn render_stats(s: &TransportStats) -> String {
    let mut out = String::new();
    for (k, c) in &s.txn.by_mad {
        let _ = writeln!(
            out,
            "# {k}: sent {} retries {} timeouts {} failed {} responses {} late {} strays {} unsolicited {}",
            c.sent, c.retries, c.timeouts, c.failed, c.responses, c.late, c.strays, c.unsolicited
        );
    }
    let rtt = if s.txn.by_mad.values().map(|c| c.responses).sum::<u64>() > 0 {
        let n: u64 = s.txn.by_mad.values().map(|c| c.responses).sum();
        format!("{:.3}", s.txn.rtt_total.as_secs_f64() * 1e3 / n as f64)
    } else {
        "-".into()
    };
    let _ = writeln!(
        out,
        "# rtt mean {rtt} ms max {:.3} ms; unsolicited dropped {}; device errors {}",
        s.txn.rtt_max.as_secs_f64() * 1e3,
        s.unsolicited_dropped,
        s.device_errors
    );
    out
}

/// `ibsm probe`.
pub async fn run(args: Args) -> std::process::ExitCode {
    match probe_text(&args).await {
        Ok(text) => {
            print!("{text}");
            std::process::ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ibsm probe: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// Opens the backend and probes; returns the text to print.
async fn probe_text(args: &Args) -> Result<String, ProbeError> {
    let cfg = TxnConfig {
        window: args.window,
        timeout: Duration::from_millis(args.timeout_ms),
        retries: args.retries,
        ..TxnConfig::default()
    };
    // --is-sm makes the probe look like an SM: IsSM held, SM agent registered.
    let role = if args.is_sm { Role::SubnetManager } else { Role::Tool };
    let opened = backend::open(&args.port, cfg, role)?;
    let transport = opened.transport;
    let client = SmpClient::with_m_key(transport, args.m_key);
    let report = probe(&client, args).await?;
    let text = render(&report, args.json);
    if args.hold_ms > 0 {
        print!("{text}");
        use std::io::Write as _;
        let _ = std::io::stdout().flush();
        tokio::time::sleep(Duration::from_millis(args.hold_ms)).await;
        return Ok(String::new());
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mad::port_info::{LinkDownDefaultState, PhysState, PortState};
    use crate::types::Lid;
    use serde_json::json;

    #[test]
    fn text_layout_matches_smpquery() {
        let f = vec![int("BaseVers", 1u8), int("McastPkeyTrapSuppressionEnabled", 0u8)];
        assert_eq!(render_text(&f), "BaseVers:........................1\nMcastPkeyTrapSuppressionEnabled:.0\n");
    }

    #[test]
    fn value_spellings() {
        assert_eq!(bit_list(0x1f, WIDTHS), "1X or 4X or 8X or 12X or 2X");
        assert_eq!(width_supported(0x1f), "1X or 4X or 8X or 12X or 2X");
        assert_eq!(width_supported(2), "4X (IBA extension)");
        assert_eq!(speed_set(7), "2.5 Gbps or 5.0 Gbps or 10.0 Gbps");
        assert_eq!(speed_set(0), "undefined (0) (IBA extension)");
        assert_eq!(speed_active(1), "2.5 Gbps");
        assert_eq!(ext_speed_active(0), "No Extended Speed");
        assert_eq!(ext_speed_active(4), "53.125 Gbps");
        assert_eq!(ext_speed_set(0), "0");
        assert_eq!(mtu_text(4), "2048");
        assert_eq!(vls_text(4, "x"), "VL0-7");
        assert_eq!(port_state_text(2), "Initialize");
        assert_eq!(hex("VendorId", 0x2c9u32, 6).text, "0x0002c9");
    }

    #[test]
    fn port_info_decodes_from_bytes() {
        let mut r = PortInfoRepr::parse_data(&[0u8; 64]).unwrap();
        r.lid = Lid(7);
        r.capability_mask = CapabilityMask::IS_SM | CapabilityMask::IS_TRAP_SUPPORTED;
        r.port_state = PortState::Init;
        r.port_physical_state = PhysState::LinkUp;
        r.link_down_default_state = LinkDownDefaultState::Polling;
        r.link_width_active = 2;
        r.neighbor_mtu = 4;
        let fields = decode(ProbeAttr::Portinfo, 1, &r.to_data()).unwrap();
        let get = |n: &str| fields.iter().find(|f| f.name == n).unwrap().clone();
        assert_eq!(get("Lid").text, "7");
        assert_eq!(get("CapMask").text, "0xa");
        assert_eq!(get("CapMask").detail, vec!["IsSM", "IsTrapSupported"]);
        assert_eq!(get("LinkState").text, "Initialize");
        assert_eq!(get("PhysLinkState").text, "LinkUp");
        assert_eq!(get("LinkWidthActive").text, "4X");
        assert_eq!(get("NeighborMTU").value, json!(4));
    }

    #[test]
    fn short_data_is_a_decode_error() {
        assert!(matches!(decode(ProbeAttr::Nodeinfo, 0, &[0u8; 10]), Err(WireError::Truncated { .. })));
    }

    #[test]
    fn arguments_parse() {
        assert_eq!(parse_u64("0x10").unwrap(), 16);
        assert_eq!(parse_u32("65536").unwrap(), 65536);
        assert!(parse_u32("0x100000000").is_err());
        assert_eq!(parse_path("0,1,3").unwrap().ports(), &[1, 3]);
    }
}
