//! Generator spec strings: a short text naming a fabric shape and its sizes.
//!
//! ```text
//! spec  := kind [ ":" item { "," item } ]
//! item  := key "=" value | dims            (dims: mesh/torus only)
//! dims  := N { "x" N }                     e.g. 4x4x4
//! ```
//! Keys every kind accepts: `width=1x|2x|4x|8x|12x` and `speed=sdr|ddr|qdr`
//! (all links; default 4x SDR, ibsim's default), and `cut=<percent>` (0..=90,
//! default 0) with `cutseed=<n>` (default 1): a degraded fabric, with
//! floor(E * cut / 100) of its E switch-to-switch cables removed at random
//! while the switches stay connected (see `generate`). `cutseed` without a
//! cut changes nothing.
//!
//! | kind | keys (default) |
//! |---|---|
//! | `fattree2` | `radix` (required), `hosts` per leaf (radix/2), `spines` ((radix-hosts)/parallel), `leaves` (radix/parallel), `parallel` links per leaf-spine pair (1) |
//! | `fattree3` | `radix`, `pods` (required), `hosts` per leaf (radix/2), `leaves` per pod (radix/2), `spines` per pod (radix/2), `uplinks` per spine (radix-leaves) |
//! | `mesh2d` `mesh3d` `torus2d` `torus3d` | dims (required; or `dims=`), `hosts` per switch (1), `radix` (hosts + 2 per dimension) |
//! | `dragonfly` | `routers` per group (required), `hosts` per router (1), `global` links per router (1), `groups` (routers*global+1) |
//! | `random` | `switches` (required), `links` switch-switch (2*switches) or `degree` (links = switches*degree/2), `hosts` (switches), `seed` (1), `radix` (ports as used) |
//! | `b2b` | none: two single-port hosts cabled back to back |
//!
//! `fattree2:radix=36` has 648 hosts; `fattree3:radix=36,pods=12` 3,888;
//! `fattree3:radix=36,pods=36` 11,664; `fattree3:radix=64,pods=49` 50,176.
//! `fattree2:radix=36,cut=15,cutseed=2` is the 648-host tree with 97 of its
//! 648 leaf-spine cables removed.
//! Defaults are resolved while parsing and `Display` prints every key (the
//! cut keys only when a cut is set), so `spec.to_string().parse()` gives the
//! same spec back.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use super::{LinkSpeedCode, LinkWidthCode, SpecError, DEFAULT_SPEED, DEFAULT_WIDTH};
use crate::types::MAX_PORTS;

/// The largest fabric a spec may ask for, in nodes (switches + hosts): a
/// guard against a typo allocating gigabytes.
pub const MAX_GENERATED_NODES: u64 = 1_000_000;

const KINDS: &str = "fattree2, fattree3, mesh2d, mesh3d, torus2d, torus3d, dragonfly, random, b2b";

/// Does the text before the first `:` name a generator?
pub fn names_generator(text: &str) -> bool {
    let kind = text.split_once(':').map_or(text, |(k, _)| k);
    matches!(
        kind,
        "fattree2" | "fattree3" | "mesh2d" | "mesh3d" | "torus2d" | "torus3d" | "dragonfly" | "random" | "b2b"
    )
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratorSpec {
    pub shape: Shape,
    /// LinkWidthActive of every link.
    pub width: LinkWidthCode,
    /// LinkSpeedActive of every link.
    pub speed: LinkSpeedCode,
    /// Switch-to-switch cables removed after the shape is built; `None` for
    /// the intact fabric (`cut=0` parses to `None`).
    pub cut: Option<Cut>,
}

/// The largest `cut` percentage: past it a fabric is mostly its spanning
/// tree, which the cut keeps anyway.
pub const MAX_CUT_PERCENT: u8 = 90;

/// A degraded fabric: `percent` of the switch-to-switch cables removed, the
/// choice drawn from ChaCha8 seeded by `seed`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cut {
    /// 1..=`MAX_CUT_PERCENT`.
    pub percent: u8,
    pub seed: u64,
}

/// A fabric shape with every size resolved. Port layouts are in `generate`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Shape {
    FatTree2 { radix: u8, hosts: u8, spines: u32, leaves: u32, parallel: u8 },
    FatTree3 { radix: u8, pods: u32, hosts: u8, leaves: u32, spines: u32, uplinks: u32 },
    Grid { dims: Vec<u32>, torus: bool, hosts: u8, radix: u8 },
    Dragonfly { groups: u32, routers: u32, hosts: u8, global: u8 },
    Random { switches: u32, links: u32, hosts: u32, seed: u64, radix: Option<u8> },
    BackToBack,
}

impl Shape {
    fn kind(&self) -> &'static str {
        match self {
            Shape::FatTree2 { .. } => "fattree2",
            Shape::FatTree3 { .. } => "fattree3",
            Shape::Grid { dims, torus: false, .. } if dims.len() == 2 => "mesh2d",
            Shape::Grid { torus: false, .. } => "mesh3d",
            Shape::Grid { dims, torus: true, .. } if dims.len() == 2 => "torus2d",
            Shape::Grid { torus: true, .. } => "torus3d",
            Shape::Dragonfly { .. } => "dragonfly",
            Shape::Random { .. } => "random",
            Shape::BackToBack => "b2b",
        }
    }

    /// (switches, hosts) this shape builds.
    pub fn counts(&self) -> (u64, u64) {
        match self {
            Shape::FatTree2 { hosts, spines, leaves, .. } => {
                (*leaves as u64 + *spines as u64, *leaves as u64 * *hosts as u64)
            }
            Shape::FatTree3 { pods, hosts, leaves, spines, uplinks, .. } => {
                let (p, l, s, u) = (*pods as u64, *leaves as u64, *spines as u64, *uplinks as u64);
                (p * (l + s) + s * u, p * l * *hosts as u64)
            }
            Shape::Grid { dims, hosts, .. } => {
                let n = dims.iter().fold(1u64, |a, &d| a.saturating_mul(d as u64));
                (n, n.saturating_mul(*hosts as u64))
            }
            Shape::Dragonfly { groups, routers, hosts, .. } => {
                let r = *groups as u64 * *routers as u64;
                (r, r * *hosts as u64)
            }
            Shape::Random { switches, hosts, .. } => (*switches as u64, *hosts as u64),
            Shape::BackToBack => (0, 2),
        }
    }
}

/// Collected `key=value` items of one spec.
struct Items {
    kind: &'static str,
    map: BTreeMap<String, String>,
    dims: Option<String>,
}

impl Items {
    fn take(&mut self, key: &'static str) -> Option<(&'static str, String)> {
        self.map.remove(key).map(|v| (key, v))
    }

    fn num<T: TryFrom<u64>>(&mut self, key: &'static str, min: u64, max: u64) -> Result<Option<T>, SpecError> {
        let Some((key, value)) = self.take(key) else {
            return Ok(None);
        };
        let bad = |reason: String| SpecError::BadValue { kind: self.kind, key, value: value.clone(), reason };
        let v: u64 = value.parse().map_err(|_| bad("not a non-negative integer".into()))?;
        if v < min || v > max {
            return Err(bad(format!("must be in {min}..={max}")));
        }
        T::try_from(v).map(Some).map_err(|_| bad("out of range".into()))
    }

    fn required<T: TryFrom<u64>>(&mut self, key: &'static str, min: u64, max: u64) -> Result<T, SpecError> {
        self.num(key, min, max)?.ok_or(SpecError::MissingKey { kind: self.kind, key })
    }
}

fn infeasible(kind: &'static str, reason: String) -> SpecError {
    SpecError::Infeasible { kind, reason }
}

const PORTS: u64 = MAX_PORTS as u64;
const COUNT: u64 = MAX_GENERATED_NODES;

impl FromStr for GeneratorSpec {
    type Err = SpecError;

    fn from_str(text: &str) -> Result<Self, SpecError> {
        let (kind_text, args) = text.trim().split_once(':').unwrap_or((text.trim(), ""));
        let kind: &'static str = match kind_text {
            "fattree2" => "fattree2",
            "fattree3" => "fattree3",
            "mesh2d" => "mesh2d",
            "mesh3d" => "mesh3d",
            "torus2d" => "torus2d",
            "torus3d" => "torus3d",
            "dragonfly" => "dragonfly",
            "random" => "random",
            "b2b" => "b2b",
            other => return Err(SpecError::UnknownKind { kind: other.to_string(), known: KINDS }),
        };
        let accepted: &'static str = match kind {
            "fattree2" => "radix, hosts, spines, leaves, parallel, width, speed, cut, cutseed",
            "fattree3" => "radix, pods, hosts, leaves, spines, uplinks, width, speed, cut, cutseed",
            "mesh2d" | "mesh3d" | "torus2d" | "torus3d" => {
                "<dims> (e.g. 4x4), dims, hosts, radix, width, speed, cut, cutseed"
            }
            "dragonfly" => "routers, hosts, global, groups, width, speed, cut, cutseed",
            "random" => "switches, links, degree, hosts, seed, radix, width, speed, cut, cutseed",
            _ => "width, speed, cut, cutseed",
        };
        let grid = kind.starts_with("mesh") || kind.starts_with("torus");
        let mut items = Items { kind, map: BTreeMap::new(), dims: None };
        for item in args.split(',').map(str::trim).filter(|s| !s.is_empty()) {
            let (key, value) = match item.split_once('=') {
                Some((k, v)) => (k.trim(), v.trim()),
                None if grid && looks_like_dims(item) => ("dims", item),
                None => return Err(SpecError::Malformed { kind, item: item.to_string() }),
            };
            let known = accepted.split(", ").any(|a| a == key) || (grid && key == "dims");
            if !known {
                return Err(SpecError::UnknownKey { kind, key: key.to_string(), accepted });
            }
            if key == "dims" {
                if items.dims.replace(value.to_string()).is_some() {
                    return Err(SpecError::DuplicateKey { kind, key: "dims".into() });
                }
            } else if items.map.insert(key.to_string(), value.to_string()).is_some() {
                return Err(SpecError::DuplicateKey { kind, key: key.to_string() });
            }
        }

        let width = match items.take("width") {
            None => DEFAULT_WIDTH,
            Some((key, v)) => parse_width(&v).ok_or(SpecError::BadValue {
                kind,
                key,
                value: v,
                reason: "expected 1x, 2x, 4x, 8x or 12x".into(),
            })?,
        };
        let speed = match items.take("speed") {
            None => DEFAULT_SPEED,
            Some((key, v)) => parse_speed(&v).ok_or(SpecError::BadValue {
                kind,
                key,
                value: v,
                reason: "expected sdr, ddr or qdr".into(),
            })?,
        };
        let percent: u8 = items.num("cut", 0, MAX_CUT_PERCENT as u64)?.unwrap_or(0);
        let cut_seed: u64 = items.num("cutseed", 0, u64::MAX)?.unwrap_or(1);
        let cut = (percent > 0).then_some(Cut { percent, seed: cut_seed });

        let shape = match kind {
            "fattree2" => {
                let radix: u8 = items.required("radix", 2, PORTS)?;
                let hosts: u8 = items.num("hosts", 0, PORTS)?.unwrap_or(radix / 2);
                let parallel: u8 = items.num("parallel", 1, PORTS)?.unwrap_or(1);
                let default_spines = (radix.saturating_sub(hosts) / parallel) as u32;
                let spines: u32 = items.num("spines", 1, COUNT)?.unwrap_or(default_spines.max(1));
                let leaves: u32 = items.num("leaves", 1, COUNT)?.unwrap_or((radix / parallel).max(1) as u32);
                let leaf_ports = hosts as u64 + spines as u64 * parallel as u64;
                if leaf_ports > radix as u64 {
                    return Err(infeasible(
                        kind,
                        format!("a leaf needs hosts + spines*parallel = {leaf_ports} ports, radix is {radix}"),
                    ));
                }
                if leaves as u64 * parallel as u64 > radix as u64 {
                    return Err(infeasible(
                        kind,
                        format!(
                            "a spine needs leaves*parallel = {} ports, radix is {radix}",
                            leaves as u64 * parallel as u64
                        ),
                    ));
                }
                Shape::FatTree2 { radix, hosts, spines, leaves, parallel }
            }
            "fattree3" => {
                let radix: u8 = items.required("radix", 2, PORTS)?;
                let pods: u32 = items.required("pods", 1, PORTS)?;
                let hosts: u8 = items.num("hosts", 0, PORTS)?.unwrap_or(radix / 2);
                let leaves: u32 = items.num("leaves", 1, PORTS)?.unwrap_or((radix as u32 / 2).max(1));
                let spines: u32 = items.num("spines", 1, PORTS)?.unwrap_or((radix as u32 / 2).max(1));
                let uplinks: u32 = items.num("uplinks", 0, PORTS)?.unwrap_or((radix as u32).saturating_sub(leaves));
                if hosts as u32 + spines > radix as u32 {
                    return Err(infeasible(
                        kind,
                        format!("a leaf needs hosts + spines = {} ports, radix is {radix}", hosts as u32 + spines),
                    ));
                }
                if leaves + uplinks > radix as u32 {
                    return Err(infeasible(
                        kind,
                        format!("a spine needs leaves + uplinks = {} ports, radix is {radix}", leaves + uplinks),
                    ));
                }
                if pods > radix as u32 {
                    return Err(infeasible(
                        kind,
                        format!("a core switch has one port per pod: {pods} pods, radix is {radix}"),
                    ));
                }
                if pods > 1 && uplinks == 0 {
                    return Err(infeasible(kind, "pods > 1 need uplinks >= 1 to be connected".into()));
                }
                Shape::FatTree3 { radix, pods, hosts, leaves, spines, uplinks }
            }
            "mesh2d" | "mesh3d" | "torus2d" | "torus3d" => {
                let want = if kind.ends_with("2d") { 2 } else { 3 };
                let Some(text) = items.dims.take() else {
                    return Err(SpecError::MissingKey { kind, key: "dims" });
                };
                let dims = parse_dims(&text).filter(|d| d.len() == want).ok_or_else(|| SpecError::BadValue {
                    kind,
                    key: "dims",
                    value: text.clone(),
                    reason: format!("expected {want} sizes >= 1 like {}", if want == 2 { "4x4" } else { "4x4x4" }),
                })?;
                let hosts: u8 = items.num("hosts", 0, PORTS)?.unwrap_or(1);
                let needed = hosts as u64 + 2 * want as u64;
                let radix: u8 = items.num("radix", 1, PORTS)?.unwrap_or(needed.min(PORTS) as u8);
                if needed > radix as u64 {
                    return Err(infeasible(
                        kind,
                        format!("a switch needs hosts + 2*{want} = {needed} ports, radix is {radix}"),
                    ));
                }
                Shape::Grid { dims, torus: kind.starts_with("torus"), hosts, radix }
            }
            "dragonfly" => {
                let routers: u32 = items.required("routers", 1, PORTS)?;
                let hosts: u8 = items.num("hosts", 0, PORTS)?.unwrap_or(1);
                let global: u8 = items.num("global", 0, PORTS)?.unwrap_or(1);
                let per_group = routers as u64 * global as u64;
                let groups: u32 = items.num("groups", 1, COUNT)?.unwrap_or((per_group + 1).min(COUNT) as u32);
                let ports = hosts as u64 + routers as u64 - 1 + global as u64;
                if ports == 0 || ports > PORTS {
                    return Err(infeasible(
                        kind,
                        format!("a router needs hosts + routers-1 + global = {ports} ports (1..=254)"),
                    ));
                }
                if groups > 1 && per_group < groups as u64 - 1 {
                    return Err(infeasible(
                        kind,
                        format!(
                            "routers*global = {per_group} global ports per group cannot reach the other {} groups",
                            groups - 1
                        ),
                    ));
                }
                Shape::Dragonfly { groups, routers, hosts, global }
            }
            "random" => {
                let switches: u32 = items.required("switches", 1, COUNT)?;
                let links: Option<u32> = items.num("links", 0, COUNT * 127)?;
                let degree: Option<u32> = items.num("degree", 0, PORTS)?;
                let links = match (links, degree) {
                    (Some(_), Some(_)) => {
                        return Err(infeasible(kind, "give `links` or `degree`, not both".into()));
                    }
                    (Some(l), None) => l,
                    (None, Some(d)) => (switches as u64 * d as u64 / 2) as u32,
                    (None, None) => switches.saturating_mul(2),
                };
                let hosts: u32 = items.num("hosts", 0, COUNT)?.unwrap_or(switches);
                let seed: u64 = items.num("seed", 0, u64::MAX)?.unwrap_or(1);
                let radix: Option<u8> = items.num("radix", 1, PORTS)?;
                if (links as u64) < switches as u64 - 1 {
                    return Err(infeasible(
                        kind,
                        format!("{switches} switches need at least {} links to be connected", switches - 1),
                    ));
                }
                if switches == 1 && links > 0 {
                    return Err(infeasible(kind, "one switch cannot have switch-to-switch links".into()));
                }
                let cap = radix.map_or(PORTS, |r| r as u64) * switches as u64;
                let need = 2 * links as u64 + hosts as u64;
                if need > cap {
                    return Err(infeasible(
                        kind,
                        format!("{need} switch ports needed, {switches} switches hold {cap}"),
                    ));
                }
                Shape::Random { switches, links, hosts, seed, radix }
            }
            _ => Shape::BackToBack,
        };
        let (switches, hosts) = shape.counts();
        if switches + hosts > MAX_GENERATED_NODES {
            return Err(infeasible(kind, format!("{} nodes exceed the {MAX_GENERATED_NODES} limit", switches + hosts)));
        }
        Ok(GeneratorSpec { shape, width, speed, cut })
    }
}

fn looks_like_dims(s: &str) -> bool {
    s.starts_with(|c: char| c.is_ascii_digit()) && s.chars().all(|c| c.is_ascii_digit() || c == 'x')
}

fn parse_dims(s: &str) -> Option<Vec<u32>> {
    s.split('x').map(|d| d.parse::<u32>().ok().filter(|&v| v >= 1 && v as u64 <= COUNT)).collect()
}

fn parse_width(s: &str) -> Option<LinkWidthCode> {
    match s.to_ascii_lowercase().as_str() {
        "1x" => Some(super::WIDTH_1X),
        "2x" => Some(super::WIDTH_2X),
        "4x" => Some(super::WIDTH_4X),
        "8x" => Some(super::WIDTH_8X),
        "12x" => Some(super::WIDTH_12X),
        _ => None,
    }
}

fn parse_speed(s: &str) -> Option<LinkSpeedCode> {
    match s.to_ascii_lowercase().as_str() {
        "sdr" => Some(super::SPEED_SDR),
        "ddr" => Some(super::SPEED_DDR),
        "qdr" => Some(super::SPEED_QDR),
        _ => None,
    }
}

fn width_text(w: LinkWidthCode) -> &'static str {
    match w {
        super::WIDTH_1X => "1x",
        super::WIDTH_2X => "2x",
        super::WIDTH_8X => "8x",
        super::WIDTH_12X => "12x",
        _ => "4x",
    }
}

fn speed_text(s: LinkSpeedCode) -> &'static str {
    match s {
        super::SPEED_DDR => "ddr",
        super::SPEED_QDR => "qdr",
        _ => "sdr",
    }
}

impl fmt::Display for GeneratorSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:", self.shape.kind())?;
        match &self.shape {
            Shape::FatTree2 { radix, hosts, spines, leaves, parallel } => {
                write!(f, "radix={radix},hosts={hosts},spines={spines},leaves={leaves},parallel={parallel},")?
            }
            Shape::FatTree3 { radix, pods, hosts, leaves, spines, uplinks } => {
                write!(f, "radix={radix},pods={pods},hosts={hosts},leaves={leaves},spines={spines},uplinks={uplinks},")?
            }
            Shape::Grid { dims, hosts, radix, .. } => {
                let d: Vec<String> = dims.iter().map(u32::to_string).collect();
                write!(f, "{},hosts={hosts},radix={radix},", d.join("x"))?
            }
            Shape::Dragonfly { groups, routers, hosts, global } => {
                write!(f, "routers={routers},hosts={hosts},global={global},groups={groups},")?
            }
            Shape::Random { switches, links, hosts, seed, radix } => {
                write!(f, "switches={switches},links={links},hosts={hosts},seed={seed},")?;
                if let Some(r) = radix {
                    write!(f, "radix={r},")?;
                }
            }
            Shape::BackToBack => {}
        }
        write!(f, "width={},speed={}", width_text(self.width), speed_text(self.speed))?;
        if let Some(Cut { percent, seed }) = self.cut {
            write!(f, ",cut={percent},cutseed={seed}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(s: &str) -> GeneratorSpec {
        s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
    }

    #[test]
    fn defaults_resolve() {
        assert_eq!(
            spec("fattree2:radix=36").shape,
            Shape::FatTree2 { radix: 36, hosts: 18, spines: 18, leaves: 36, parallel: 1 }
        );
        assert_eq!(
            spec("fattree3:radix=36,pods=12").shape,
            Shape::FatTree3 { radix: 36, pods: 12, hosts: 18, leaves: 18, spines: 18, uplinks: 18 }
        );
        assert_eq!(spec("mesh2d:4x4").shape, Shape::Grid { dims: vec![4, 4], torus: false, hosts: 1, radix: 5 });
        assert_eq!(
            spec("torus3d:4x4x4,hosts=2").shape,
            Shape::Grid { dims: vec![4, 4, 4], torus: true, hosts: 2, radix: 8 }
        );
        assert_eq!(
            spec("dragonfly:routers=4,hosts=2,global=1").shape,
            Shape::Dragonfly { groups: 5, routers: 4, hosts: 2, global: 1 }
        );
        assert_eq!(
            spec("random:switches=20,links=40,hosts=30,seed=7").shape,
            Shape::Random { switches: 20, links: 40, hosts: 30, seed: 7, radix: None }
        );
        assert_eq!(
            spec("random:switches=10,degree=3").shape,
            Shape::Random { switches: 10, links: 15, hosts: 10, seed: 1, radix: None }
        );
        let b = spec("b2b");
        assert_eq!((b.shape, b.width, b.speed), (Shape::BackToBack, 2, 1));
        let w = spec("b2b:width=12x,speed=QDR");
        assert_eq!((w.width, w.speed), (8, 4));
    }

    #[test]
    fn host_counts_of_the_named_sizes() {
        assert_eq!(spec("fattree2:radix=36").shape.counts().1, 648);
        assert_eq!(spec("fattree3:radix=36,pods=12").shape.counts().1, 3888);
        assert_eq!(spec("fattree3:radix=36,pods=36").shape.counts().1, 11664);
        assert_eq!(spec("fattree3:radix=64,pods=49").shape.counts().1, 50176);
    }

    #[test]
    fn display_round_trips() {
        for s in [
            "fattree2:radix=8,leaves=4,spines=2,hosts=4",
            "fattree3:radix=36,pods=12",
            "torus3d:4x4x4,hosts=2",
            "mesh2d:4x4",
            "dragonfly:groups=5,routers=4,hosts=2,global=1",
            "random:switches=20,links=40,hosts=30,seed=7",
            "random:switches=20,links=40,hosts=30,seed=7,radix=12",
            "b2b",
            "b2b:width=1x,speed=ddr",
            "fattree2:radix=36,cut=15,cutseed=2",
            "torus2d:4x4,cut=90,cutseed=18446744073709551615",
        ] {
            let a = spec(s);
            assert_eq!(spec(&a.to_string()), a, "{s} -> {a}");
        }
    }

    #[test]
    fn errors_name_the_bad_key() {
        let e = |s: &str| s.parse::<GeneratorSpec>().unwrap_err();
        assert_eq!(
            e("fattree2:radix=8,leafs=4"),
            SpecError::UnknownKey {
                kind: "fattree2",
                key: "leafs".into(),
                accepted: "radix, hosts, spines, leaves, parallel, width, speed, cut, cutseed"
            }
        );
        assert_eq!(e("fattree2:hosts=4"), SpecError::MissingKey { kind: "fattree2", key: "radix" });
        assert!(matches!(e("fattree2:radix=abc"), SpecError::BadValue { key: "radix", .. }));
        assert!(matches!(e("fattree2:radix=300"), SpecError::BadValue { key: "radix", .. }));
        assert!(matches!(e("fattree2:radix=8,radix=9"), SpecError::DuplicateKey { .. }));
        assert!(matches!(e("fattree2:radix=8,hosts=6,spines=4"), SpecError::Infeasible { .. }));
        assert!(matches!(e("fattree3:radix=8,pods=9"), SpecError::Infeasible { .. }));
        assert!(matches!(e("torus3d:4x4"), SpecError::BadValue { key: "dims", .. }));
        assert!(matches!(e("torus3d:hosts=2"), SpecError::MissingKey { key: "dims", .. }));
        assert!(matches!(e("mesh2d:4x0"), SpecError::BadValue { key: "dims", .. }));
        assert!(matches!(e("dragonfly:routers=2,global=1,groups=5"), SpecError::Infeasible { .. }));
        assert!(matches!(e("random:switches=10,links=3"), SpecError::Infeasible { .. }));
        assert!(matches!(e("random:switches=3,links=3,radix=1"), SpecError::Infeasible { .. }));
        assert!(matches!(e("b2b:width=3x"), SpecError::BadValue { key: "width", .. }));
        assert!(matches!(e("b2b:radix=3"), SpecError::UnknownKey { .. }));
        assert!(matches!(e("fattree2:8"), SpecError::Malformed { .. }));
        assert!(matches!(e("fatree2:radix=8"), SpecError::UnknownKind { .. }));
        assert!(matches!(e("mesh3d:1000x1000x1000"), SpecError::Infeasible { .. }));
    }

    #[test]
    fn cut_keys() {
        let plain = spec("fattree2:radix=8");
        assert_eq!(plain.cut, None);
        // cut=0 is the intact fabric, whatever the seed.
        assert_eq!(spec("fattree2:radix=8,cut=0"), plain);
        assert_eq!(spec("fattree2:radix=8,cut=0,cutseed=9"), plain);
        assert_eq!(spec("fattree2:radix=8,cut=15").cut, Some(Cut { percent: 15, seed: 1 }));
        assert_eq!(spec("mesh2d:4x4,cutseed=7,cut=90").cut, Some(Cut { percent: 90, seed: 7 }));
        assert_eq!(spec("b2b:cut=5").cut, Some(Cut { percent: 5, seed: 1 }));
        // Uncut specs print as before; cut ones print both keys.
        assert_eq!(plain.to_string(), "fattree2:radix=8,hosts=4,spines=4,leaves=8,parallel=1,width=4x,speed=sdr");
        assert_eq!(
            spec("fattree2:radix=8,cut=15,cutseed=3").to_string(),
            "fattree2:radix=8,hosts=4,spines=4,leaves=8,parallel=1,width=4x,speed=sdr,cut=15,cutseed=3"
        );

        let e = |s: &str| s.parse::<GeneratorSpec>().unwrap_err();
        assert_eq!(
            e("fattree2:radix=8,cut=91"),
            SpecError::BadValue {
                kind: "fattree2",
                key: "cut",
                value: "91".into(),
                reason: "must be in 0..=90".into()
            }
        );
        assert!(matches!(e("fattree2:radix=8,cut=abc"), SpecError::BadValue { key: "cut", .. }));
        assert!(matches!(e("fattree2:radix=8,cut=-1"), SpecError::BadValue { key: "cut", .. }));
        assert!(matches!(e("torus2d:4x4,cut=5,cutseed=x"), SpecError::BadValue { key: "cutseed", .. }));
        assert!(matches!(e("fattree2:radix=8,cut=5,cut=6"), SpecError::DuplicateKey { .. }));
    }

    #[test]
    fn generator_names_are_recognised() {
        assert!(names_generator("b2b"));
        assert!(names_generator("fattree3:radix=4,pods=2"));
        assert!(!names_generator("./b2b"));
        assert!(!names_generator("fixtures/topologies/x.net"));
    }
}
