//! `ibsm sa path` against OpenSM's SA on ibsim: every answer must agree
//! with what `saquery` reads from the same SA, and a query for a LID no
//! port has must fail naming the pair while the others are still printed.

#[path = "transport_support/ibsim.rs"]
mod ibsim;

use std::collections::BTreeMap;
use std::process::Stdio;
use std::time::Duration;

use ibsim::{generated, run_with_timeout, stdout, tool, wait_for_log, Ibsim, KillOnDrop};

/// End-port LIDs from opensm-subnet.lst (`{ CA... {desc} LID:xxxx PN:nn }`).
fn ca_lids(subnet_lst: &str) -> Vec<u16> {
    let mut lids: Vec<u16> = Vec::new();
    for side in subnet_lst.split("{ ").filter(|s| s.starts_with("CA")) {
        if let Some(at) = side.find(" LID:") {
            let hex = &side[at + 5..at + 9];
            lids.push(u16::from_str_radix(hex, 16).unwrap());
        }
    }
    lids.sort_unstable();
    lids.dedup();
    lids
}

/// `saquery --src-to-dst` printed `sl......0x1`; returns the SL.
fn saquery_sl(text: &str) -> u8 {
    let line = text.lines().find(|l| l.trim_start().starts_with("sl.")).unwrap_or_else(|| panic!("no sl in {text}"));
    let v = line.rsplit('.').next().unwrap().trim();
    u8::from_str_radix(v.trim_start_matches("0x"), 16).unwrap()
}

#[test]
fn path_records_match_saquery_on_opensm_nue() {
    let dir = tempfile::tempdir().unwrap();
    let (net, flags, host) = generated("torus2d:4x4", dir.path());
    let sim = Ibsim::start_with(&net, &flags);

    let osm_dir = tempfile::tempdir().unwrap();
    let log = osm_dir.path().join("opensm.log");
    let conf = osm_dir.path().join("opensm.conf");
    std::fs::write(&conf, "max_op_vls 8\nnue_max_num_vls 8\n").unwrap();
    let mut c = sim.client(&tool("opensm"), Some(&host));
    // Nue, because its SL per pair is fixed: OpenSM's dfsssp draws the SL at
    // random within a layer's VLs on every query.
    c.args(["-R", "nue", "-Q", "-d2", "-F"])
        .arg(&conf)
        .arg("-f")
        .arg(&log)
        .env("OSM_TMP_DIR", osm_dir.path())
        .env("OSM_CACHE_DIR", osm_dir.path())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    let _osm = KillOnDrop(c.spawn().expect("starting opensm"));
    assert!(wait_for_log(&log, "SUBNET UP", Duration::from_secs(60)), "OpenSM did not reach SUBNET UP");
    let lids = ca_lids(&std::fs::read_to_string(osm_dir.path().join("opensm-subnet.lst")).unwrap());
    assert_eq!(lids.len(), 16, "{lids:?}");

    // Every ordered pair of hosts in one run, plus one LID nobody has.
    let mut args: Vec<String> = vec!["sa".into(), "path".into()];
    for &a in &lids {
        for &b in &lids {
            if a != b {
                args.push("--src-to-dst".into());
                args.push(format!("{a}:{b}"));
            }
        }
    }
    args.extend(["--src-to-dst".into(), format!("{}:999", lids[0])]);
    let argv: Vec<&str> = args.iter().map(String::as_str).collect();
    let o = sim.ibsm(Some(&host), &argv);
    assert!(!o.status.success(), "a query for LID 999 must fail the run");
    let err = ibsim::stderr(&o);
    assert!(err.contains(&format!("{}->999", lids[0])) && err.contains("ERR_NO_RECORDS"), "{err}");
    let mut ours: BTreeMap<(u16, u16), u8> = BTreeMap::new();
    for line in stdout(&o).lines().filter(|l| !l.starts_with('#')) {
        let f: Vec<u16> = line.split_whitespace().map(|x| x.parse().unwrap()).collect();
        ours.insert((f[0], f[1]), f[2] as u8);
    }
    assert_eq!(ours.len(), 16 * 15, "every good pair answered");
    // Nue puts a torus's paths on several SLs.
    let used: std::collections::BTreeSet<u8> = ours.values().copied().collect();
    assert!(used.len() > 1, "{used:?}");

    // saquery reads the same SLs from the same SA.
    for &(a, b) in ours.keys().step_by(37) {
        let mut c = sim.client(&tool("saquery"), Some(&host));
        c.args(["--src-to-dst", &format!("{a}:{b}")]);
        let q = run_with_timeout(c, Duration::from_secs(30));
        assert!(q.status.success(), "saquery {a}:{b}: {}", ibsim::stderr(&q));
        assert_eq!(saquery_sl(&stdout(&q)), ours[&(a, b)], "SL of {a}->{b}");
    }
}
