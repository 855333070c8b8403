//! `ibsm sa join | leave | ipoib | groups`: a multicast client of any SA
//! (ours or OpenSM's), built on ibsm's MAD layer.
//!
//! `ibsm sa ipoib` joins as the Linux IPoIB driver does when an interface
//! comes up (drivers/infiniband/ulp/ipoib/ipoib_multicast.c): the
//! partition's broadcast group first, with no creation components (the SM
//! must have created it), then the groups IPv4 and IPv6 join on every
//! interface (all-hosts 224.0.0.1, IPv6 all-nodes ff02::1, all-routers
//! ff02::2 and the port's solicited-node group), each created if need be
//! with the broadcast group's Q_Key, MTU, rate, SL, TClass and FlowLabel.
//! What it prints is what the interface would run with: the broadcast
//! group's MTU less the 4-byte IPoIB header in datagram mode, 65520 in
//! connected mode (multicast stays datagram there).

use std::process::ExitCode;

use clap::{Args as ClapArgs, ValueEnum};
use serde::Serialize;

use crate::mad::sa::mc_member_record::{join_state, mc_member_mask as m, McMemberRecordRepr};
use crate::mad::sa::path_mask;
use crate::mad::PathRecordRepr;
use crate::runtime::backend::PortArgs;
use crate::transport::sa_client::{SaClient, SaError};
use crate::transport::{Transport, TxnConfig};

/// IPoIB's signature in bytes 2-3 of an IPv4 MGID (RFC 4391 §4).
pub const IPV4_SIGNATURE: u16 = 0x401b;
/// And of an IPv6 MGID.
pub const IPV6_SIGNATURE: u16 = 0x601b;
/// The IPoIB Q_Key OpenSM gives broadcast groups (RFC 4391 leaves it to the SM).
pub const IPOIB_Q_KEY: u32 = 0x0b1b;
/// IPoIB's header, subtracted from the link MTU in datagram mode (RFC 4391 §6).
pub const IPOIB_HEADER: u32 = 4;
/// Linux IPoIB's connected-mode MTU.
pub const CONNECTED_MTU: u32 = 65520;

/// An IPoIB MGID: `ff1<scope>:<signature>:<pkey>:` then the low 10 bytes.
pub fn ipoib_mgid(scope: u8, signature: u16, pkey: u16, low: [u8; 10]) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[0] = 0xff;
    g[1] = 0x10 | (scope & 0xf);
    g[2..4].copy_from_slice(&signature.to_be_bytes());
    g[4..6].copy_from_slice(&(pkey | 0x8000).to_be_bytes());
    g[6..].copy_from_slice(&low);
    g
}

/// The partition's broadcast group, `ff12:401b:<pkey>::ffff:ffff`.
pub fn broadcast_mgid(scope: u8, pkey: u16) -> [u8; 16] {
    let mut low = [0u8; 10];
    low[6..].copy_from_slice(&[0xff; 4]);
    ipoib_mgid(scope, IPV4_SIGNATURE, pkey, low)
}

/// The group of an IPv4 multicast address: the address in the last 4 bytes.
pub fn ipv4_group(scope: u8, pkey: u16, ip: [u8; 4]) -> [u8; 16] {
    let mut low = [0u8; 10];
    low[6..].copy_from_slice(&ip);
    ipoib_mgid(scope, IPV4_SIGNATURE, pkey, low)
}

/// The group of an IPv6 multicast address: its low 80 bits.
pub fn ipv6_group(scope: u8, pkey: u16, addr: [u8; 16]) -> [u8; 16] {
    let mut low = [0u8; 10];
    low.copy_from_slice(&addr[6..]);
    ipoib_mgid(scope, IPV6_SIGNATURE, pkey, low)
}

/// The port's IPv6 solicited-node group: ff02::1:ffXX:XXXX with the low 24
/// bits of its link-local address (whose interface ID is the port GUID
/// with the universal bit flipped, RFC 4391 §8).
pub fn solicited_node_group(scope: u8, pkey: u16, port_guid: u64) -> [u8; 16] {
    let id = (port_guid ^ 0x0200_0000_0000_0000).to_be_bytes();
    let mut addr = [0u8; 16];
    addr[0] = 0xff;
    addr[1] = 0x02;
    addr[11] = 0x01;
    addr[12] = 0xff;
    addr[13..].copy_from_slice(&id[5..]);
    ipv6_group(scope, pkey, addr)
}

/// A port GID from the subnet prefix and the port GUID.
pub fn port_gid(prefix: u64, port_guid: u64) -> [u8; 16] {
    let mut g = [0u8; 16];
    g[..8].copy_from_slice(&prefix.to_be_bytes());
    g[8..].copy_from_slice(&port_guid.to_be_bytes());
    g
}

pub fn gid_text(g: &[u8; 16]) -> String {
    std::net::Ipv6Addr::from(*g).to_string()
}

/// The bytes of an MTU code (IBA Table 145: 1 = 256 .. 5 = 4096).
pub fn mtu_bytes(code: u8) -> Option<u32> {
    (1..=5).contains(&code).then(|| 128u32 << code)
}

/// What one join or leave is about.
#[derive(Debug, Clone, Copy)]
pub struct JoinAsk {
    pub mgid: [u8; 16],
    pub port_gid: [u8; 16],
    pub pkey: u16,
    pub join_state: u8,
    /// The parameters to create the group with, if it does not exist.
    pub create: Option<McMemberRecordRepr>,
}

/// The component mask and record of a join (IBA 15.2.5.17; creation adds
/// what o15-0.2.4 requires, as the kernel's IPoIB does).
pub fn join_request(ask: &JoinAsk) -> (u64, McMemberRecordRepr) {
    let mut rec = McMemberRecordRepr {
        mgid: ask.mgid,
        port_gid: ask.port_gid,
        pkey: ask.pkey,
        join_state: ask.join_state,
        ..Default::default()
    };
    let mut mask = m::MGID | m::PORT_GID | m::PKEY | m::JOIN_STATE;
    if let Some(c) = &ask.create {
        // "Exactly" (2) for MTU and rate: the group must carry what the
        // broadcast group carries, as IPoIB asks.
        rec.q_key = c.q_key;
        rec.mtu_selector = 2;
        rec.mtu = c.mtu;
        rec.tclass = c.tclass;
        rec.rate_selector = 2;
        rec.rate = c.rate;
        rec.sl = c.sl;
        rec.flow_label = c.flow_label;
        rec.hop_limit = c.hop_limit;
        mask |= m::Q_KEY
            | m::MTU_SELECTOR
            | m::MTU
            | m::TCLASS
            | m::RATE_SELECTOR
            | m::RATE
            | m::SL
            | m::FLOW_LABEL
            | m::HOP_LIMIT;
    }
    (mask, rec)
}

/// A join refused, or an answer that is not the group asked for.
#[derive(Debug, thiserror::Error)]
pub enum JoinError {
    #[error("joining {mgid}: {source}")]
    Sa { mgid: String, source: SaError },
    #[error("leaving {mgid}: {source}")]
    Leave { mgid: String, source: SaError },
    #[error("joining {mgid}: the SA answered for group {answered}")]
    WrongGroup { mgid: String, answered: String },
    #[error("joining {mgid}: the group's MLID {mlid:#06x} is not a multicast LID")]
    BadMlid { mgid: String, mlid: u16 },
    #[error("joining {mgid}: the group's MTU code {code} is none of 1-5")]
    BadMtu { mgid: String, code: u8 },
}

/// Joins one group; checks the answer names it and has a multicast LID.
pub async fn join<T: Transport>(client: &SaClient<T>, ask: &JoinAsk) -> Result<McMemberRecordRepr, JoinError> {
    let mgid = gid_text(&ask.mgid);
    let (mask, rec) = join_request(ask);
    let got = client.set(mask, &rec).await.map_err(|source| JoinError::Sa { mgid: mgid.clone(), source })?;
    if got.mgid != ask.mgid && ask.mgid != [0; 16] {
        return Err(JoinError::WrongGroup { mgid, answered: gid_text(&got.mgid) });
    }
    if got.mlid < 0xC000 {
        return Err(JoinError::BadMlid { mgid, mlid: got.mlid });
    }
    Ok(got)
}

/// Leaves one group (the JoinState bits in `ask`).
pub async fn leave<T: Transport>(client: &SaClient<T>, ask: &JoinAsk) -> Result<McMemberRecordRepr, JoinError> {
    let mask = m::MGID | m::PORT_GID | m::JOIN_STATE;
    let rec =
        McMemberRecordRepr { mgid: ask.mgid, port_gid: ask.port_gid, join_state: ask.join_state, ..Default::default() };
    client.delete(mask, &rec).await.map_err(|source| JoinError::Leave { mgid: gid_text(&ask.mgid), source })
}

/// The groups an IPoIB interface of partition `pkey` joins, broadcast first.
pub fn ipoib_groups(scope: u8, pkey: u16, port_guid: u64) -> Vec<[u8; 16]> {
    let v6 = |last: u8| {
        let mut a = [0u8; 16];
        a[0] = 0xff;
        a[1] = 0x02;
        a[15] = last;
        ipv6_group(scope, pkey, a)
    };
    vec![
        broadcast_mgid(scope, pkey),
        ipv4_group(scope, pkey, [224, 0, 0, 1]),
        v6(1),
        v6(2),
        solicited_node_group(scope, pkey, port_guid),
    ]
}

/// What an interface came up with.
#[derive(Debug, Clone, Serialize)]
pub struct IpoibUp {
    pub pkey: u16,
    pub q_key: u32,
    /// Interface MTU in datagram mode (broadcast MTU − 4).
    pub datagram_mtu: u32,
    /// Interface MTU in connected mode (unicast over RC; multicast still
    /// datagram, so the groups are the same).
    pub connected_mtu: u32,
    pub groups: Vec<JoinedGroup>,
}

#[derive(Debug, Clone, Serialize)]
pub struct JoinedGroup {
    pub mgid: String,
    pub mlid: u16,
    pub q_key: u32,
    pub mtu: u8,
    pub rate: u8,
    pub sl: u8,
    pub pkey: u16,
    pub join_state: u8,
}

impl From<&McMemberRecordRepr> for JoinedGroup {
    fn from(r: &McMemberRecordRepr) -> Self {
        JoinedGroup {
            mgid: gid_text(&r.mgid),
            mlid: r.mlid,
            q_key: r.q_key,
            mtu: r.mtu,
            rate: r.rate,
            sl: r.sl,
            pkey: r.pkey,
            join_state: r.join_state,
        }
    }
}

/// An interface of the client's port: the groups it joins, and its
/// full-member join of one of them.
struct IpoibPort {
    port_gid: [u8; 16],
    pkey: u16,
    groups: Vec<[u8; 16]>,
}

impl IpoibPort {
    fn of<T: Transport>(client: &SaClient<T>, prefix: u64, pkey: u16, scope: u8) -> Self {
        let guid = client.local_port().port_guid.0;
        let pkey = pkey | 0x8000;
        IpoibPort { port_gid: port_gid(prefix, guid), pkey, groups: ipoib_groups(scope, pkey, guid) }
    }
    fn ask(&self, mgid: [u8; 16], create: Option<McMemberRecordRepr>) -> JoinAsk {
        JoinAsk { mgid, port_gid: self.port_gid, pkey: self.pkey, join_state: join_state::FULL, create }
    }
}

/// Brings an IPoIB interface up as the kernel would: the broadcast group
/// (which must exist), then the others, created with its parameters.
pub async fn ipoib_up<T: Transport>(
    client: &SaClient<T>,
    prefix: u64,
    pkey: u16,
    scope: u8,
) -> Result<IpoibUp, JoinError> {
    let port = IpoibPort::of(client, prefix, pkey, scope);
    let bcast = join(client, &port.ask(port.groups[0], None)).await?;
    let mtu = mtu_bytes(bcast.mtu).ok_or(JoinError::BadMtu { mgid: gid_text(&port.groups[0]), code: bcast.mtu })?;
    let mut joined = vec![JoinedGroup::from(&bcast)];
    for &g in &port.groups[1..] {
        joined.push(JoinedGroup::from(&join(client, &port.ask(g, Some(bcast))).await?));
    }
    Ok(IpoibUp {
        pkey: pkey | 0x8000,
        q_key: bcast.q_key,
        datagram_mtu: mtu - IPOIB_HEADER,
        connected_mtu: CONNECTED_MTU,
        groups: joined,
    })
}

/// Leaves what [`ipoib_up`] joined, the broadcast group last.
pub async fn ipoib_down<T: Transport>(
    client: &SaClient<T>,
    prefix: u64,
    pkey: u16,
    scope: u8,
) -> Result<usize, JoinError> {
    let port = IpoibPort::of(client, prefix, pkey, scope);
    let mut left = 0;
    for &g in port.groups.iter().rev() {
        leave(client, &port.ask(g, None)).await?;
        left += 1;
    }
    Ok(left)
}

/// What IPoIB asks before it sends unicast to a neighbour, in datagram
/// and connected mode alike (the kernel's `path_rec_start`): a PathRecord
/// by SGID, DGID and the interface's P_Key, one reversible path. Refused
/// (no shared partition, or only as two limited members) means the
/// neighbour is unreachable over this interface.
pub async fn ipoib_path<T: Transport>(
    client: &SaClient<T>,
    prefix: u64,
    pkey: u16,
    peer_guid: u64,
) -> Result<PathRecordRepr, SaError> {
    let guid = client.local_port().port_guid.0;
    let template = PathRecordRepr {
        sgid: port_gid(prefix, guid),
        dgid: port_gid(prefix, peer_guid),
        pkey: pkey | 0x8000,
        numb_path: 1,
        reversible: true,
        ..Default::default()
    };
    let mask = path_mask::SGID | path_mask::DGID | path_mask::PKEY | path_mask::NUMB_PATH | path_mask::REVERSIBLE;
    client.get(mask, &template).await
}

/// A neighbour as an interface would reach it.
#[derive(Debug, Clone, Serialize)]
pub struct Neighbour {
    pub guid: String,
    /// The path's DLID, MTU code and SL; absent when the SA refused it.
    pub dlid: Option<u16>,
    pub mtu: Option<u8>,
    pub sl: Option<u8>,
    pub error: Option<String>,
}

// ---------------------------------------------------------------------------
// The commands

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum JoinKind {
    Full,
    NonMember,
    SendOnly,
    SendOnlyFull,
}

impl JoinKind {
    pub fn bits(self) -> u8 {
        match self {
            JoinKind::Full => join_state::FULL,
            JoinKind::NonMember => join_state::NON_MEMBER,
            JoinKind::SendOnly => join_state::SEND_ONLY_NON_MEMBER,
            JoinKind::SendOnlyFull => join_state::SEND_ONLY_FULL,
        }
    }
}

fn parse_gid(s: &str) -> Result<[u8; 16], String> {
    s.parse::<std::net::Ipv6Addr>().map(|a| a.octets()).map_err(|e| format!("`{s}` is not a GID: {e}"))
}

fn parse_u16(s: &str) -> Result<u16, String> {
    crate::config::parse_u64(s)
        .and_then(|v| u16::try_from(v).ok())
        .ok_or_else(|| format!("`{s}` is not a 16-bit number"))
}

fn parse_u32(s: &str) -> Result<u32, String> {
    crate::config::parse_u64(s)
        .and_then(|v| u32::try_from(v).ok())
        .ok_or_else(|| format!("`{s}` is not a 32-bit number"))
}

#[derive(Debug, Clone, ClapArgs)]
pub struct JoinArgs {
    #[command(flatten)]
    pub port: PortArgs,
    /// The group, as an IPv6-style GID (`::` lets the SA pick one).
    #[arg(long, value_parser = parse_gid)]
    pub mgid: [u8; 16],
    #[arg(long, value_enum, default_value = "full")]
    pub join_state: JoinKind,
    /// The P_Key (the full-member bit is added).
    #[arg(long, default_value = "0xffff", value_parser = parse_u16)]
    pub pkey: u16,
    /// Create the group if needed, with this Q_Key and the values below.
    #[arg(long, value_parser = parse_u32)]
    pub create_qkey: Option<u32>,
    /// MTU code (1-5) to create with, or to ask for exactly.
    #[arg(long, default_value = "4")]
    pub mtu: u8,
    /// Rate code to create with.
    #[arg(long, default_value = "3")]
    pub rate: u8,
    #[arg(long, default_value = "0")]
    pub sl: u8,
    /// Leave instead of join.
    #[arg(long)]
    pub leave: bool,
    #[arg(long, default_value = "0xfe80000000000000", value_parser = |s: &str| crate::config::parse_u64(s).ok_or("not a number"))]
    pub subnet_prefix: u64,
    #[arg(long)]
    pub json: bool,
}

#[derive(Debug, Clone, ClapArgs)]
pub struct IpoibArgs {
    #[command(flatten)]
    pub port: PortArgs,
    /// The partition's P_Key (the full-member bit is added).
    #[arg(long, default_value = "0xffff", value_parser = parse_u16)]
    pub pkey: u16,
    /// MGID scope nibble (2 = link-local, as IPoIB's default).
    #[arg(long, default_value = "2")]
    pub scope: u8,
    /// Leave the groups instead (broadcast last).
    #[arg(long)]
    pub down: bool,
    /// After joining, resolve the path to this neighbour's port GUID as
    /// IPoIB does before unicast (repeatable); printed under `neighbours`.
    #[arg(long = "peer", value_parser = |s: &str| crate::config::parse_u64(s).ok_or("not a GUID"))]
    pub peers: Vec<u64>,
    #[arg(long, default_value = "0xfe80000000000000", value_parser = |s: &str| crate::config::parse_u64(s).ok_or("not a number"))]
    pub subnet_prefix: u64,
}

fn open(port: &PortArgs, what: &str) -> Result<SaClient<crate::transport::io_thread::MadTransport>, String> {
    if port.sim.is_some() {
        return Err(format!("{what}: run against a port (under umad2sim for ibsim), not --sim"));
    }
    let opened = crate::runtime::backend::open(port, TxnConfig::default(), crate::runtime::backend::Role::SaClient)
        .map_err(|e| e.to_string())?;
    SaClient::new(opened.transport).map_err(|e| e.to_string())
}

/// `ibsm sa join`.
pub async fn join_cmd(a: JoinArgs) -> ExitCode {
    let what = if a.leave { "ibsm sa join --leave" } else { "ibsm sa join" };
    let result = async {
        let client = open(&a.port, what)?;
        let create = a.create_qkey.map(|q_key| McMemberRecordRepr {
            q_key,
            mtu: a.mtu,
            rate: a.rate,
            sl: a.sl,
            ..Default::default()
        });
        let ask = JoinAsk {
            mgid: a.mgid,
            port_gid: port_gid(a.subnet_prefix, client.local_port().port_guid.0),
            pkey: a.pkey | 0x8000,
            join_state: a.join_state.bits(),
            create,
        };
        let r = if a.leave { leave(&client, &ask).await } else { join(&client, &ask).await };
        r.map_err(|e| e.to_string())
    };
    match result.await {
        Ok(r) => {
            let g = JoinedGroup::from(&r);
            if a.json {
                println!("{}", serde_json::to_string(&g).unwrap_or_default());
            } else {
                println!(
                    "{} mlid {:#06x} qkey {:#x} mtu {} rate {} sl {} pkey {:#06x} join_state {:#x}",
                    g.mgid, g.mlid, g.q_key, g.mtu, g.rate, g.sl, g.pkey, g.join_state
                );
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{what}: {e}");
            ExitCode::FAILURE
        }
    }
}

#[derive(Debug, Clone, ClapArgs)]
pub struct GroupsArgs {
    #[command(flatten)]
    pub port: PortArgs,
    /// Ask with this SM_Key: the SA's key lists every member (PortGID and
    /// JoinState); without it, one record per group of this port's
    /// partitions, members hidden (IBA C15-0.2-1.12).
    #[arg(long, value_parser = |s: &str| crate::config::parse_u64(s).ok_or("not a number"))]
    pub sm_key: Option<u64>,
    #[arg(long)]
    pub json: bool,
}

/// One MCMemberRecord as `ibsm sa groups` prints it.
#[derive(Debug, Clone, Serialize)]
pub struct MemberRow {
    pub mgid: String,
    pub mlid: u16,
    pub port_gid: String,
    pub join_state: u8,
    pub proxy_join: bool,
    pub q_key: u32,
    pub pkey: u16,
    pub mtu: u8,
    pub rate: u8,
    pub sl: u8,
    pub scope: u8,
}

/// `ibsm sa groups`: the whole MCMemberRecord table (GetTable, reassembled
/// from RMPP; `saquery -m` on ibsim sees only its first MAD).
pub async fn groups_cmd(a: GroupsArgs) -> ExitCode {
    let result = async {
        let client = open(&a.port, "ibsm sa groups")?;
        let client = match a.sm_key {
            Some(k) => client.with_sm_key(k),
            None => client,
        };
        client.get_table(0, &McMemberRecordRepr::default()).await.map_err(|e| e.to_string())
    };
    match result.await {
        Ok(records) => {
            let rows: Vec<MemberRow> = records
                .iter()
                .map(|r| MemberRow {
                    mgid: gid_text(&r.mgid),
                    mlid: r.mlid,
                    port_gid: gid_text(&r.port_gid),
                    join_state: r.join_state,
                    proxy_join: r.proxy_join,
                    q_key: r.q_key,
                    pkey: r.pkey,
                    mtu: r.mtu,
                    rate: r.rate,
                    sl: r.sl,
                    scope: r.scope,
                })
                .collect();
            if a.json {
                println!("{}", serde_json::to_string(&rows).unwrap_or_default());
            } else {
                println!("# mgid mlid port_gid join_state qkey pkey mtu rate sl");
                for r in &rows {
                    println!(
                        "{} {:#06x} {} {:#x} {:#x} {:#06x} {} {} {}",
                        r.mgid, r.mlid, r.port_gid, r.join_state, r.q_key, r.pkey, r.mtu, r.rate, r.sl
                    );
                }
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ibsm sa groups: {e}");
            ExitCode::FAILURE
        }
    }
}

/// `ibsm sa ipoib`.
pub async fn ipoib_cmd(a: IpoibArgs) -> ExitCode {
    let result = async {
        let client = open(&a.port, "ibsm sa ipoib")?;
        if a.down {
            ipoib_down(&client, a.subnet_prefix, a.pkey, a.scope)
                .await
                .map(|n| format!("{{\"left\":{n}}}"))
                .map_err(|e| e.to_string())
        } else {
            let up = ipoib_up(&client, a.subnet_prefix, a.pkey, a.scope).await.map_err(|e| e.to_string())?;
            let mut neighbours = Vec::new();
            for &peer in &a.peers {
                let n = match ipoib_path(&client, a.subnet_prefix, a.pkey, peer).await {
                    Ok(p) => Neighbour {
                        guid: format!("{peer:#018x}"),
                        dlid: Some(p.dlid),
                        mtu: Some(p.mtu),
                        sl: Some(p.sl),
                        error: None,
                    },
                    Err(e) => Neighbour {
                        guid: format!("{peer:#018x}"),
                        dlid: None,
                        mtu: None,
                        sl: None,
                        error: Some(e.to_string()),
                    },
                };
                neighbours.push(n);
            }
            let mut v = serde_json::to_value(&up).map_err(|e| e.to_string())?;
            v["neighbours"] = serde_json::to_value(&neighbours).map_err(|e| e.to_string())?;
            Ok(v.to_string())
        }
    };
    match result.await {
        Ok(text) => {
            println!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ibsm sa ipoib: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ipoib_mgids_are_the_kernels() {
        assert_eq!(gid_text(&broadcast_mgid(2, 0xffff)), "ff12:401b:ffff::ffff:ffff");
        assert_eq!(gid_text(&broadcast_mgid(2, 0x0010)), "ff12:401b:8010::ffff:ffff");
        assert_eq!(gid_text(&ipv4_group(2, 0xffff, [224, 0, 0, 1])), "ff12:401b:ffff::e000:1");
        let groups = ipoib_groups(2, 0xffff, 0x0002_c903_00a1_b2c1);
        assert_eq!(gid_text(&groups[2]), "ff12:601b:ffff::1");
        assert_eq!(gid_text(&groups[3]), "ff12:601b:ffff::2");
        // Low 24 bits of the interface ID a1:b2:c1.
        assert_eq!(gid_text(&groups[4]), "ff12:601b:ffff::1:ffa1:b2c1");
    }

    #[test]
    fn a_join_without_creation_names_only_what_it_must() {
        let ask = JoinAsk {
            mgid: broadcast_mgid(2, 0xffff),
            port_gid: port_gid(0xfe80 << 48, 7),
            pkey: 0xffff,
            join_state: 1,
            create: None,
        };
        let (mask, rec) = join_request(&ask);
        assert_eq!(mask, m::MGID | m::PORT_GID | m::PKEY | m::JOIN_STATE);
        assert_eq!(rec.port_gid[15], 7);
        let create = McMemberRecordRepr { q_key: 0x0b1b, mtu: 4, rate: 3, ..Default::default() };
        let (mask, rec) = join_request(&JoinAsk { create: Some(create), ..ask });
        assert!(mask & m::Q_KEY != 0 && mask & m::SL != 0 && mask & m::FLOW_LABEL != 0);
        assert_eq!((rec.q_key, rec.mtu_selector, rec.mtu, rec.rate), (0x0b1b, 2, 4, 3));
    }

    #[test]
    fn mtu_codes() {
        assert_eq!(mtu_bytes(4), Some(2048));
        assert_eq!(mtu_bytes(5), Some(4096));
        assert_eq!(mtu_bytes(0), None);
        assert_eq!(mtu_bytes(4).unwrap() - IPOIB_HEADER, 2044);
    }
}
