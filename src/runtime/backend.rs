//! Choosing and opening the port the SM (or a tool) works through: a real
//! port via libibumad, or a port in the in-process simulated fabric.

use std::time::Duration;

use clap::Args;
use tokio::sync::mpsc;

use crate::exchange::txn::TxnConfig;
use crate::sim::{FabricBuilder, SharedFabric, SimDevice};
use crate::topology::{NodeKind, Topology};
use crate::transport::io_thread::MadTransport;
use crate::transport::umad::{Agent, PortSelector, UmadConfig, UmadDevice};
use crate::transport::{Datagram, DeviceError};
use crate::types::Guid;

/// The topology `--sim builtin` runs: a small 2-level fat tree.
pub const BUILTIN_TOPOLOGY: &str = "fattree2:radix=8";

#[derive(Debug, Clone, Default, Args)]
pub struct PortArgs {
    /// Run on the in-process simulated fabric: a topology file (ibsim net or
    /// ibnetdiscover format), a generator spec such as
    /// `fattree2:radix=8`, or `builtin`.
    #[arg(long, value_name = "TOPOLOGY", conflicts_with_all = ["ca", "guid"])]
    pub sim: Option<String>,
    /// With --sim: the node the SM's port is on (default: the first host).
    #[arg(long, value_name = "NAME", requires = "sim")]
    pub sm_node: Option<String>,
    /// With --sim: the seed for every random choice the simulator makes.
    #[arg(long, default_value_t = 1, requires = "sim")]
    pub seed: u64,
    /// The HCA to use (e.g. mlx5_0).
    #[arg(long, value_name = "CA")]
    pub ca: Option<String>,
    /// The port number on --ca (default: the first active one).
    #[arg(long, value_name = "N", requires = "ca")]
    pub port: Option<u8>,
    /// The port to use, by port GUID.
    #[arg(long, value_name = "GUID", value_parser = parse_guid, conflicts_with = "ca")]
    pub guid: Option<Guid>,
}

fn parse_guid(s: &str) -> Result<Guid, String> {
    crate::config::parse_u64(s).map(Guid).ok_or_else(|| format!("`{s}` is not a GUID (decimal or 0x-hex)"))
}

#[derive(Debug, thiserror::Error)]
pub enum BackendError {
    #[error("topology {source_text}: {error}")]
    Topology { source_text: String, error: Box<crate::topology::TopologyError> },
    #[error("simulated fabric: {0}")]
    Sim(String),
    #[error("{0}")]
    Device(#[from] DeviceError),
    #[error(
        "no InfiniBand port on this machine ({0}); to run without hardware use --sim builtin \
         (or --sim <topology file | generator spec>)"
    )]
    NoHardware(String),
}

/// An open port, bridged to tokio.
pub struct Opened {
    pub transport: MadTransport,
    pub unsolicited: mpsc::Receiver<Datagram>,
    /// The simulated fabric, when the port is simulated.
    pub fabric: Option<SharedFabric>,
    pub topology: Option<Topology>,
}

/// What the port is for: an SM receives requests and marks its port IsSM;
/// a tool only sends requests and reads their answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    SubnetManager,
    Tool,
    /// A tool that queries the SA (QP1).
    SaClient,
}

impl Role {
    /// The umad agents a port in this role registers, in order.
    pub fn agents(self) -> Vec<Agent> {
        let [smi_dr, smi_lid] = Agent::smi(self == Role::SubnetManager);
        match self {
            // Registering the SA class keeps SA queries from reaching a port
            // with no agent for them (libumad2sim crashes the client then).
            // The performance manager's requests need a PerfMgt client
            // agent for their answers to come back.
            Role::SubnetManager => vec![smi_dr, smi_lid, Agent::sa(true), Agent::perf_mgt(false)],
            Role::Tool => vec![smi_dr, smi_lid],
            Role::SaClient => vec![smi_dr, smi_lid, Agent::sa(false)],
        }
    }
}

pub fn open(args: &PortArgs, txn: TxnConfig, role: Role) -> Result<Opened, BackendError> {
    match &args.sim {
        Some(spec) => open_sim(spec, args, txn, role),
        None => open_umad(args, txn, role),
    }
}

fn open_sim(spec: &str, args: &PortArgs, txn: TxnConfig, role: Role) -> Result<Opened, BackendError> {
    let text = if spec == "builtin" { BUILTIN_TOPOLOGY } else { spec };
    let topology = Topology::from_spec_or_file(text)
        .map_err(|error| BackendError::Topology { source_text: text.to_string(), error: Box::new(error) })?;
    let fabric =
        FabricBuilder::new(&topology).seed(args.seed).build_shared().map_err(|e| BackendError::Sim(e.to_string()))?;
    let node = match &args.sm_node {
        Some(name) => topology
            .node_by_name(name)
            .ok_or_else(|| BackendError::Sim(format!("--sm-node {name}: no such node in {text}")))?,
        None => topology
            .hosts()
            .next()
            .ok_or_else(|| BackendError::Sim(format!("{text} has no host for the SM to sit on")))?,
    };
    let port = if topology.node(node).kind == NodeKind::Switch { 0 } else { 1 };
    let device = SimDevice::attach(&fabric, node, port).map_err(|e| BackendError::Sim(e.to_string()))?;
    if role == Role::SubnetManager {
        device.set_is_sm(true);
    }
    let (transport, unsolicited) = MadTransport::spawn(device, txn);
    Ok(Opened { transport, unsolicited, fabric: Some(fabric), topology: Some(topology) })
}

fn open_umad(args: &PortArgs, txn: TxnConfig, role: Role) -> Result<Opened, BackendError> {
    let port = match (&args.ca, args.guid) {
        (Some(name), _) => PortSelector::Ca { name: name.clone(), port: args.port },
        (None, Some(g)) => PortSelector::Guid(g),
        (None, None) => PortSelector::First,
    };
    let explicit = port != PortSelector::First;
    let cfg = UmadConfig {
        port,
        agents: role.agents(),
        // The kernel must wait at least as long as all our attempts.
        kernel_timeout: txn.timeout.max(Duration::from_millis(100)),
    };
    let mut device = match UmadDevice::open(&cfg) {
        Ok(d) => d,
        // With no port named, any failure to find one means "no usable
        // hardware here"; a RoCE-only machine still gets its own message.
        Err(e) if !explicit && !matches!(e, DeviceError::NotInfiniBand { .. }) => {
            return Err(BackendError::NoHardware(e.to_string()))
        }
        Err(e) => return Err(e.into()),
    };
    if role == Role::SubnetManager {
        device.set_is_sm(true)?;
    }
    let (transport, unsolicited) = MadTransport::spawn(device, txn);
    Ok(Opened { transport, unsolicited, fabric: None, topology: None })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (class, version, server) of each agent, in registration order.
    fn agents(role: Role) -> Vec<(u8, u8, bool)> {
        role.agents().iter().map(|a| (u8::from(a.class), a.version, a.server)).collect()
    }

    #[test]
    fn each_role_registers_its_agents() {
        assert_eq!(
            agents(Role::SubnetManager),
            vec![(0x81, 1, true), (0x01, 1, true), (0x03, 2, true), (0x04, 1, false)]
        );
        assert_eq!(agents(Role::Tool), vec![(0x81, 1, false), (0x01, 1, false)]);
        assert_eq!(agents(Role::SaClient), vec![(0x81, 1, false), (0x01, 1, false), (0x03, 2, false)]);
    }
}
