//! `ibsm topology`: topology files and generators.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::Subcommand;

use crate::topology::{writer, NodeKind, Topology};

#[derive(Debug, Clone, Subcommand)]
pub enum Args {
    /// Write a topology (file or generator spec) in ibsim's net format.
    Write {
        topology: String,
        #[arg(long, value_name = "FILE")]
        out: PathBuf,
    },
    /// Print the ibsim flags (-N/-S/-P) a topology needs.
    IbsimArgs { topology: String },
    /// Print the name of the node an SM should sit on (the first host).
    SmNode { topology: String },
    /// Print the fewest SMPs a cold bring-up of the topology needs, and how
    /// that figure is made up.
    MinimumSmps { topology: String },
    /// Print a summary: nodes, switches, hosts, links.
    Show { topology: String },
    /// Print the topology for Graphviz (`| dot -Tsvg > fabric.svg`):
    /// switches as boxes, CAs as ellipses, every cable an edge labelled
    /// with its ports. Offline, so every link is drawn as cabled; a running
    /// SM's drawing, coloured by link state, is `/dump/dot`.
    Dot { topology: String },
}

/// `ibsm topology`.
pub async fn run(cmd: Args) -> ExitCode {
    let load = |t: &str| Topology::from_spec_or_file(t).map_err(|e| format!("{t}: {e}"));
    let result = (|| -> Result<String, String> {
        match cmd {
            Args::Write { topology, out } => {
                let t = load(&topology)?;
                writer::write_net_file(&t, &out).map_err(|e| e.to_string())?;
                Ok(String::new())
            }
            Args::IbsimArgs { topology } => Ok(writer::ibsim_args(&load(&topology)?).join(" ") + "\n"),
            Args::SmNode { topology } => {
                let t = load(&topology)?;
                let h = t.hosts().next().ok_or_else(|| format!("{topology} has no host"))?;
                Ok(format!("{}\n", t.node(h).name))
            }
            Args::MinimumSmps { topology } => {
                let m = minimum_smps(&load(&topology)?);
                Ok(format!("{} {m:?}\n", m.total()))
            }
            Args::Show { topology } => {
                let t = load(&topology)?;
                Ok(format!(
                    "{} nodes: {} switches, {} hosts; {} links\n",
                    t.nodes.len(),
                    t.switches().count(),
                    t.hosts().count(),
                    t.links.len()
                ))
            }
            Args::Dot { topology } => Ok(crate::dump::topology_dot(&load(&topology)?)),
        }
    })();
    match result {
        Ok(text) => {
            print!("{text}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("ibsm topology: {e}");
            ExitCode::FAILURE
        }
    }
}

/// The SMPs no cold bring-up can avoid, by the definition: the
/// NodeInfo and PortInfo reads discovery needs, the Sets that change state,
/// and one LFT write per 64-LID block per switch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MinimumSmps {
    /// One per cable (the far end's NodeInfo) plus the SM's own node.
    pub node_info: u64,
    /// Every switch port including 0, and every cabled CA port.
    pub port_info_reads: u64,
    /// Two per cabled port (to ARMED with its parameters, then ACTIVE), one
    /// per switch port 0 (its LID).
    pub port_info_sets: u64,
    /// LinearFDBTop changes on every switch.
    pub switch_info_sets: u64,
    pub lft_blocks: u64,
}

impl MinimumSmps {
    pub fn total(&self) -> u64 {
        self.node_info + self.port_info_reads + self.port_info_sets + self.switch_info_sets + self.lft_blocks
    }
}

pub fn minimum_smps(t: &Topology) -> MinimumSmps {
    let switches = t.switches().count() as u64;
    let cabled_ca_ports =
        t.links.iter().flat_map(|l| [l.a, l.b]).filter(|p| t.node(p.node).kind != NodeKind::Switch).count() as u64;
    let switch_ports: u64 = t.switches().map(|s| u64::from(t.node(s).num_ports) + 1).sum();
    let cabled_ports = 2 * t.links.len() as u64;
    // LMC 0: one LID per CA port and per switch.
    let max_lid = cabled_ca_ports + switches;
    MinimumSmps {
        node_info: t.links.len() as u64 + 1,
        port_info_reads: switch_ports + cabled_ca_ports,
        port_info_sets: 2 * cabled_ports + switches,
        switch_info_sets: switches,
        lft_blocks: switches * (max_lid / 64 + 1),
    }
}
