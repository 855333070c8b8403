//! Multicast on ibsim with ibsm as the SM (issue 10, item 5), judged by
//! infiniband-diags.
//!
//! One fabric (`ibsim::TRIANGLE_NET`: three switches in a loop, a doubled
//! cable, a 20-port switch, six hosts), ibsm on h0 without a partitions
//! file, so the default partition's IPoIB broadcast group is the one well
//! known group. Hosts bring IPoIB up with `ibsm sa ipoib` (the kernel's
//! order: broadcast group first, then all-hosts, IPv6 all-nodes,
//! all-routers and the port's solicited-node group), each a umad2sim
//! client of its own. Then, from a host that never joins:
//!
//! - `saquery -g` / `saquery -m` list the groups and members while few
//!   enough exist to fit the one MAD saquery sees on ibsim (it carries no
//!   RMPP: three MCMemberRecords); beyond that every group is asked for
//!   alone (`saquery MCMR --mgid`) and every end port's membership of it
//!   with a trusted single-record query (`--smkey 1 MCMR --mgid --gid`),
//!   so the whole membership is read back, member and non-member alike;
//! - `ibroute -M` on every switch gives the MFTs, and a flood from each
//!   member, following the port masks over `ibnetdiscover -p`'s cables and
//!   never back out of the port it came in by, must reach exactly the other
//!   members and enter no switch twice; no switch may hold an entry that no
//!   such flood passes, nor one for an MLID no group with members has.
//!
//! A join with a Q_Key the group does not have is refused and changes
//! nothing. Hosts leave (`--down`); after the last, only the well-known
//! group is listed, no switch holds any MFT entry, and a new group gets
//! the lowest free MLID again.

#[path = "transport_support/ibsim.rs"]
mod ibsim;
#[path = "transport_support/saquery.rs"]
mod saquery;

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv6Addr;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

use ibsim::{run_with_timeout, stderr, stdout, tool, Ibsim, KillOnDrop};
use saquery::{Mfts, PortLine, Record};
use serde_json::Value;

/// Where ibsm runs, and where the diags run (it never joins a group).
const SM_HOST: &str = "h0";
const OBSERVER: &str = "h3";
/// The hosts that bring IPoIB up, one on each switch and h5 on the 20-port one.
const HOSTS: [&str; 4] = ["h1", "h2", "h4", "h5"];
const PREFIX: u64 = 0xfe80_0000_0000_0000;
const BCAST: &str = "ff12:401b:ffff::ffff:ffff";
/// The Q_Key, MTU (exactly 2048: selector 2 in the top bits, code 4) and
/// rate (exactly 10 Gb/s, code 3) of the default partition's broadcast
/// group, as OpenSM gives it and saquery prints it.
const QKEY: u64 = 0x0b1b;
const MTU_FIELD: u64 = 0x84;
const RATE_FIELD: u64 = 0x83;
/// How long the SM may take to route a membership change into the MFTs
/// (it is about a second; ibsim and a loaded machine get some slack).
const ROUTED: Duration = Duration::from_secs(6);

/// Dropped in this order: the SM, then ibsim, then the directory.
struct Fabric {
    sm: KillOnDrop,
    sim: Ibsim,
    _dir: tempfile::TempDir,
    preload: String,
    log: PathBuf,
    ports: Vec<PortLine>,
}

impl Fabric {
    fn start() -> Fabric {
        Fabric::start_with("")
    }

    /// With `config` as ibsm's configuration file.
    fn start_with(config: &str) -> Fabric {
        let dir = tempfile::tempdir().unwrap();
        let conf = dir.path().join("ibsm.toml");
        std::fs::write(&conf, config).unwrap();
        let net = dir.path().join("triangle.net");
        std::fs::write(&net, ibsim::TRIANGLE_NET).unwrap();
        let preload = ibsim::umad2sim_fixed_preload(dir.path());
        let sim = Ibsim::start(&net);
        for h in [SM_HOST, OBSERVER] {
            sim.wait_for_sma(h, Duration::from_secs(30));
        }
        let log = dir.path().join("ibsm.log");
        let cache = dir.path().join("cache");
        std::fs::create_dir_all(&cache).unwrap();
        let mut c = sim.client_with(&preload, Path::new(env!("CARGO_BIN_EXE_ibsm")), SM_HOST);
        c.arg("run")
            .arg("--config")
            .arg(&conf)
            .args(["--metrics-listen", ""])
            .arg("--cache-dir")
            .arg(&cache)
            .arg("--log-file")
            .arg(&log)
            // The SA says at debug level why it refuses a join.
            .env("IBSM_LOG", "info,ibsm::sa=debug");
        let mut sm = ibsim::spawn_daemon(c, &dir.path().join("ibsm.out"));
        ibsim::wait_for_log_count(&mut sm, &log, "SUBNET UP", 1, Duration::from_secs(60))
            .unwrap_or_else(|e| panic!("{e}"));
        let mut f = Fabric { sm, sim, _dir: dir, preload, log, ports: Vec::new() };
        f.ports = saquery::ibnetdiscover_ports(&f.diag("ibnetdiscover", &["-p"]));
        assert_eq!(f.ports.iter().filter(|p| p.peer.is_some()).count(), 2 * 11, "ibnetdiscover: {:#?}", f.ports);
        // SUBNET UP is logged as the sweep ends, an instant before the SA
        // has its results: wait until it lists the well-known group.
        let t0 = Instant::now();
        while !f.saquery(OBSERVER, &["-g"]).iter().any(|r| r.get("MGID") == Some(BCAST)) {
            assert!(t0.elapsed() < Duration::from_secs(10), "the SA lists no broadcast group");
            std::thread::sleep(Duration::from_millis(100));
        }
        f
    }

    /// `name args` at `host` (every diag gets the umad2sim fix).
    fn run(&self, host: &str, name: &str, args: &[&str]) -> Output {
        let mut c = self.sim.client_with(&self.preload, &tool(name), host);
        c.args(args);
        run_with_timeout(c, Duration::from_secs(60))
    }

    /// A diag from the observer, which must succeed.
    fn diag(&self, name: &str, args: &[&str]) -> String {
        let o = self.run(OBSERVER, name, args);
        assert!(
            o.status.success(),
            "{name} {args:?} failed ({}): {}{}\n--- SM log tail:\n{}",
            o.status,
            stdout(&o),
            stderr(&o),
            self.log_tail(40)
        );
        stdout(&o)
    }

    /// saquery's records (it must succeed).
    fn saquery(&self, host: &str, args: &[&str]) -> Vec<Record> {
        let o = self.run(host, "saquery", args);
        assert!(
            o.status.success(),
            "saquery {args:?} at {host} ({}): {}{}\n--- SM log tail:\n{}",
            o.status,
            stdout(&o),
            stderr(&o),
            self.log_tail(40)
        );
        saquery::records(&stdout(&o))
    }

    /// `ibsm args` at `host`, a client of the SA.
    fn ibsm(&self, host: &str, args: &[&str]) -> Output {
        let mut c = self.sim.client_with(&self.preload, Path::new(env!("CARGO_BIN_EXE_ibsm")), host);
        c.args(args);
        run_with_timeout(c, Duration::from_secs(60))
    }

    /// `ibsm args` at `host`, which must succeed and print one JSON value.
    fn ibsm_json(&self, host: &str, args: &[&str]) -> Value {
        let o = self.ibsm(host, args);
        assert!(o.status.success(), "ibsm {args:?} at {host}: {}\n--- SM log tail:\n{}", stderr(&o), self.log_tail(60));
        serde_json::from_str(stdout(&o).trim()).unwrap_or_else(|e| panic!("ibsm {args:?}: {e}: {}", stdout(&o)))
    }

    /// Port 1's GUID of the host `name`.
    fn guid(&self, name: &str) -> u64 {
        self.ports
            .iter()
            .find(|p| !p.switch && p.name == name && p.port == 1)
            .unwrap_or_else(|| panic!("no CA {name} port 1"))
            .guid
    }

    /// Every CA port: (name, port, GUID).
    fn end_ports(&self) -> Vec<(String, u8, u64)> {
        let set: BTreeSet<(String, u8, u64)> =
            self.ports.iter().filter(|p| !p.switch).map(|p| (p.name.clone(), p.port, p.guid)).collect();
        set.into_iter().collect()
    }

    fn switch_lids(&self) -> BTreeSet<u16> {
        self.ports.iter().filter(|p| p.switch).map(|p| p.lid).collect()
    }

    /// Every switch's MFT, from `ibroute -M`.
    fn mfts(&self) -> Mfts {
        self.switch_lids()
            .into_iter()
            .map(|lid| (lid, saquery::ibroute_mft(&self.diag("ibroute", &["-M", &lid.to_string()]))))
            .collect()
    }

    fn log_tail(&self, n: usize) -> String {
        let text = self.log_text();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(n)..].join("\n")
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

fn gid(guid: u64) -> Ipv6Addr {
    Ipv6Addr::from(((PREFIX as u128) << 64) | guid as u128)
}

/// A GID as saquery prints it (`fe80::10:3`, `::`).
fn gid_field(r: &Record, name: &str) -> Ipv6Addr {
    let v = r.field(name);
    let text = v.split_whitespace().next().unwrap_or(v);
    text.parse().unwrap_or_else(|e| panic!("{}.{name} = `{v}`: {e}", r.kind))
}

/// The IPoIB groups of the default partition a port joins, in the
/// kernel's order (RFC 4391): broadcast, IPv4 all-hosts 224.0.0.1, IPv6
/// all-nodes ff02::1 and all-routers ff02::2, and the solicited-node group
/// ff02::1:ffXX:XXXX of its link-local address, whose low 24 bits are the
/// port GUID's.
fn ipoib_mgids(guid: u64) -> [Ipv6Addr; 5] {
    let snm = (0xff12_601b_ffff_u128 << 80) | (0x1_ff00_0000 | (guid as u128 & 0xff_ffff));
    [
        BCAST.parse().unwrap(),
        "ff12:401b:ffff::e000:1".parse().unwrap(),
        "ff12:601b:ffff::1".parse().unwrap(),
        "ff12:601b:ffff::2".parse().unwrap(),
        Ipv6Addr::from(snm),
    ]
}

/// A group as the test expects it.
#[derive(Debug, Clone)]
struct Group {
    mgid: Ipv6Addr,
    mlid: u16,
    members: BTreeSet<u64>,
}

/// The SA's record of `g` alone (`saquery MCMR --mgid`, untrusted: one
/// record for the group, PortGID and JoinState zero): its MLID, Q_Key,
/// MTU, rate, P_Key, SL and scope. Then each end port's membership, asked
/// one port at a time with a trusted query: a record with the port's GID
/// and JoinState full for each member, none for every other port.
fn check_group(f: &Fabric, g: &Group) {
    let mgid = g.mgid.to_string();
    let recs = f.saquery(OBSERVER, &["MCMR", "--mgid", &mgid]);
    assert_eq!(recs.len(), 1, "saquery MCMR --mgid {mgid}: one record for the group: {recs:#?}");
    let r = &recs[0];
    assert_eq!(gid_field(r, "MGID"), g.mgid);
    assert_eq!(r.num("mlid"), g.mlid as u64, "{mgid}'s MLID");
    assert_eq!(
        (r.num("qkey"), r.num("mtu"), r.num("rate"), r.num("pkey"), r.num("SL"), r.num("Scope")),
        (QKEY, MTU_FIELD, RATE_FIELD, 0xffff, 0, 2),
        "{mgid}: Q_Key, MTU, rate, P_Key, SL, scope as the broadcast group's: {r:#?}"
    );
    assert_eq!(
        (gid_field(r, "PortGid"), r.num("JoinState")),
        (Ipv6Addr::UNSPECIFIED, 0),
        "an untrusted requester sees no member's GID or JoinState"
    );
    for (name, port, guid) in f.end_ports() {
        let port_gid = gid(guid).to_string();
        let recs = f.saquery(OBSERVER, &["--smkey", "1", "MCMR", "--mgid", &mgid, "--gid", &port_gid]);
        if g.members.contains(&guid) {
            assert_eq!(recs.len(), 1, "{name}/{port} is a member of {mgid}: {recs:#?}");
            let r = &recs[0];
            assert_eq!((gid_field(r, "PortGid"), r.num("JoinState")), (gid(guid), 1), "{name}'s membership of {mgid}");
            assert_eq!((r.num("mlid"), r.num("qkey")), (g.mlid as u64, QKEY));
        } else {
            assert!(recs.is_empty(), "{name}/{port} is no member of {mgid}, yet: {recs:#?}");
        }
    }
}

/// The group is gone: the SA has no record of it.
fn check_gone(f: &Fabric, mgid: &Ipv6Addr) {
    let recs = f.saquery(OBSERVER, &["MCMR", "--mgid", &mgid.to_string()]);
    assert!(recs.is_empty(), "{mgid} should be gone: {recs:#?}");
}

/// What is wrong with the MFTs for `groups` (those with members): each
/// floods exactly to its members, and no switch has an entry for any other
/// MLID.
fn mft_errors(f: &Fabric, mfts: &Mfts, groups: &[Group]) -> Vec<String> {
    let live: BTreeSet<u16> = groups.iter().filter(|g| !g.members.is_empty()).map(|g| g.mlid).collect();
    let mut errors: Vec<String> =
        groups.iter().flat_map(|g| saquery::mcast_flood_errors(&f.ports, mfts, g.mlid, &g.members)).collect();
    for (sw, table) in mfts {
        for (mlid, ports) in table {
            if !live.contains(mlid) {
                errors.push(format!(
                    "switch LID {sw} has an entry {ports:?} for MLID {mlid:#06x}, which no group with members holds"
                ));
            }
        }
    }
    errors
}

/// Waits (up to ROUTED) for the MFTs to route `groups` exactly; returns
/// them.
fn wait_routed(f: &Fabric, what: &str, groups: &[Group]) -> Mfts {
    let t0 = Instant::now();
    loop {
        let mfts = f.mfts();
        let errors = mft_errors(f, &mfts, groups);
        if errors.is_empty() {
            eprintln!("{what}: MFTs right {:.2?} after the last change", t0.elapsed());
            return mfts;
        }
        assert!(
            t0.elapsed() < ROUTED,
            "{what}: MFTs still wrong after {ROUTED:?}:\n{}\nMFTs: {mfts:#?}",
            errors.join("\n")
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `saquery -g`: (MGID, MLID) of each group, checked to carry the default
/// partition's parameters.
fn listed_groups(f: &Fabric) -> BTreeSet<(Ipv6Addr, u16)> {
    let recs = f.saquery(OBSERVER, &["-g"]);
    let set: BTreeSet<(Ipv6Addr, u16)> = recs
        .iter()
        .map(|r| {
            assert_eq!(r.kind, "MCMemberRecord group", "{r:#?}");
            assert_eq!((r.num("Mtu"), r.num("pkey"), r.num("Rate"), r.num("SL")), (MTU_FIELD, 0xffff, RATE_FIELD, 0));
            (gid_field(r, "MGID"), r.num("Mlid") as u16)
        })
        .collect();
    assert_eq!(set.len(), recs.len(), "saquery -g lists a group twice: {recs:#?}");
    set
}

/// The JSON of one joined group from `ibsm sa ipoib` / `ibsm sa join --json`.
fn joined(v: &Value) -> (Ipv6Addr, u16) {
    (v["mgid"].as_str().unwrap().parse().unwrap(), v["mlid"].as_u64().unwrap() as u16)
}

#[test]
fn ipoib_hosts_join_and_leave_and_the_mfts_reach_exactly_the_members() {
    let t_start = Instant::now();
    let f = Fabric::start();
    let guids: BTreeMap<&str, u64> = HOSTS.iter().map(|&h| (h, f.guid(h))).collect();
    let bcast: Ipv6Addr = BCAST.parse().unwrap();

    // ---- Before any join: the well-known broadcast group, no members, no
    // MFT entries.
    assert_eq!(listed_groups(&f), [(bcast, 0xC000)].into(), "saquery -g before any join");
    wait_routed(&f, "no members", &[]);

    // ---- h1 joins the broadcast group alone, as IPoIB's first join (no
    // creation components: the SM made the group).
    let j = f.ibsm_json("h1", &["sa", "join", "--mgid", BCAST, "--json"]);
    assert_eq!(joined(&j), (bcast, 0xC000));
    assert_eq!((j["q_key"].as_u64(), j["mtu"].as_u64(), j["rate"].as_u64()), (Some(QKEY), Some(4), Some(3)));
    let members = f.saquery(OBSERVER, &["--smkey", "1", "-m"]);
    assert_eq!(members.len(), 1, "saquery -m: one group, one member: {members:#?}");
    let m = &members[0];
    assert_eq!(m.kind, "MCMemberRecord member");
    assert_eq!((gid_field(m, "MGID"), m.num("Mlid"), gid_field(m, "PortGid")), (bcast, 0xC000, gid(guids["h1"])));
    assert_eq!(m.num("ScopeState"), 0x21, "link-local scope, full member");
    // saquery -m also reads the NodeRecord table, longer than a MAD: ibsm
    // sends it with RMPP, which saquery on ibsim never ACKs, so the SA
    // re-sends the segments (3 x 200 ms). One reaching the observer's next
    // client, a diag with no SA agent, crashes it inside umad2sim: wait
    // the re-sends out.
    std::thread::sleep(Duration::from_millis(1200));
    wait_routed(
        &f,
        "h1 alone in the broadcast group",
        &[Group { mgid: bcast, mlid: 0xC000, members: [guids["h1"]].into() }],
    );

    // ---- IPoIB up on every host, in order. The shared groups get the
    // lowest free MLIDs as h1 creates them, each solicited-node group the
    // next one.
    let t_join = Instant::now();
    let shared_mlids = [0xC000u16, 0xC001, 0xC002, 0xC003];
    let mut groups: Vec<Group> = ipoib_mgids(0)[..4]
        .iter()
        .zip(shared_mlids)
        .map(|(&mgid, mlid)| Group { mgid, mlid, members: BTreeSet::new() })
        .collect();
    for (i, &h) in HOSTS.iter().enumerate() {
        let up = f.ibsm_json(h, &["sa", "ipoib"]);
        assert_eq!(
            (up["q_key"].as_u64(), up["datagram_mtu"].as_u64(), up["connected_mtu"].as_u64(), up["pkey"].as_u64()),
            (Some(QKEY), Some(2044), Some(65520), Some(0xffff)),
            "{h}: IPoIB at 2044 bytes in datagram mode, 65520 connected: {up}"
        );
        let got: Vec<(Ipv6Addr, u16)> = up["groups"].as_array().unwrap().iter().map(joined).collect();
        let snm_mlid = 0xC004 + i as u16;
        let want: Vec<(Ipv6Addr, u16)> =
            ipoib_mgids(guids[h]).into_iter().zip(shared_mlids.into_iter().chain([snm_mlid])).collect();
        assert_eq!(got, want, "{h}'s groups and MLIDs, in the kernel's join order");
        for g in up["groups"].as_array().unwrap() {
            assert_eq!(
                (
                    g["q_key"].as_u64(),
                    g["mtu"].as_u64(),
                    g["rate"].as_u64(),
                    g["sl"].as_u64(),
                    g["join_state"].as_u64()
                ),
                (Some(QKEY), Some(4), Some(3), Some(0), Some(1)),
                "{h}: {g}"
            );
        }
        for g in &mut groups[..4] {
            g.members.insert(guids[h]);
        }
        groups.push(Group { mgid: want[4].0, mlid: snm_mlid, members: [guids[h]].into() });
    }
    let joins = t_join.elapsed();
    let mfts_up = wait_routed(&f, "IPoIB up on four hosts", &groups);
    eprintln!("20 joins by 4 ibsm sa ipoib runs in {joins:.2?}");
    for g in &groups {
        check_group(&f, g);
    }
    // The whole member table in one GetTable, through ibsm's own RMPP
    // (more than saquery's one MAD holds): one record per (group, member).
    let table = f.ibsm_json(OBSERVER, &["sa", "groups", "--sm-key", "1", "--json"]);
    let listed: BTreeSet<(Ipv6Addr, u16, Ipv6Addr)> = table
        .as_array()
        .unwrap()
        .iter()
        .filter(|r| r["join_state"].as_u64() != Some(0))
        .map(|r| {
            let ip = |k: &str| r[k].as_str().unwrap().parse::<Ipv6Addr>().unwrap();
            (ip("mgid"), r["mlid"].as_u64().unwrap() as u16, ip("port_gid"))
        })
        .collect();
    let expected: BTreeSet<(Ipv6Addr, u16, Ipv6Addr)> =
        groups.iter().flat_map(|g| g.members.iter().map(move |&m| (g.mgid, g.mlid, gid(m)))).collect();
    assert_eq!(listed, expected, "ibsm sa groups lists every member of every group");
    // The trees spread over the two cables between sw0 and sw1 (ports 3
    // and 4 on each): said, not asserted (the spread is the routing's
    // business, tested in the routing crate).
    let sw0 = f.ports.iter().find(|p| p.switch && p.name == "sw0").unwrap().lid;
    let per_cable: Vec<usize> =
        [3u8, 4].iter().map(|p| mfts_up[&sw0].values().filter(|s| s.contains(p)).count()).collect();
    eprintln!("groups over sw0's two cables to sw1 (ports 3, 4): {per_cable:?}");

    // ---- A join with the wrong Q_Key: refused, from a non-member and
    // from a member alike, and nothing changes.
    for h in [OBSERVER, "h1"] {
        let o = f.ibsm(h, &["sa", "join", "--mgid", BCAST, "--create-qkey", "0x1234"]);
        let err = stderr(&o);
        assert!(!o.status.success(), "{h}: a join with Q_Key 0x1234 to a 0x0b1b group succeeded: {}", stdout(&o));
        assert!(
            err.contains(BCAST) && err.contains("SA status 0x0200 (ERR_REQ_INVALID)"),
            "{h}: the refusal names the group and the SA's status: {err}"
        );
    }
    let log = f.log_text();
    assert!(log.contains("refused: Q_Key 0x1234 asked, group has 0xb1b"), "the SM's log says why the join was refused");
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(f.mfts(), mfts_up, "a refused join changes no MFT");
    check_group(&f, &groups[0]);

    // ---- h1 and h2 take IPoIB down: the shared trees shrink to h4 and
    // h5, the two solicited-node groups are deleted with their MLIDs.
    for h in ["h1", "h2"] {
        let down = f.ibsm_json(h, &["sa", "ipoib", "--down"]);
        assert_eq!(down["left"].as_u64(), Some(5), "{h}: {down}");
    }
    let rest: BTreeSet<u64> = [guids["h4"], guids["h5"]].into();
    let (gone, kept): (Vec<Group>, Vec<Group>) =
        groups.into_iter().partition(|g| g.members.is_subset(&[guids["h1"], guids["h2"]].into()));
    let mut groups: Vec<Group> = kept
        .into_iter()
        .map(|mut g| {
            g.members.retain(|m| rest.contains(m));
            g
        })
        .collect();
    assert_eq!(gone.len(), 2, "h1's and h2's solicited-node groups go: {gone:?}");
    wait_routed(&f, "h1 and h2 gone", &groups);
    for g in &gone {
        check_gone(&f, &g.mgid);
    }
    for g in &groups {
        check_group(&f, g);
    }

    // ---- The last two leave: only the well-known group is left, with no
    // member; no switch holds any entry.
    for h in ["h4", "h5"] {
        let down = f.ibsm_json(h, &["sa", "ipoib", "--down"]);
        assert_eq!(down["left"].as_u64(), Some(5), "{h}: {down}");
    }
    for g in &mut groups {
        g.members.clear();
    }
    let mfts = wait_routed(&f, "everyone gone", &[]);
    assert!(mfts.values().all(|t| t.is_empty()), "ibroute -M lists no MLID on any switch: {mfts:#?}");
    assert_eq!(
        listed_groups(&f),
        [(bcast, 0xC000)].into(),
        "saquery -g after the last leave: the well-known group only"
    );
    for g in groups.iter().filter(|g| g.mgid != bcast) {
        check_gone(&f, &g.mgid);
    }
    check_group(&f, &Group { mgid: bcast, mlid: 0xC000, members: BTreeSet::new() });

    // ---- A new group gets the lowest free MLID again (0xC000 is the
    // well-known group's), and is routed; its leave frees everything.
    let mdns: Ipv6Addr = "ff12:401b:ffff::e000:fb".parse().unwrap();
    let mdns_text = mdns.to_string();
    let j = f.ibsm_json("h2", &["sa", "join", "--mgid", &mdns_text, "--create-qkey", "0x0b1b", "--json"]);
    assert_eq!(joined(&j), (mdns, 0xC001), "freed MLIDs are reused, lowest first");
    assert_eq!(listed_groups(&f), [(bcast, 0xC000), (mdns, 0xC001)].into(), "saquery -g with the new group");
    let g = Group { mgid: mdns, mlid: 0xC001, members: [guids["h2"]].into() };
    wait_routed(&f, "a new group", std::slice::from_ref(&g));
    check_group(&f, &g);
    let j = f.ibsm_json("h2", &["sa", "join", "--mgid", &mdns_text, "--leave", "--json"]);
    assert_eq!(joined(&j), (mdns, 0xC001));
    wait_routed(&f, "the new group left", &[]);
    check_gone(&f, &mdns);
    assert_eq!(listed_groups(&f), [(bcast, 0xC000)].into());

    let mut f = f;
    assert!(ibsim::terminate(&mut f.sm, Duration::from_secs(10)), "ibsm did not stop on SIGTERM");
    eprintln!("wall time {:.2?}", t_start.elapsed());
}

/// `[sa] consolidate_ipv6_snm_req = true`: each host's solicited-node
/// group is its own group, with its one member, but all four share one
/// MLID, and the MFTs flood it to exactly the hosts whose groups are
/// there; the MLID goes with the last of them.
#[test]
fn consolidated_solicited_node_groups_share_one_mlid_on_ibsim() {
    let f = Fabric::start_with("[sa]\nconsolidate_ipv6_snm_req = true\n");
    let guids: BTreeMap<&str, u64> = HOSTS.iter().map(|&h| (h, f.guid(h))).collect();
    let shared_mlids = [0xC000u16, 0xC001, 0xC002, 0xC003];
    const SNM_MLID: u16 = 0xC004;
    let mut snm = Vec::new();
    for &h in &HOSTS {
        let up = f.ibsm_json(h, &["sa", "ipoib"]);
        let got: Vec<(Ipv6Addr, u16)> = up["groups"].as_array().unwrap().iter().map(joined).collect();
        let want: Vec<(Ipv6Addr, u16)> =
            ipoib_mgids(guids[h]).into_iter().zip(shared_mlids.into_iter().chain([SNM_MLID])).collect();
        assert_eq!(got, want, "{h}: its own solicited-node group, on the one shared MLID");
        snm.push(Group { mgid: want[4].0, mlid: SNM_MLID, members: [guids[h]].into() });
    }
    let all: BTreeSet<u64> = guids.values().copied().collect();
    let shared = |members: &BTreeSet<u64>| {
        let mut groups: Vec<Group> = ipoib_mgids(0)[..4]
            .iter()
            .zip(shared_mlids)
            .map(|(&mgid, mlid)| Group { mgid, mlid, members: members.clone() })
            .collect();
        // The MFTs know MLIDs, not groups: the solicited-node MLID
        // reaches every host one of whose groups is on it.
        groups.push(Group { mgid: snm[0].mgid, mlid: SNM_MLID, members: members.clone() });
        groups
    };
    wait_routed(&f, "IPoIB up, solicited-node groups consolidated", &shared(&all));
    for g in &snm {
        check_group(&f, g);
    }
    // h1 goes: its group goes, the MLID stays for the other three.
    let down = f.ibsm_json("h1", &["sa", "ipoib", "--down"]);
    assert_eq!(down["left"].as_u64(), Some(5), "{down}");
    let rest: BTreeSet<u64> = HOSTS[1..].iter().map(|h| guids[h]).collect();
    wait_routed(&f, "h1 gone", &shared(&rest));
    check_gone(&f, &snm[0].mgid);
    for g in &snm[1..] {
        check_group(&f, g);
    }
    for &h in &HOSTS[1..] {
        f.ibsm_json(h, &["sa", "ipoib", "--down"]);
    }
    wait_routed(&f, "everyone gone", &[]);
    let mut f = f;
    assert!(ibsim::terminate(&mut f.sm, Duration::from_secs(10)), "ibsm did not stop on SIGTERM");
}
