//! Entries merged into partitions: P_Keys generated as OpenSM generates
//! them, parameters of one P_Key checked to agree, defaults filled in and
//! every partition's multicast groups built and checked.

use std::collections::HashMap;

use super::entry::{Header, PKeyWord, Written};
use super::error::{excerpt, Fail, Pos, Problem};
use super::{
    ipoib_broadcast_mgid, is_ip_mgid, mgid_text, ConfGroup, ConfPartition, ConfWarning, MemberSpec, PortSpec,
    IPOIB_QKEY, SCOPE_LINK_LOCAL,
};
use crate::partition::{GroupParams, Membership, DEFAULT_PARTITION, FULL_MEMBER};

pub(super) struct MgidItem {
    pub(super) mgid: [u8; 16],
    pub(super) written: Written,
    pub(super) at: Pos,
}

pub(super) struct PartBuild {
    name: String,
    pkey: u16,
    generated_at: Option<Pos>,
    at: Option<Pos>,
    /// The first entry that wrote the P_Key, and that entry's name: what a
    /// later entry's spelling is compared with.
    first_pkey: Option<(PKeyWord, Option<String>)>,
    ipoib: bool,
    written: Written,
    pub(super) members: Vec<MemberSpec>,
    pub(super) mgids: Vec<MgidItem>,
}

pub(super) struct Builder {
    pub(super) parts: Vec<PartBuild>,
    by_pkey: HashMap<u16, usize>,
    /// Partitions by (first) name.
    by_name: HashMap<String, Vec<usize>>,
    /// OpenSM's `global_pkey_counter`: the last P_Key generated.
    counter: u16,
    pub(super) warnings: Vec<ConfWarning>,
    /// Below a warning: worth one line in the log when the file loads.
    notes: Vec<ConfWarning>,
}

/// The partitions of a file and what to tell the operator about it.
pub(super) struct Built {
    pub(super) partitions: Vec<ConfPartition>,
    pub(super) warnings: Vec<ConfWarning>,
    pub(super) notes: Vec<ConfWarning>,
}

/// An entry as a message names it.
fn entry_label(name: Option<&str>) -> String {
    name.map_or_else(|| "an entry without a name".into(), |n| format!("entry '{}'", excerpt(n)))
}

/// Whether the entry `h` writes its P_Key otherwise than the first entry
/// of partition `p` did (both written, differing in bit 15 only).
fn spelt_otherwise(h: &Header, p: &PartBuild) -> bool {
    match (h.pkey, p.first_pkey.as_ref()) {
        (Some(this), Some((first, _))) => this.written != first.written,
        _ => false,
    }
}

/// Merges `ours` into `theirs`: a value both wrote must agree.
fn merge_param<T: PartialEq + Copy>(
    pkey: u16,
    param: &'static str,
    theirs: &mut Option<(T, Pos)>,
    ours: Option<(T, Pos)>,
    show: fn(T) -> String,
) -> Result<(), Fail> {
    match (*theirs, ours) {
        (Some((t, first)), Some((o, at))) if t != o => {
            Err((at, Problem::ConflictingParam { pkey, param, ours: show(o), theirs: show(t), first }))
        }
        (None, Some(o)) => {
            *theirs = Some(o);
            Ok(())
        }
        _ => Ok(()),
    }
}

impl Builder {
    pub(super) fn new() -> Self {
        // OpenSM makes the default partition before it reads the file: with
        // a file, every port is a limited member and the SM port a full
        // one, until the file says otherwise (`prtn_make_default`).
        let default = PartBuild {
            name: "Default".into(),
            pkey: DEFAULT_PARTITION,
            generated_at: None,
            at: None,
            first_pkey: None,
            ipoib: false,
            written: Written::default(),
            members: vec![
                MemberSpec { port: PortSpec::All, membership: Membership::Limited, indx0: false, at: None },
                MemberSpec { port: PortSpec::SelfPort, membership: Membership::Full, indx0: false, at: None },
            ],
            mgids: Vec::new(),
        };
        Builder {
            parts: vec![default],
            by_pkey: HashMap::from([(DEFAULT_PARTITION, 0)]),
            by_name: HashMap::from([("Default".to_string(), vec![0])]),
            counter: 0,
            warnings: Vec::new(),
            notes: Vec::new(),
        }
    }

    /// The partition an entry adds to (found or made), with the entry's
    /// flags merged in.
    pub(super) fn partition_for(&mut self, h: &Header) -> Result<usize, Fail> {
        let idx = match h.pkey {
            Some(pk) => match self.by_pkey.get(&pk.partition) {
                Some(&i) => {
                    if let Some(generated_at) = self.parts[i].generated_at {
                        let name = self.parts[i].name.clone();
                        return Err((
                            pk.at,
                            Problem::GeneratedPKeyTaken { pkey: pk.partition, written: pk.written, name, generated_at },
                        ));
                    }
                    i
                }
                None => self.make(h, pk.partition, None),
            },
            None => match self.named(h)? {
                Some(i) => i,
                None => {
                    let pkey = self.generate().ok_or((h.start, Problem::NoPKeyLeft))?;
                    self.make(h, pkey, Some(h.start))
                }
            },
        };
        let p = &mut self.parts[idx];
        if let Some((name, at)) = &h.name {
            match p.at {
                // Two names for one P_Key written alike: most likely a
                // copied line whose P_Key was not changed, so it is
                // refused, not merged. Written differently (0x8005 and
                // 0x0005), the file was written for OpenSM's masking, which
                // merges them under the first name: so do we, with the
                // warning below, or an OpenSM site's file would not load.
                Some(_) if *name != p.name && spelt_otherwise(h, p) => {}
                Some(first_at) if *name != p.name => {
                    return Err((
                        *at,
                        Problem::PKeyNamedTwice {
                            pkey: p.pkey,
                            written: h.pkey.map_or(p.pkey, |k| k.written),
                            first: excerpt(&p.name),
                            first_written: p.first_pkey.as_ref().map(|(k, _)| k.written),
                            first_at,
                        },
                    ));
                }
                // The default partition the SM makes before reading the
                // file keeps its name "Default", whatever the file calls it.
                None if *name != p.name => self.warnings.push(ConfWarning {
                    at: *at,
                    message: format!(
                        "partition {:#06x} is the default partition, named '{}'; the name '{}' here is not used",
                        p.pkey,
                        p.name,
                        excerpt(name)
                    ),
                }),
                _ => {}
            }
        }
        if p.at.is_none() {
            p.at = Some(h.start);
        }
        if let Some(pk) = h.pkey {
            let this_name = h.name.as_ref().map(|(n, _)| n.as_str());
            let (first, first_name) = p.first_pkey.get_or_insert_with(|| (pk, this_name.map(str::to_string)));
            if first.written != pk.written {
                // The entries merge as any two with one P_Key do, but one
                // of them may have been meant as another partition: say so.
                self.warnings.push(ConfWarning {
                    at: pk.at,
                    message: format!(
                        "{} writes P_Key {:#06x} and {} at {} wrote {:#06x}: only the low 15 bits count, as in OpenSM, so both are partition {:#06x} and the entries merge under the first one's name",
                        entry_label(this_name),
                        pk.written,
                        entry_label(first_name.as_deref()),
                        first.at,
                        first.written,
                        pk.partition
                    ),
                });
            } else if pk.written != pk.partition {
                self.notes.push(ConfWarning {
                    at: pk.at,
                    message: format!(
                        "P_Key {:#06x} is partition {:#06x}: membership (bit 15) is given per member, so only the low 15 bits count, as in OpenSM",
                        pk.written, pk.partition
                    ),
                });
            }
        }
        p.ipoib |= h.ipoib;
        let (pkey, w, o) = (p.pkey, &mut p.written, &h.written);
        merge_param(pkey, "mtu", &mut w.mtu, o.mtu, |v| format!("code {v}"))?;
        merge_param(pkey, "rate", &mut w.rate, o.rate, |v| format!("code {v}"))?;
        merge_param(pkey, "sl", &mut w.sl, o.sl, |v| v.to_string())?;
        merge_param(pkey, "Q_Key", &mut w.q_key, o.q_key, |v| format!("{v:#x}"))?;
        merge_param(pkey, "TClass", &mut w.tclass, o.tclass, |v| v.to_string())?;
        merge_param(pkey, "FlowLabel", &mut w.flow_label, o.flow_label, |v| format!("{v:#x}"))?;
        for &(s, at) in &o.scopes {
            if !w.scopes.iter().any(|&(t, _)| t == s) {
                w.scopes.push((s, at));
            }
        }
        Ok(idx)
    }

    fn named(&self, h: &Header) -> Result<Option<usize>, Fail> {
        let Some((name, at)) = &h.name else { return Ok(None) };
        let found = self.by_name.get(name).map_or(&[][..], Vec::as_slice);
        match found {
            [] => Ok(None),
            [one] => Ok(Some(*one)),
            many => Err((
                *at,
                Problem::AmbiguousName {
                    name: excerpt(name),
                    pkeys: many.iter().map(|&i| format!("{:#06x}", self.parts[i].pkey)).collect::<Vec<_>>().join(", "),
                },
            )),
        }
    }

    /// OpenSM's `generate_pkey`: the next number after the last one
    /// generated that no partition has yet, below 0x7fff.
    fn generate(&mut self) -> Option<u16> {
        while self.counter < DEFAULT_PARTITION - 1 {
            self.counter += 1;
            if !self.by_pkey.contains_key(&self.counter) {
                return Some(self.counter);
            }
        }
        None
    }

    fn make(&mut self, h: &Header, pkey: u16, generated_at: Option<Pos>) -> usize {
        // OpenSM names an unnamed partition by its P_Key in hex.
        let name = h.name.as_ref().map_or_else(|| format!("{pkey:04x}"), |(n, _)| n.clone());
        self.parts.push(PartBuild {
            name,
            pkey,
            generated_at,
            at: None,
            first_pkey: None,
            ipoib: false,
            written: Written::default(),
            members: Vec::new(),
            mgids: Vec::new(),
        });
        let i = self.parts.len() - 1;
        self.by_pkey.insert(pkey, i);
        self.by_name.entry(self.parts[i].name.clone()).or_default().push(i);
        i
    }

    /// Fills in defaults, builds every partition's groups and checks them.
    pub(super) fn finish(self) -> Result<Built, Fail> {
        let mut out = Vec::with_capacity(self.parts.len());
        // MGID -> (partition, params, where) of the first declaration.
        let mut seen: HashMap<[u8; 16], (u16, GroupParams, Option<Pos>)> = HashMap::new();
        for p in self.parts {
            let w = &p.written;
            let base = GroupParams {
                mtu: w.mtu.map_or(4, |v| v.0),
                rate: w.rate.map_or(3, |v| v.0),
                sl: w.sl.map_or(0, |v| v.0),
                scope: w.scopes.first().map_or(SCOPE_LINK_LOCAL, |v| v.0),
                q_key: w.q_key.map_or(IPOIB_QKEY, |v| v.0),
                tclass: w.tclass.map_or(0, |v| v.0),
                flow_label: w.flow_label.map_or(0, |v| v.0),
            };
            let full_pkey = p.pkey | FULL_MEMBER;
            let mut groups: Vec<ConfGroup> = Vec::new();
            let mut add = |g: ConfGroup, seen: &mut HashMap<_, _>| -> Result<(), Fail> {
                match seen.get(&g.mgid) {
                    None => {
                        seen.insert(g.mgid, (p.pkey, g.params, g.at));
                        groups.push(g);
                        Ok(())
                    }
                    Some(&(pkey, params, _)) if pkey == p.pkey && params == g.params => Ok(()),
                    Some(&(pkey, _, first)) => Err((
                        g.at.or(p.at).unwrap_or(Pos { line: 1, col: 1 }),
                        Problem::DuplicateGroup {
                            mgid: mgid_text(&g.mgid),
                            first: first.map_or_else(|| "the default partition".into(), |f| f.to_string()),
                            what: if pkey == p.pkey { "other parameters" } else { "another P_Key" },
                        },
                    )),
                }
            };
            if p.ipoib {
                let scopes: Vec<u8> =
                    if w.scopes.is_empty() { vec![SCOPE_LINK_LOCAL] } else { w.scopes.iter().map(|s| s.0).collect() };
                for scope in scopes {
                    let g = ConfGroup {
                        mgid: ipoib_broadcast_mgid(p.pkey, scope),
                        params: GroupParams { scope, ..base },
                        ipoib_broadcast: true,
                        at: p.at,
                    };
                    add(g, &mut seen)?;
                }
            }
            for item in &p.mgids {
                let mw = &item.written;
                let mut mgid = item.mgid;
                let ip = is_ip_mgid(&mgid);
                if ip {
                    let ip_fail = |at: Pos, why: String| {
                        (at, Problem::IpGroup { mgid: mgid_text(&item.mgid), pkey: p.pkey, why })
                    };
                    let carried = u16::from_be_bytes([mgid[4], mgid[5]]);
                    let mut template = ipoib_broadcast_mgid(DEFAULT_PARTITION, mgid[1] & 0x0f);
                    template[1] = mgid[1];
                    let is_template = mgid == template;
                    if !(is_template || carried == 0 || carried == full_pkey) {
                        return Err(ip_fail(
                            item.at,
                            format!("it carries P_Key {carried:#06x}; want 0 (filled in) or {full_pkey:#06x}"),
                        ));
                    }
                    if let Some((mtu, at)) = mw.mtu.filter(|&(m, _)| m != base.mtu) {
                        return Err(ip_fail(at, format!("mtu code {mtu} differs from the partition's {}", base.mtu)));
                    }
                    if let Some((rate, at)) = mw.rate.filter(|&(r, _)| r != base.rate) {
                        return Err(ip_fail(
                            at,
                            format!("rate code {rate} differs from the partition's {}", base.rate),
                        ));
                    }
                    mgid[4..6].copy_from_slice(&full_pkey.to_be_bytes());
                }
                let q_key = match (mw.q_key, w.q_key) {
                    (Some((q, _)), _) | (None, Some((q, _))) => q,
                    (None, None) if ip => IPOIB_QKEY,
                    (None, None) => 0,
                };
                let params = GroupParams {
                    mtu: mw.mtu.map_or(base.mtu, |v| v.0),
                    rate: mw.rate.map_or(base.rate, |v| v.0),
                    sl: mw.sl.map_or(base.sl, |v| v.0),
                    scope: 0,
                    q_key,
                    tclass: mw.tclass.map_or(base.tclass, |v| v.0),
                    flow_label: mw.flow_label.map_or(base.flow_label, |v| v.0),
                };
                let scopes: Vec<u8> = if !mw.scopes.is_empty() {
                    mw.scopes.iter().map(|s| s.0).collect()
                } else if !w.scopes.is_empty() {
                    w.scopes.iter().map(|s| s.0).collect()
                } else if mgid[1] & 0x0f != 0 {
                    vec![mgid[1] & 0x0f]
                } else {
                    vec![SCOPE_LINK_LOCAL]
                };
                for scope in scopes {
                    let mut m = mgid;
                    m[1] = (m[1] & 0xf0) | scope;
                    add(
                        ConfGroup {
                            mgid: m,
                            params: GroupParams { scope, ..params },
                            ipoib_broadcast: false,
                            at: Some(item.at),
                        },
                        &mut seen,
                    )?;
                }
            }
            out.push(ConfPartition {
                name: p.name,
                pkey: p.pkey,
                pkey_generated: p.generated_at.is_some(),
                at: p.at,
                ipoib: p.ipoib,
                params: base,
                sl_at: w.sl.map(|v| v.1),
                members: p.members,
                groups,
            });
        }
        Ok(Built { partitions: out, warnings: self.warnings, notes: self.notes })
    }
}
