//! A fabric judged by infiniband-diags only, as an operator would: every
//! cabled port Active (`iblinkinfo`), a unique LID on every port
//! (`ibnetdiscover`), and the `ibroute` tables walked over ibnetdiscover's
//! links delivering every LID from every switch (entries ibroute does not
//! print are checked with `ibtracert`). Shared by the ibsim tests.

use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

use super::ibsim::{self, run_with_timeout, stdout, tool, Ibsim};

/// One port line of `ibnetdiscover -p`.
#[derive(Debug, Clone)]
pub struct PortLine {
    pub switch: bool,
    pub lid: u16,
    pub port: u8,
    pub guid: u64,
    pub remote: Option<(bool, u16, u8, u64)>,
}

fn parse_ports(text: &str) -> Vec<PortLine> {
    let mut out = Vec::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() < 4 || !matches!(f[0], "CA" | "SW" | "RT") {
            continue;
        }
        let num = |s: &str| s.parse::<u32>().unwrap_or_else(|_| panic!("bad number `{s}` in `{line}`"));
        let hex = |s: &str| u64::from_str_radix(s.trim_start_matches("0x"), 16).unwrap();
        let remote = f
            .iter()
            .position(|&x| x == "-")
            .filter(|&i| f.len() > i + 4 && matches!(f[i + 1], "CA" | "SW" | "RT"))
            .map(|i| (f[i + 1] == "SW", num(f[i + 2]) as u16, num(f[i + 3]) as u8, hex(f[i + 4])));
        out.push(PortLine {
            switch: f[0] == "SW",
            lid: num(f[1]) as u16,
            port: num(f[2]) as u8,
            guid: hex(f[3]),
            remote,
        });
    }
    out
}

/// `ibroute` output: LID -> port.
fn parse_ibroute(text: &str) -> BTreeMap<u16, u8> {
    let mut lft = BTreeMap::new();
    for line in text.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        if f.len() >= 2 && f[0].starts_with("0x") && f[0].len() == 6 {
            if let (Ok(lid), Ok(port)) = (u16::from_str_radix(&f[0][2..], 16), f[1].parse::<u8>()) {
                lft.insert(lid, port);
            }
        }
    }
    lft
}

pub struct Fabric<'a> {
    pub sim: &'a Ibsim,
    /// Where the diags run.
    pub host: String,
}

impl Fabric<'_> {
    pub fn tool(&self, name: &str, args: &[&str]) -> String {
        let mut c = self.sim.client(&tool(name), Some(&self.host));
        c.args(args);
        let o = run_with_timeout(c, Duration::from_secs(60));
        assert!(o.status.success(), "{name} {args:?} failed: {}", ibsim::stderr(&o));
        stdout(&o)
    }

    pub fn ports(&self) -> Vec<PortLine> {
        parse_ports(&self.tool("ibnetdiscover", &["-p"]))
    }

    /// LID of every port GUID (switch ports share one).
    pub fn lids(&self) -> BTreeMap<u64, u16> {
        self.ports().into_iter().map(|p| (p.guid, p.lid)).collect()
    }

    /// Everything the issue asks of a brought-up fabric, from the diags.
    pub fn judge(&self, label: &str) {
        // iblinkinfo: every cabled port Active.
        let links = self.tool("iblinkinfo", &[]);
        let mut cabled = 0;
        for line in links.lines().filter(|l| l.contains("==(")) {
            let connected = !line.contains("[  ] \"\" (");
            if connected {
                cabled += 1;
                assert!(line.contains("Active/"), "{label}: iblinkinfo shows a cabled port not Active: {line}");
            }
        }
        assert!(cabled > 0, "{label}: iblinkinfo shows no cabled port:\n{links}");

        // ibnetdiscover: unique, valid LIDs.
        let ports = self.ports();
        let mut owner: HashMap<u16, u64> = HashMap::new();
        for p in &ports {
            assert!(p.lid > 0 && p.lid < 0xC000, "{label}: port {:#x}/{} has LID {}", p.guid, p.port, p.lid);
            if let Some(prev) = owner.insert(p.lid, p.guid) {
                assert_eq!(prev, p.guid, "{label}: LID {} held by {prev:#x} and {:#x}", p.lid, p.guid);
            }
        }
        // Cables, from ibnetdiscover: (switch LID, port) -> far end.
        let mut far: HashMap<(u16, u8), (bool, u16)> = HashMap::new();
        for p in &ports {
            if let (true, Some((rsw, rlid, _, _))) = (p.switch, p.remote) {
                far.insert((p.lid, p.port), (rsw, rlid));
            }
        }
        let switch_lids: Vec<u16> = {
            let mut v: Vec<u16> = ports.iter().filter(|p| p.switch).map(|p| p.lid).collect();
            v.sort();
            v.dedup();
            v
        };
        let all_lids: Vec<u16> = owner.keys().copied().collect();
        // ibroute on every switch, then walk every (switch, LID).
        let lfts: HashMap<u16, BTreeMap<u16, u8>> =
            switch_lids.iter().map(|&s| (s, parse_ibroute(&self.tool("ibroute", &[&s.to_string()])))).collect();
        let mut unprinted = Vec::new();
        for &start in &switch_lids {
            for &dlid in &all_lids {
                let mut at = start;
                let mut hops = 0;
                loop {
                    let Some(&port) = lfts[&at].get(&dlid) else {
                        unprinted.push((at, dlid));
                        break;
                    };
                    if port == 0 {
                        assert_eq!(at, dlid, "{label}: switch LID {at} sends LID {dlid} to port 0");
                        break;
                    }
                    let &(is_switch, next) = far.get(&(at, port)).unwrap_or_else(|| {
                        panic!("{label}: switch LID {at} sends LID {dlid} out of uncabled port {port}")
                    });
                    if !is_switch {
                        assert_eq!(next, dlid, "{label}: LID {dlid} from switch {start} reaches CA LID {next}");
                        break;
                    }
                    at = next;
                    hops += 1;
                    assert!(hops < 64, "{label}: loop routing LID {dlid} from switch LID {start}");
                }
            }
        }
        // ibroute skips the entry for LID == LinearFDBTop when it opens a
        // new 64-LID block: such entries are traced instead.
        let ca_lid = ports.iter().find(|p| !p.switch).map(|p| p.lid);
        for (at, dlid) in unprinted {
            let src = ca_lid.unwrap_or(at).to_string();
            let out = self.tool("ibtracert", &[&src, &dlid.to_string()]);
            assert!(
                out.lines().last().is_some_and(|l| l.starts_with("To ") && l.contains(&format!("lid {dlid}-"))),
                "{label}: ibroute on {at} lacks LID {dlid} and ibtracert does not reach it:\n{out}"
            );
        }
    }
}
