//! The simulator against ibsim: the same topology, written as an ibsim net
//! file, must answer the same SMPs with the same bytes. Needs ibsim,
//! umad2sim and smpdump (Debian: ibsim-utils, infiniband-diags); fails,
//! rather than skips, without them.

mod sim_support;

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use ibsm::mad::AttributeId;
use ibsm::sim::FabricBuilder;
use ibsm::topology::{to_net_string, NodeKind, Topology};
use sim_support::*;

const UMAD2SIM: &str = "/usr/lib/x86_64-linux-gnu/umad2sim/libumad2sim.so";

/// An ibsim process, killed on drop.
struct Ibsim {
    child: Child,
    sock: String,
    dir: tempfile::TempDir,
}

impl Drop for Ibsim {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Ibsim {
    fn start(topo: &Topology) -> Ibsim {
        let dir = tempfile::tempdir().unwrap();
        let net = dir.path().join("net");
        std::fs::write(&net, to_net_string(topo).unwrap()).unwrap();
        let sock = format!("ibsm-sim-cmp-{}", std::process::id());
        let log = std::fs::File::create(dir.path().join("ibsim.log")).unwrap();
        let child = Command::new("ibsim")
            .args(["-s", "-n"])
            .arg(&net)
            .env("IBSIM_SOCKNAME", &sock)
            .current_dir(dir.path())
            .stdin(Stdio::null())
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("ibsim must be installed (Debian package ibsim-utils)");
        Ibsim { child, sock, dir }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("ibsim.log")).unwrap_or_default()
    }

    /// `smpdump -D <path> <attr> <mod>` from `host`'s port 1: the 64 data
    /// bytes and the status word, or None when nothing answered.
    fn smpdump(&self, host: &str, path: &[u8], attr: u16, amod: u32) -> Option<([u8; 64], u16)> {
        let dr = std::iter::once("0".to_string()).chain(path.iter().map(|p| p.to_string())).collect::<Vec<_>>();
        let out = Command::new("smpdump")
            .args(["-D", &dr.join(","), &format!("{attr:#x}"), &format!("{amod:#x}")])
            .env("LD_PRELOAD", UMAD2SIM)
            .env("IBSIM_SOCKNAME", &self.sock)
            .env("SIM_HOST", host)
            .current_dir(self.dir.path())
            .stdin(Stdio::null())
            .output()
            .expect("smpdump must be installed (Debian package infiniband-diags)");
        parse_dump(&String::from_utf8_lossy(&out.stdout))
    }
}

fn parse_dump(text: &str) -> Option<([u8; 64], u16)> {
    let mut data = Vec::new();
    let mut status = None;
    for line in text.lines() {
        if let Some(s) = line.strip_prefix("SMP status: ") {
            status = u16::from_str_radix(s.trim().trim_start_matches("0x"), 16).ok();
        } else if data.len() < 64 {
            for word in line.split_whitespace() {
                let w = u16::from_str_radix(word, 16).ok()?;
                data.extend_from_slice(&w.to_be_bytes());
            }
        }
    }
    Some((data.try_into().ok()?, status?))
}

fn which(tool: &str) -> Option<PathBuf> {
    std::env::var_os("PATH")?.to_str()?.split(':').map(|d| Path::new(d).join(tool)).find(|p| p.exists())
}

#[test]
fn fresh_fabric_answers_like_ibsim() {
    for tool in ["ibsim", "smpdump"] {
        assert!(which(tool).is_some(), "{tool} is not installed; this test needs ibsim-utils and infiniband-diags");
    }
    assert!(Path::new(UMAD2SIM).exists(), "{UMAD2SIM} missing (ibsim-utils)");
    let mut topo = small();
    // One faster and one narrower link, so training is compared too.
    topo.links[2].speed = 4; // S1-S2 QDR
    topo.links[3].width = 1; // S2-H3 1x
    topo.links[3].speed = 2; // DDR
    let ibsim = Ibsim::start(&topo);

    // Wait until ibsim answers, then read its LinearFDBCap from the log.
    let t = Instant::now();
    while ibsim.smpdump("H-0001", &[], 0x11, 0).is_none() {
        assert!(t.elapsed() < Duration::from_secs(10), "ibsim did not come up:\n{}", ibsim.log());
        std::thread::sleep(Duration::from_millis(100));
    }
    let log = ibsim.log();
    let cap: u16 = log
        .lines()
        .find_map(|l| l.strip_prefix("MaxLinearCap").map(|r| r.trim_start_matches([' ', '=']).trim().parse().unwrap()))
        .expect("ibsim prints MaxLinearCap");

    let f = FabricBuilder::new(&topo).linear_fdb_cap(cap).build_shared().unwrap();
    let mut sm = TestSm::attach(&f, "H-0001", 1);
    let paths = dr_paths(&topo, H1, 1);
    let mut compared = 0;
    let mut mismatches = Vec::new();
    for (n, node) in topo.nodes.iter().enumerate() {
        let path = &paths[&n];
        let mut queries: Vec<(AttributeId, u32)> = vec![
            (AttributeId::NodeInfo, 0),
            (AttributeId::NodeDescription, 0),
            (AttributeId::PKeyTable, 0),
            (AttributeId::SlToVlMappingTable, 0),
            (AttributeId::GuidInfo, 0),
        ];
        let first = if node.kind == NodeKind::Switch { 0 } else { 1 };
        for p in first..=node.num_ports {
            queries.push((AttributeId::PortInfo, p as u32));
        }
        if node.kind == NodeKind::Switch {
            queries.extend([
                (AttributeId::SwitchInfo, 0),
                (AttributeId::LinearForwardingTable, 0),
                (AttributeId::PKeyTable, 1 << 16),
                (AttributeId::SlToVlMappingTable, 0x0102),
                (AttributeId::VlArbitrationTable, (1 << 16) | 1),
                (AttributeId::VlArbitrationTable, 3 << 16),
                (AttributeId::PortInfo, node.num_ports as u32 + 1),
            ]);
        } else {
            queries.extend([(AttributeId::VlArbitrationTable, 1 << 16), (AttributeId::VlArbitrationTable, 3 << 16)]);
        }
        for (attr, amod) in queries {
            let theirs = ibsim.smpdump("H-0001", path, attr.into(), amod);
            let ours = sm.dr_get(path, attr, amod).map(|r| {
                let mut d = [0u8; 64];
                d.copy_from_slice(&r.data);
                // smpdump prints the raw status word: D bit included.
                (d, r.header.status | 0x8000)
            });
            compared += 1;
            if theirs != ours {
                mismatches.push(format!(
                    "{} path {path:?} attr {attr:?} mod {amod:#x}:\n  ibsim {:02x?}\n  ours  {:02x?}",
                    node.name, theirs, ours
                ));
            }
        }
    }
    assert!(compared > 40);
    assert!(mismatches.is_empty(), "{} of {compared} answers differ:\n{}", mismatches.len(), mismatches.join("\n"));
}
