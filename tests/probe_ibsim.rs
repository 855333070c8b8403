//! `ibsm probe` against smpquery on the same ibsim: for several example
//! topologies and directed-route paths, both tools decode the same
//! attribute and every field both print must agree.
//!
//! Fails (does not skip) when ibsim, libumad2sim or smpquery is missing.

#[path = "transport_support/ibsim.rs"]
mod ibsim;

use std::collections::BTreeMap;

use ibsim::{fields, net, stderr, stdout, Ibsim};

/// Fields smpquery prints that are not a decode of the wire value.
const SKIP: &[&str] = &["Mkey"];

/// One attribute fetched by both tools.
struct Pair {
    what: String,
    ours: Result<String, String>,
    theirs: Result<String, String>,
}

/// Which backend `ibsm probe` uses: libibumad on ibsim (attached at a
/// host), or the in-process simulator on the same net file from the node
/// smpquery sits on.
#[derive(Clone, Copy)]
enum Ours<'a> {
    Umad,
    Sim { node: &'a str },
}

fn fetch(
    sim: &Ibsim,
    ours_on: Ours,
    host: Option<&str>,
    path: &str,
    attr: &str,
    amod: u32,
    smpq_args: &[&str],
) -> Pair {
    let amod_s = amod.to_string();
    let args = ["probe", "--timeout-ms", "300", "--path", path, attr, &amod_s];
    let o = match ours_on {
        Ours::Umad => sim.ibsm(host, &args),
        Ours::Sim { node } => {
            let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_ibsm"));
            c.args(args).arg("--sim").arg(&sim.net).args(["--sm-node", node]);
            ibsim::run_with_timeout(c, std::time::Duration::from_secs(60))
        }
    };
    let ours = if o.status.success() { Ok(stdout(&o)) } else { Err(stderr(&o)) };
    let mut args = vec!["-D", attr_for_smpquery(attr), path];
    args.extend_from_slice(smpq_args);
    let o = sim.smpquery(host, &args);
    let theirs = if o.status.success() { Ok(stdout(&o)) } else { Err(stderr(&o)) };
    Pair { what: format!("{attr} {amod:#x} at {path} (host {host:?}, {})", sim.net.display()), ours, theirs }
}

fn attr_for_smpquery(attr: &str) -> &str {
    match attr {
        "pkeys" => "pkeys",
        other => other,
    }
}

/// Compares the fields both print; returns how many were compared.
fn compare(p: &Pair) -> usize {
    let (ours, theirs) = match (&p.ours, &p.theirs) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(a), Err(_)) => {
            // Both refused: fine, but ours must say why.
            assert!(!a.trim().is_empty(), "{}: ibsm failed silently", p.what);
            return 0;
        }
        (a, b) => panic!("{}: one tool failed\nibsm: {a:?}\nsmpquery: {b:?}", p.what),
    };
    let mine: BTreeMap<String, String> = fields(ours).into_iter().collect();
    let mut n = 0;
    for (name, value) in fields(theirs) {
        let name = if name == "Node Description" { "NodeDesc".to_string() } else { name };
        if SKIP.contains(&name.as_str()) {
            continue;
        }
        let mine = mine
            .get(&name)
            .unwrap_or_else(|| panic!("{}: smpquery prints {name} = {value}, ibsm does not\nibsm:\n{ours}", p.what));
        assert_eq!(mine, &value, "{}: field {name}\nibsm:\n{ours}\nsmpquery:\n{theirs}", p.what);
        n += 1;
    }
    n
}

/// smpquery prints a P_Key table as rows `   0: 0xffff 0x0000 ...`; ours
/// prints `PKey[i]:....0xffff` for the requested block of 32.
fn compare_pkeys(p: &Pair) -> usize {
    let (ours, theirs) = match (&p.ours, &p.theirs) {
        (Ok(a), Ok(b)) => (a, b),
        (a, b) => panic!("{}: pkeys failed\nibsm: {a:?}\nsmpquery: {b:?}", p.what),
    };
    let mut table: Vec<String> = Vec::new();
    for line in theirs.lines() {
        let Some((idx, rest)) = line.trim_start().split_once(": ") else {
            continue;
        };
        if idx.parse::<usize>().ok() != Some(table.len()) {
            continue;
        }
        table.extend(rest.split_whitespace().map(str::to_string));
    }
    assert!(table.len() >= 32, "{}: smpquery printed {} P_Keys:\n{theirs}", p.what, table.len());
    let mine: BTreeMap<String, String> = fields(ours).into_iter().collect();
    for (i, v) in table.iter().take(32).enumerate() {
        assert_eq!(mine.get(&format!("PKey[{i}]")), Some(v), "{}: P_Key {i}\nibsm:\n{ours}", p.what);
    }
    32
}

/// Probes every attribute at each path and checks both tools agree.
fn check(netfile: &str, host: Option<&str>, paths: &[&str]) {
    check_with(netfile, Ours::Umad, host, paths, true)
}

fn check_with(netfile: &str, ours: Ours, host: Option<&str>, paths: &[&str], switch_info: bool) {
    let sim = Ibsim::start(&net(netfile));
    let mut compared = 0;
    for &path in paths {
        let ni = fetch(&sim, ours, host, path, "nodeinfo", 0, &[]);
        let n = compare(&ni);
        assert!(n >= 11, "{}: only {n} NodeInfo fields compared", ni.what);
        compared += n;
        let info: BTreeMap<String, String> = fields(ni.theirs.as_ref().unwrap()).into_iter().collect();
        let is_switch = info["NodeType"] == "Switch";
        let num_ports: u32 = info["NumPorts"].parse().unwrap();

        let nd = fetch(&sim, ours, host, path, "nodedesc", 0, &[]);
        assert_eq!(compare(&nd), 1, "{}", nd.what);
        compared += 1;

        // PortInfo: on a CA modifier 0 is the port the SMP came in on; on a
        // switch also look at a physical port and the last one.
        let mut ports = vec![0u32];
        if is_switch {
            ports.extend([1, num_ports]);
        }
        for port in ports {
            let extra = port.to_string();
            let pi = fetch(&sim, ours, host, path, "portinfo", port, &[&extra]);
            let n = compare(&pi);
            assert!(n >= 45, "{}: only {n} PortInfo fields compared", pi.what);
            compared += n;
        }

        // SwitchInfo: agreed fields on a switch, a refusal by both on a CA.
        // (The simulator reports a larger LinearFDBCap than ibsim's
        // compiled-in limit, so the sim run skips it.)
        if !switch_info {
            continue;
        }
        let si = fetch(&sim, ours, host, path, "switchinfo", 0, &[]);
        let n = compare(&si);
        if is_switch {
            assert!(n >= 17, "{}: only {n} SwitchInfo fields compared", si.what);
        } else {
            assert_eq!(n, 0);
            let e = si.ours.as_ref().unwrap_err();
            assert!(e.contains("status") && e.contains(path), "{}: {e}", si.what);
        }
        compared += n;

        // P_Key table block 0 (switches: of port 1, modifier port << 16).
        let pk = if is_switch {
            fetch(&sim, ours, host, path, "pkeys", 1 << 16, &["1"])
        } else {
            fetch(&sim, ours, host, path, "pkeys", 0, &[])
        };
        compared += compare_pkeys(&pk);
    }
    let by = match ours {
        Ours::Umad => "umad".to_string(),
        Ours::Sim { node } => format!("--sim from {node}"),
    };
    eprintln!("{netfile} from {host:?} ({by}): {compared} fields agree over {} paths", paths.len());
}

#[test]
fn probe_matches_smpquery_on_net() {
    check("net", None, &["0", "0,1", "0,2", "0,3", "0,3,4"]);
}

#[test]
fn probe_matches_smpquery_on_net_1() {
    check("net.1", None, &["0", "0,1", "0,4"]);
}

#[test]
fn probe_matches_smpquery_on_2sw2path() {
    check("net.2sw2path", None, &["0", "0,1", "0,3", "0,3,1", "0,5,1"]);
}

#[test]
fn probe_matches_smpquery_on_2sw2path4hca() {
    check("net.2sw2path4hca", None, &["0", "0,2", "0,5", "0,5,2"]);
}

#[test]
fn probe_matches_smpquery_on_2sw2path4hca2port_from_a_switch_and_a_ca() {
    check("net.2sw2path4hca2port", None, &["0", "0,2", "0,3,1", "0,5,2"]);
    check("net.2sw2path4hca2port", Some("Hca1"), &["0", "0,1", "0,1,3", "0,1,3,2"]);
}

/// `ibsm probe --sim` (the in-process fabric) decodes the same values as
/// smpquery reads from ibsim on the same net file.
#[test]
fn probe_sim_backend_matches_smpquery_on_ibsim() {
    check_with("net", Ours::Sim { node: "Switch1" }, None, &["0", "0,1", "0,3", "0,3,4"], false);
    check_with(
        "net.2sw2path4hca2port",
        Ours::Sim { node: "Hca1" },
        Some("Hca1"),
        &["0", "0,1", "0,1,3", "0,1,3,2"],
        false,
    );
}
