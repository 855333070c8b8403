//! The readers never panic, whatever they are fed, and whatever they accept
//! is a valid model the writer can reproduce; generated fabrics survive
//! write -> read unchanged.

use std::path::Path;

use ibsm::topology::{fabric_diff, netfile::parse_net_with, to_net_string, GeneratorSpec, Topology, TopologyError};
use proptest::prelude::*;

fn no_includes(p: &Path) -> std::io::Result<Vec<u8>> {
    Err(std::io::Error::new(std::io::ErrorKind::NotFound, p.display().to_string()))
}

/// Parses; when accepted, checks the model is valid and that writing it
/// back and reading again gives the same fabric.
fn check(text: &[u8]) {
    let Ok(parsed) = parse_net_with(text, Path::new("fuzz.net"), &mut no_includes) else {
        return;
    };
    let t = parsed.topology;
    assert_eq!(t.validate(), Ok(()));
    match to_net_string(&t) {
        Ok(out) => {
            let back = parse_net_with(out.as_bytes(), Path::new("again.net"), &mut no_includes)
                .unwrap_or_else(|e| panic!("rewritten file rejected: {e}\n{out}"))
                .topology;
            let diff = fabric_diff(&t, &back, 5);
            assert!(diff.is_empty(), "{diff:?}\n{out}");
        }
        // Only what ibsim cannot express may be refused.
        Err(TopologyError::Unrepresentable { .. }) => {}
        Err(e) => panic!("writer failed on an accepted model: {e}"),
    }
}

/// Line fragments close to the grammar, so random combinations get deep.
fn line() -> impl Strategy<Value = String> {
    let name = prop_oneof![Just("a"), Just("b"), Just("sw"), Just("S-0002c9"), Just(""), Just("x#y")];
    let num = prop_oneof![0u32..5, Just(8), Just(36), Just(255), Just(4096)];
    let kind = prop_oneof![Just("Switch"), Just("Hca"), Just("Ca"), Just("Rt"), Just("Swtch")];
    prop_oneof![
        (kind, num.clone(), name.clone(), prop::option::of("[ -~]{0,20}")).prop_map(|(k, n, nm, d)| match d {
            Some(d) => format!("{k}\t{n} \"{nm}\"\t# {d}"),
            None => format!("{k} {n} \"{nm}\""),
        }),
        (num.clone(), name.clone(), prop::option::of(num.clone()), prop::option::of("[wse]=[0-9x]{1,3}")).prop_map(
            |(p, nm, rp, opt)| {
                let mut s = format!("[{p}]\t\"{nm}\"");
                if let Some(rp) = rp {
                    s += &format!("[{rp}]");
                }
                if let Some(o) = opt {
                    s += &format!(" {o}");
                }
                s
            }
        ),
        (num.clone(), name.clone(), num.clone())
            .prop_map(|(p, nm, rp)| format!("[{p}](1234) \t\"{nm}\"[{rp}](abcd) \t\t# lid 3 lmc 0 \"d\" lid 1 4xQDR")),
        (
            prop_oneof![Just("switchguid"), Just("caguid"), Just("rtguid"), Just("sysimgguid"), Just("width")],
            prop_oneof![Just("="), Just("+"), Just(" ")],
            "[0-9a-fx()]{0,12}"
        )
            .prop_map(|(k, op, v)| format!("{k}{op}{v}")),
        Just(String::new()),
        Just("# comment".to_string()),
        Just("do Dump".to_string()),
        Just("include \"nowhere.net\"".to_string()),
        "[ -~\t]{0,30}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..1500)) {
        check(&bytes);
    }

    #[test]
    fn grammar_like_lines_never_panic(lines in prop::collection::vec(line(), 0..40)) {
        check(lines.join("\n").as_bytes());
    }

    #[test]
    fn mutated_fixtures_never_panic(
        which in 0usize..4,
        edits in prop::collection::vec((0usize..64, 0u8..4, any::<u8>()), 1..6),
    ) {
        let name = ["ibsim-example-net.net", "guids.net", "rates.net", "ibsim-example-2sw2path4hca.ibnetdiscover"][which];
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/topologies").join(name);
        let mut lines: Vec<Vec<u8>> = std::fs::read(path).unwrap().split(|&b| b == b'\n').map(<[u8]>::to_vec).collect();
        for (at, op, byte) in edits {
            let i = at % lines.len().max(1);
            match op {
                0 if !lines.is_empty() => { lines.remove(i); }
                1 if !lines.is_empty() => { let l = lines[i].clone(); lines.insert(i, l); }
                2 if !lines.is_empty() && !lines[i].is_empty() => { let j = byte as usize % lines[i].len(); lines[i][j] = byte; }
                _ => lines.insert(i.min(lines.len()), vec![byte]),
            }
        }
        check(&lines.join(&b'\n'));
    }

    #[test]
    fn spec_strings_never_panic(s in "[a-z0-9:,=x]{0,40}") {
        if let Ok(spec) = s.parse::<GeneratorSpec>() {
            let (sw, hosts) = spec.shape.counts();
            if sw + hosts <= 2000 {
                // Infeasible random fabrics may be refused, never panic.
                if let Ok(t) = spec.generate() {
                    prop_assert_eq!(t.validate(), Ok(()));
                }
            }
        }
    }

    #[test]
    fn generated_random_fabrics_round_trip(
        switches in 1u32..25, extra in 0u32..30, hosts in 0u32..40, seed in any::<u64>(),
    ) {
        let links = if switches == 1 { 0 } else { switches - 1 + extra };
        let spec = format!("random:switches={switches},links={links},hosts={hosts},seed={seed}");
        let t = spec.parse::<GeneratorSpec>().unwrap().generate().unwrap();
        let text = to_net_string(&t).unwrap();
        let back = parse_net_with(text.as_bytes(), Path::new("gen.net"), &mut no_includes).unwrap().topology;
        prop_assert_eq!(&back.nodes, &t.nodes);
        prop_assert!(fabric_diff(&t, &back, 5).is_empty());
    }

    #[test]
    fn generated_grids_and_trees_round_trip(a in 1u32..5, b in 1u32..5, c in 1u32..4, h in 0u8..3, torus in any::<bool>(), radix in 2u8..10) {
        for spec in [
            format!("{}3d:{a}x{b}x{c},hosts={h}", if torus { "torus" } else { "mesh" }),
            format!("fattree2:radix={radix}"),
            format!("fattree3:radix={radix},pods={}", 1 + a.min(radix as u32 - 1)),
            format!("dragonfly:routers={a},hosts={h},global={c}"),
        ] {
            let t: Topology = spec.parse::<GeneratorSpec>().unwrap().generate().unwrap();
            let text = to_net_string(&t).unwrap();
            let back = parse_net_with(text.as_bytes(), Path::new("gen.net"), &mut no_includes).unwrap().topology;
            prop_assert_eq!(&back.nodes, &t.nodes, "{}", spec);
            prop_assert!(fabric_diff(&t, &back, 5).is_empty(), "{}", spec);
        }
    }
}
