//! `ibsm route` and `ibsm analyze`, run as the binary.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

fn ibsm(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ibsm")).args(args).output().expect("run ibsm")
}

fn ok_json(args: &[&str]) -> Value {
    let out = ibsm(args);
    assert!(out.status.success(), "ibsm {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)))
}

fn failure(args: &[&str]) -> String {
    let out = ibsm(args);
    assert!(!out.status.success(), "ibsm {args:?} should fail: {}", String::from_utf8_lossy(&out.stdout));
    String::from_utf8_lossy(&out.stderr).into_owned()
}

fn fixture(name: &str) -> String {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/lfts").join(name).display().to_string()
}

fn tmp(dir: &tempfile::TempDir, name: &str) -> PathBuf {
    dir.path().join(name)
}

#[test]
fn route_then_analyze_the_written_dump_gives_the_same_figures() {
    let dir = tempfile::tempdir().unwrap();
    for (i, topo) in ["fattree2:radix=8", "torus2d:5x3", "random:switches=12,hosts=20,seed=3", "dragonfly:routers=3"]
        .into_iter()
        .enumerate()
    {
        let dump = tmp(&dir, &format!("t{i}.dump"));
        let d = dump.to_str().unwrap();
        let routed = ok_json(&["route", "-t", topo, "-e", "minhop", "--lfts-out", d, "--json"]);
        assert_eq!(routed["engine"], "minhop");
        assert_eq!(routed["lfts_out"], d);
        let analysed = ok_json(&["analyze", "-t", topo, "--lfts", d, "--json"]);
        assert_eq!(analysed["format"], "opensm-lfts.dump");
        // The dump's comments rebuild the node-order LIDs, so every figure
        // matches, including the example links and the cycle if any.
        assert_eq!(routed["analysis"], analysed["analysis"], "{topo}");
        assert_eq!(routed["fabric"], analysed["fabric"], "{topo}");
        assert_eq!(routed["analysis"]["summary"]["valid"], true, "{topo}");
    }
}

#[test]
fn minhop_on_a_torus_is_reported_cyclic_with_its_cycle() {
    let out = ibsm(&["route", "-t", "torus2d:5x3", "-e", "minhop"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("deadlock free: NO"), "{text}");
    assert!(text.contains("cycle of 5 channels:"), "{text}");
    let v = ok_json(&["route", "-t", "torus2d:5x3", "-e", "minhop", "--json"]);
    let cycle = v["analysis"]["deadlock"]["vls"][0]["cycle"].as_array().unwrap();
    assert_eq!(cycle.len(), 5);
    for (a, b) in cycle.iter().zip(cycle.iter().cycle().skip(1)) {
        assert_eq!(a["to"], b["from"], "{cycle:?}");
    }
}

#[test]
fn opensm_dumps_are_analysed_on_their_own_lids() {
    let net = fixture("ft2-r4.net");
    let v = ok_json(&["analyze", "-t", &net, "--lfts", &fixture("ft2-r4-minhop.lfts.dump"), "--json"]);
    let s = &v["analysis"]["summary"];
    assert_eq!((s["valid"].as_bool(), s["deadlock_free"].as_bool()), (Some(true), Some(true)));
    assert_eq!(s["max_stretch"], 0);
    assert_eq!(v["fabric"]["max_lid"], 14);
    // ibroute output of the same fabric: the same analysis.
    let ib = ok_json(&["analyze", "-t", &net, "--lfts", &fixture("ft2-r4-minhop.ibroute"), "--json"]);
    assert_eq!(ib["format"], "ibroute");
    assert_eq!(ib["analysis"], v["analysis"]);
    // And on the LIDs of OpenSM's guid2lid instead of the dump's comments.
    let g = format!("guid2lid={}", fixture("ft2-r4-minhop.guid2lid"));
    let gv = ok_json(&["analyze", "-t", &net, "--lfts", &fixture("ft2-r4-minhop.lfts.dump"), "--lids", &g, "--json"]);
    assert_eq!(gv["analysis"], v["analysis"]);

    let cut = ok_json(&[
        "analyze",
        "-t",
        &fixture("ft2-r4-cut.net"),
        "--lfts",
        &fixture("ft2-r4-cut-updn.lfts.dump"),
        "--json",
    ]);
    assert_eq!(cut["analysis"]["summary"]["valid"], true);
    assert_eq!(cut["analysis"]["summary"]["deadlock_free"], true);

    let torus = ok_json(&[
        "analyze",
        "-t",
        &fixture("torus2d-5x3.net"),
        "--lfts",
        &fixture("torus2d-5x3-minhop.lfts.dump"),
        "--json",
    ]);
    assert_eq!(torus["analysis"]["summary"]["valid"], true);
    assert_eq!(torus["analysis"]["summary"]["deadlock_free"], false);
}

#[test]
fn routing_on_opensm_lids_writes_opensm_headers() {
    let dir = tempfile::tempdir().unwrap();
    let out = tmp(&dir, "ours.dump");
    let g = format!("guid2lid={}", fixture("ft2-r4-minhop.guid2lid"));
    ok_json(&[
        "route",
        "-t",
        &fixture("ft2-r4.net"),
        "-e",
        "minhop",
        "--lids",
        &g,
        "--lfts-out",
        out.to_str().unwrap(),
        "--json",
    ]);
    let ours = std::fs::read_to_string(&out).unwrap();
    let theirs = std::fs::read_to_string(fixture("ft2-r4-minhop.lfts.dump")).unwrap();
    let headers = |t: &str| t.lines().filter(|l| l.starts_with("Unicast")).map(String::from).collect::<Vec<_>>();
    assert_eq!(headers(&ours), headers(&theirs));
    // Same LIDs, same comments, same entries routed: only ports may differ.
    let strip = |t: &str| -> Vec<String> {
        t.lines()
            .map(|l| match l.split_once(' ') {
                Some((lid, rest)) if lid.starts_with("0x") => format!("{lid} {}", &rest[3..]),
                _ => l.to_string(),
            })
            .collect()
    };
    assert_eq!(strip(&ours), strip(&theirs));
}

#[test]
fn a_dump_that_does_not_match_names_the_switch_and_lid() {
    // The full tree's tables against the tree without leaf3[4] - spine1[4].
    let err = failure(&["analyze", "-t", &fixture("ft2-r4-cut.net"), "--lfts", &fixture("ft2-r4-minhop.lfts.dump")]);
    assert!(err.contains("ft2-r4-minhop.lfts.dump:"), "{err}");
    assert!(err.contains("switch 0x0000000000200003 (LID 0x0006)"), "{err}");
    assert!(err.contains("goes to port 4, which has no cable"), "{err}");

    // A damaged line.
    let dir = tempfile::tempdir().unwrap();
    let bad = tmp(&dir, "bad.dump");
    let text =
        std::fs::read_to_string(fixture("ft2-r4-minhop.lfts.dump")).unwrap().replacen("0x0005 002", "0x0005 0x2", 1);
    std::fs::write(&bad, text).unwrap();
    let err = failure(&["analyze", "-t", &fixture("ft2-r4.net"), "--lfts", bad.to_str().unwrap()]);
    assert!(err.contains("bad.dump:6: `0x2` is not a port number"), "{err}");

    // A LID the topology has nobody for: drop a host from the net file.
    let net = std::fs::read_to_string(fixture("ft2-r4.net")).unwrap();
    let net = net
        .replace("[2]\t\"leaf3-h1\"[1]\n", "")
        .replace("Ca\t1 \"leaf3-h1\"\t# \"leaf3-h1\"\n[1]\t\"leaf3\"[2]\n", "");
    let small = tmp(&dir, "small.net");
    std::fs::write(&small, net).unwrap();
    let err = failure(&["analyze", "-t", small.to_str().unwrap(), "--lfts", &fixture("ft2-r4-minhop.lfts.dump")]);
    assert!(err.contains("GUID 0x000000000010000f"), "{err}");
    // The same with the dump no longer naming that host: its LID is routed
    // but belongs to nothing.
    let anon = tmp(&dir, "anon.dump");
    let text = std::fs::read_to_string(fixture("ft2-r4-minhop.lfts.dump"))
        .unwrap()
        .replace("Channel Adapter portguid 0x000000000010000f: 'leaf3-h1'", "unknown node and type");
    std::fs::write(&anon, text).unwrap();
    let err = failure(&["analyze", "-t", small.to_str().unwrap(), "--lfts", anon.to_str().unwrap()]);
    assert!(
        err.contains("anon.dump:15: switch 0x0000000000200000 (LID 0x0002): LID 0x000e belongs to no port"),
        "{err}"
    );
}

#[test]
fn guid_files_are_checked_line_by_line() {
    let dir = tempfile::tempdir().unwrap();
    let roots = tmp(&dir, "roots");
    std::fs::write(&roots, "# spines\n0x0000000000200004\n\n0x200005 spine1\n").unwrap();
    let r = roots.to_str().unwrap();
    ok_json(&["route", "-t", &fixture("ft2-r4.net"), "--root-guids", r, "--json"]);
    std::fs::write(&roots, "0x200004\n0x1234\n").unwrap();
    let err = failure(&["route", "-t", &fixture("ft2-r4.net"), "--root-guids", r]);
    assert!(err.contains(&format!("{r}:2: GUID 0x0000000000001234 is not a switch")), "{err}");
    std::fs::write(&roots, "0x200004\nspine1\n").unwrap();
    let err = failure(&["route", "-t", &fixture("ft2-r4.net"), "--root-guids", r]);
    assert!(err.contains(&format!("{r}:2: `spine1` is not a GUID")), "{err}");
    // Decimal, as OpenSM reads a number without 0x: 2097156 = 0x200004.
    std::fs::write(&roots, "2097156\n").unwrap();
    ok_json(&["route", "-t", &fixture("ft2-r4.net"), "--root-guids", r, "--json"]);
    let cns = tmp(&dir, "cns");
    std::fs::write(&cns, "0x0000000000200004\n").unwrap();
    let err = failure(&["route", "-t", &fixture("ft2-r4.net"), "--cn-guids", cns.to_str().unwrap()]);
    assert!(err.contains(":1: GUID 0x0000000000200004 is a switch, not an end port"), "{err}");
}

#[test]
fn a_chain_falls_back_and_says_why() {
    // ftree refuses a torus (it is no fat tree), minhop routes it.
    let v = ok_json(&["route", "-t", "torus2d:4x4", "-e", "ftree,minhop", "--json"]);
    assert_eq!(v["engine"], "minhop");
    assert_eq!(v["skipped"][0]["engine"], "ftree");
    assert!(v["skipped"][0]["reason"].as_str().unwrap().starts_with("ftree does not apply"));
    let err = failure(&["route", "-t", "torus2d:4x4", "-e", "nosuch"]);
    assert!(err.contains("unknown routing engine `nosuch`"), "{err}");
}

#[test]
fn a_disconnected_fabric_is_routed_part_by_part() {
    let dir = tempfile::tempdir().unwrap();
    let net = tmp(&dir, "two.net");
    std::fs::write(
        &net,
        "Switch 2 \"a\"\n[1] \"h1\"[1]\n\nSwitch 2 \"b\"\n[1] \"h2\"[1]\n\nCa 1 \"h1\"\n[1] \"a\"[1]\n\nCa 1 \"h2\"\n[1] \"b\"[1]\n",
    )
    .unwrap();
    let v = ok_json(&["route", "-t", net.to_str().unwrap(), "--json"]);
    assert!(v["warning"].as_str().unwrap().contains("disconnected"), "{v}");
    let s = &v["analysis"]["summary"];
    assert_eq!(s["fully_connected"], false);
    assert_eq!(s["valid"], true, "every connected pair is delivered");
}

#[test]
fn lid_plans_and_options_are_validated() {
    let err = failure(&["route", "-t", "fattree2:radix=4", "--lids", "bogus"]);
    assert!(err.contains("--lids: `bogus`"), "{err}");
    let err = failure(&["route", "-t", "fattree2:radix=4", "--max-vls", "0"]);
    assert!(err.contains("--max-vls 0"), "{err}");
    let v = ok_json(&["route", "-t", "fattree2:radix=4", "--lids", "sm", "--lmc", "1", "--json"]);
    assert_eq!(v["lids"], "sm");
    // 8 hosts x 2 LIDs + 6 switches, aligned: the top LID is 22.
    assert_eq!(v["fabric"]["max_lid"], 22);
    assert_eq!(v["analysis"]["summary"]["valid"], true);
    let sampled = ok_json(&["route", "-t", "fattree2:radix=8", "--shifts", "5", "--shift-order", "lid", "--json"]);
    assert_eq!(sampled["analysis"]["shift"]["shifts"], 5);
    assert_eq!(sampled["analysis"]["shift"]["sampled"], true);
    assert_eq!(sampled["analysis"]["shift"]["order"], "Lid");
}

#[test]
fn path_sls_feed_the_deadlock_analysis() {
    let dir = tempfile::tempdir().unwrap();
    let dump = tmp(&dir, "t.dump");
    let sls = tmp(&dir, "t.sl");
    let (d, p) = (dump.to_str().unwrap(), sls.to_str().unwrap());
    ok_json(&["route", "-t", "torus2d:5x3", "-e", "minhop", "--lfts-out", d, "--path-sl-out", p, "--json"]);
    // minhop sets no SLs: the file is just its header.
    assert_eq!(std::fs::read_to_string(&sls).unwrap().lines().count(), 1);
    // Every path from every switch on SL 3 (switch LIDs are 1..=15 in node
    // order, all LIDs 1..=30).
    let text: String = (1..=15).map(|s| format!("{s} 1-30 3\n")).collect();
    std::fs::write(&sls, text).unwrap();
    let v = ok_json(&["analyze", "-t", "torus2d:5x3", "--lfts", d, "--path-sl", p, "--json"]);
    let vls = v["analysis"]["deadlock"]["vls"].as_array().unwrap();
    assert_eq!(vls.len(), 1);
    assert_eq!(vls[0]["vl"], 3);
    assert_eq!(vls[0]["acyclic"], false);
    std::fs::write(&sls, "1 1-30 3\n2 1-30 x\n").unwrap();
    let err = failure(&["analyze", "-t", "torus2d:5x3", "--lfts", d, "--path-sl", p]);
    assert!(err.contains(&format!("{p}:2: `x` is not an SL")), "{err}");
}

#[test]
fn dor_hop_vls_travel_in_the_path_sl_file() {
    let dir = tempfile::tempdir().unwrap();
    let dump = tmp(&dir, "t.dump");
    let sls = tmp(&dir, "t.sl");
    let (d, p) = (dump.to_str().unwrap(), sls.to_str().unwrap());
    let v = ok_json(&[
        "route",
        "-t",
        "torus3d:5x5x5",
        "-e",
        "dor",
        "--max-vls",
        "2",
        "--lfts-out",
        d,
        "--path-sl-out",
        p,
        "--json",
    ]);
    let s = &v["analysis"]["summary"];
    assert_eq!((s["deadlock_free"].as_bool(), s["vls"].as_u64()), (Some(true), Some(2)));
    assert_eq!(v["analysis"]["deadlock"]["hop_vls"], true);
    let text = std::fs::read_to_string(&sls).unwrap();
    assert!(text.lines().any(|l| l.starts_with("vl ")), "per-hop tables written");
    // Read back: the same verdict; without the file every path is on VL 0
    // and the rings close.
    let back = ok_json(&["analyze", "-t", "torus3d:5x5x5", "--lfts", d, "--path-sl", p, "--json"]);
    assert_eq!(back["analysis"]["summary"], v["analysis"]["summary"]);
    let bare = ok_json(&["analyze", "-t", "torus3d:5x5x5", "--lfts", d, "--json"]);
    assert_eq!(bare["analysis"]["summary"]["deadlock_free"], false);
    // One VL is not enough.
    let err = failure(&["route", "-t", "torus3d:5x5x5", "-e", "dor", "--max-vls", "1"]);
    assert!(err.contains("dor needs 2 virtual lanes"), "{err}");
    // A table cut short: the error names the file and line.
    let first = text.lines().position(|l| l.starts_with("vl ")).unwrap();
    let cut: String = text
        .lines()
        .enumerate()
        .map(|(i, l)| if i == first { format!("{}\n", &l[..l.len() - 2]) } else { format!("{l}\n") })
        .collect();
    std::fs::write(&sls, cut).unwrap();
    let err = failure(&["analyze", "-t", "torus3d:5x5x5", "--lfts", d, "--path-sl", p]);
    assert!(err.contains(&format!("{p}:{}: ", first + 1)) && err.contains("not 16 hex digits"), "{err}");
}
