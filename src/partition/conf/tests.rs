use super::*;

fn parse(text: &str) -> PartitionConf {
    PartitionConf::parse(text, Path::new("partitions.conf")).unwrap_or_else(|e| panic!("{e}"))
}

fn err(text: &str) -> (Pos, Problem, String) {
    let e = PartitionConf::parse(text, Path::new("partitions.conf")).expect_err("should fail");
    (e.at().expect("a position"), e.problem().expect("a problem").clone(), e.to_string())
}

fn at(line: u32, col: u32) -> Pos {
    Pos { line, col }
}

fn m(port: PortSpec, membership: Membership) -> (PortSpec, Membership) {
    (port, membership)
}

fn members(p: &ConfPartition) -> Vec<(PortSpec, Membership)> {
    p.members.iter().map(|s| (s.port, s.membership)).collect()
}

fn mgid(s: &str) -> [u8; 16] {
    s.parse::<Ipv6Addr>().unwrap().octets()
}

const G1: PortSpec = PortSpec::Guid(Guid(0x0002_c903_00a1_b2c1));
const G2: PortSpec = PortSpec::Guid(Guid(0x0002_c903_00a1_b2c2));

#[test]
fn the_reference_example() {
    let c = parse(
        "Default=0x7fff, ipoib, mtu=5, rate=7 : ALL=full ;        # bcast group, 4K MTU\n\
         storage=0x0010, ipoib, defmember=full : 0x0002c90300a1b2c1, 0x0002c90300a1b2c2=limited, SELF ;\n\
         Default=0x7fff : mgid=ff12:401b::0707,sl=1 ;\n",
    );
    assert_eq!(c.partitions.len(), 2);
    let d = &c.partitions[0];
    assert_eq!((d.name.as_str(), d.pkey, d.ipoib, d.at), ("Default", 0x7fff, true, Some(at(1, 1))));
    assert_eq!((d.params.mtu, d.params.rate, d.params.q_key, d.params.scope), (5, 7, 0x0b1b, 2));
    // OpenSM's implicit members first, then the file's.
    assert_eq!(
        members(d),
        vec![
            m(PortSpec::All, Membership::Limited),
            m(PortSpec::SelfPort, Membership::Full),
            m(PortSpec::All, Membership::Full)
        ]
    );
    assert_eq!(d.members[2].at, Some(at(1, 40)));
    assert_eq!(d.groups.len(), 2);
    assert_eq!(d.groups[0].mgid, mgid("ff12:401b:ffff::ffff:ffff"));
    assert!(d.groups[0].ipoib_broadcast);
    // The IP group gets the P_Key filled in, the partition's MTU and
    // rate, the IPoIB Q_Key, and its own SL.
    let g = &d.groups[1];
    assert_eq!(g.mgid, mgid("ff12:401b:ffff::707"));
    assert_eq!((g.params.mtu, g.params.rate, g.params.sl, g.params.q_key), (5, 7, 1, 0x0b1b));
    assert_eq!((g.ipoib_broadcast, g.at), (false, Some(at(3, 18))));

    let s = &c.partitions[1];
    assert_eq!((s.name.as_str(), s.pkey, s.ipoib, s.pkey_generated), ("storage", 0x10, true, false));
    assert_eq!(
        members(s),
        vec![m(G1, Membership::Full), m(G2, Membership::Limited), m(PortSpec::SelfPort, Membership::Full)]
    );
    assert_eq!(s.groups.len(), 1);
    // Defaults: 2048 MTU (4), 10 Gb/s (3).
    assert_eq!((s.groups[0].params.mtu, s.groups[0].params.rate), (4, 3));
    assert_eq!(s.groups[0].mgid, [0xff, 0x12, 0x40, 0x1b, 0x80, 0x10, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]);
}

#[test]
fn the_man_page_example() {
    let c = parse(
        "Default=0x7fff : ALL, SELF=full ;\n\
         NewPartition , ipoib : 0x123456=full, 0x3456789034=limi, 0x2134af2306 ;\n\
         YetAnotherOne = 0x300 : SELF=full ;\n\
         YetAnotherOne = 0x300 : ALL=limited ;\n\
         ShareIO = 0x80 , defmember=full : 0x123451, 0x123452;\n\
         # 0x123453, 0x123454 will be limited\n\
         ShareIO = 0x80 : 0x123453, 0x123454, 0x123455=full;\n\
         ShareIO = 0x80 , defmember=full : 0x12345b, 0x12345c=limited, 0x12345d;\n\
         # multicast groups added to default\n\
         Default=0x7fff,ipoib:\n\
         \tmgid=ff12:401b::0707,sl=1 # random IPv4 group\n\
         \tmgid=ff12:601b::16    # MLDv2-capable routers\n\
         \tmgid=ff12:401b::16    # IGMP\n\
         \tmgid=ff12:601b::2     # All routers\n\
         \tmgid=ff12::1,sl=1,Q_Key=0xDEADBEEF,rate=3,mtu=2 # random group\n\
         \tALL=full;\n",
    );
    let names: Vec<_> = c.partitions.iter().map(|p| (p.name.as_str(), p.pkey)).collect();
    assert_eq!(names, vec![("Default", 0x7fff), ("NewPartition", 1), ("YetAnotherOne", 0x300), ("ShareIO", 0x80)]);
    assert!(c.partitions[1].pkey_generated);
    let g = |n: u64| PortSpec::Guid(Guid(n));
    assert_eq!(
        members(&c.partitions[1]),
        vec![
            m(g(0x123456), Membership::Full),
            m(g(0x3456789034), Membership::Limited),
            m(g(0x2134af2306), Membership::Limited)
        ]
    );
    assert_eq!(
        members(&c.partitions[3]),
        vec![
            m(g(0x123451), Membership::Full),
            m(g(0x123452), Membership::Full),
            m(g(0x123453), Membership::Limited),
            m(g(0x123454), Membership::Limited),
            m(g(0x123455), Membership::Full),
            m(g(0x12345b), Membership::Full),
            m(g(0x12345c), Membership::Limited),
            m(g(0x12345d), Membership::Full),
        ]
    );
    let d = &c.partitions[0];
    assert!(d.ipoib);
    assert_eq!(members(d).last(), Some(&m(PortSpec::All, Membership::Full)));
    let groups: Vec<_> = d.groups.iter().map(|g| (g.mgid, g.params.q_key, g.params.sl)).collect();
    assert_eq!(
        groups,
        vec![
            (mgid("ff12:401b:ffff::ffff:ffff"), 0x0b1b, 0),
            (mgid("ff12:401b:ffff::707"), 0x0b1b, 1),
            (mgid("ff12:601b:ffff::16"), 0x0b1b, 0),
            (mgid("ff12:401b:ffff::16"), 0x0b1b, 0),
            (mgid("ff12:601b:ffff::2"), 0x0b1b, 0),
            (mgid("ff12::1"), 0xdead_beef, 1),
        ]
    );
    assert_eq!((d.groups[5].params.mtu, d.groups[5].params.rate), (2, 3));
    // The NewPartition broadcast group carries the generated P_Key.
    assert_eq!(c.partitions[1].groups[0].mgid, mgid("ff12:401b:8001::ffff:ffff"));
}

#[test]
fn the_man_pages_double_colon_line_is_refused_as_opensm_refuses_it() {
    let (pos, problem, msg) = err("ShareIO = 0x80 : defmember=limited : 0x123456, 0x123457, 0x123458=full;\n");
    assert_eq!(pos, at(1, 18));
    assert_eq!(problem, Problem::FlagAmongMembers("defmember".into()));
    assert!(msg.starts_with("partitions.conf:1:18: 'defmember' is a flag"), "{msg}");
}

#[test]
fn no_file_default() {
    let c = PartitionConf::default_no_file();
    assert_eq!(c.path, None);
    let d = &c.partitions[0];
    assert_eq!((d.pkey, d.ipoib), (0x7fff, true));
    assert_eq!(members(d)[0], m(PortSpec::All, Membership::Full));
    assert_eq!(d.groups.len(), 1);
    assert_eq!(d.groups[0].mgid, mgid("ff12:401b:ffff::ffff:ffff"));
    assert_eq!(d.groups[0].params, GroupParams::default());
}

#[test]
fn a_file_without_default_line_has_opensms_implicit_default() {
    let c = parse("p=0x10: ALL;");
    let d = &c.partitions[0];
    assert_eq!((d.pkey, d.ipoib, d.at, d.groups.len()), (0x7fff, false, None, 0));
    assert_eq!(members(d), vec![m(PortSpec::All, Membership::Limited), m(PortSpec::SelfPort, Membership::Full)]);
    assert!(d.members.iter().all(|s| s.at.is_none()));
    // An empty file is the same default.
    assert_eq!(parse("# nothing\n\n").partitions, parse("").partitions);
    assert_eq!(parse("").partitions.len(), 1);
}

#[test]
fn every_portspec() {
    let c = parse("p=0x10: ALL, ALL_CAS=full, all_switches=both, ALL_ROUTERS=l, SELF=f, NONE=full, 0x1, 255, 010;");
    let p = &c.partitions[1];
    assert_eq!(
        members(p),
        vec![
            m(PortSpec::All, Membership::Limited),
            m(PortSpec::AllCas, Membership::Full),
            m(PortSpec::AllSwitches, Membership::Both),
            m(PortSpec::AllRouters, Membership::Limited),
            m(PortSpec::SelfPort, Membership::Full),
            m(PortSpec::Guid(Guid(1)), Membership::Limited),
            m(PortSpec::Guid(Guid(255)), Membership::Limited),
            // strtoull base 0: a leading 0 is octal, as OpenSM reads it.
            m(PortSpec::Guid(Guid(8)), Membership::Limited),
        ]
    );
    // NONE names nobody; an empty list is allowed.
    assert!(parse("p=0x10: NONE;").partitions[1].members.is_empty());
    assert!(parse("p=0x10: ;").partitions[1].members.is_empty());
    assert!(parse("p=0x10:;").partitions[1].members.is_empty());
}

#[test]
fn defmember_and_indx0_apply_to_their_own_entry() {
    let c = parse("p=0x10, defmember=both, indx0: 0x1, 0x2=limited;\np=0x10: 0x3;");
    let p = &c.partitions[1];
    assert_eq!(
        p.members.iter().map(|s| (s.membership, s.indx0)).collect::<Vec<_>>(),
        vec![(Membership::Both, true), (Membership::Limited, true), (Membership::Limited, false)]
    );
}

#[test]
fn every_group_flag_and_its_default() {
    let c = parse("p=0x10, ipoib, mtu=4096, rate=100, sl=3, scope=5, Q_Key=0x1234, TClass=7, FlowLabel=0x12345: ALL;");
    let p = &c.partitions[1];
    let want = GroupParams { mtu: 5, rate: 16, sl: 3, scope: 5, q_key: 0x1234, tclass: 7, flow_label: 0x12345 };
    assert_eq!(p.params, want);
    assert_eq!(p.sl_at, Some(at(1, 39)));
    assert_eq!(p.groups[0].mgid, mgid("ff15:401b:8010::ffff:ffff"));
    assert_eq!(p.groups[0].params, want);
    // Nothing written: OpenSM's IPoIB defaults.
    assert_eq!(parse("p=0x10, ipoib: ALL;").partitions[1].params, GroupParams::default());
}

#[test]
fn flag_names_ignore_case_and_underscores_and_take_unambiguous_abbreviations() {
    let c = parse("p=0x10, IPOIB, qkey=0x22, Q_KEY=0x22, tclass=1, FLOWLABEL=2, MTU=1, Def=full, m=1: 0x1;");
    let p = &c.partitions[1];
    assert_eq!((p.ipoib, p.params.q_key, p.params.tclass, p.params.flow_label, p.params.mtu), (true, 0x22, 1, 2, 1));
    assert_eq!(p.members[0].membership, Membership::Full);
    let (pos, problem, _) = err("p=0x10, s=1: ALL;");
    assert_eq!(pos, at(1, 9));
    assert_eq!(problem, Problem::AmbiguousFlag { given: "s".into(), candidates: "scope, sl".into() });
    // indx0 is compared whole, as OpenSM compares it.
    assert_eq!(err("p=0x10, indx: ALL;").1, Problem::UnknownFlag("indx".into()));
    let (pos, problem, msg) = err("p=0x10,\n  mtux=5: ALL;");
    assert_eq!((pos, problem), (at(2, 3), Problem::UnknownFlag("mtux".into())));
    assert_eq!(msg, "partitions.conf:2:3: unknown flag 'mtux'");
}

#[test]
fn several_scopes_make_several_broadcast_groups() {
    let c = parse("p=0x10, ipoib, scope=2, scope=5, scope=2: ALL;");
    let g: Vec<_> = c.partitions[1].groups.iter().map(|g| (g.mgid[1], g.params.scope)).collect();
    assert_eq!(g, vec![(0x12, 2), (0x15, 5)]);
}

#[test]
fn mtu_codes_and_names() {
    for (v, code) in [("1", 1), ("5", 5), ("0x4", 4), ("256", 1), ("512", 2), ("1024", 3), ("2048", 4), ("4096", 5)] {
        let c = parse(&format!("p=0x10, mtu={v}: ALL;"));
        assert_eq!(c.partitions[1].params.mtu, code, "mtu={v}");
    }
    for v in ["0", "6", "4097", "big", "4k"] {
        let (pos, problem, _) = err(&format!("p=0x10, mtu={v}: ALL;"));
        assert_eq!(pos, at(1, 13));
        assert!(matches!(problem, Problem::BadValue { flag: "mtu", .. }), "mtu={v}: {problem}");
    }
}

#[test]
fn rate_codes_and_names() {
    let cases = [
        // Codes, as OpenSM reads them.
        ("2", 2),
        ("3", 3),
        ("7", 7),
        ("10", 10),
        ("14", 14),
        ("20", 20),
        ("22", 22),
        ("24", 24),
        ("0x10", 16),
        // Not codes: Gb/s.
        ("25", 15),
        ("28", 19),
        ("30", 4),
        ("40", 7),
        ("56", 12),
        ("100", 16),
        ("200", 17),
        ("400", 21),
        ("600", 22),
        ("1200", 24),
        // A suffix or a decimal point: always Gb/s.
        ("10g", 3),
        ("10G", 3),
        ("10Gbps", 3),
        ("10gb/s", 3),
        ("20gb", 6),
        ("14g", 11),
        ("5g", 5),
        ("2.5", 2),
        ("2.5g", 2),
        ("100g", 16),
    ];
    for (v, code) in cases {
        let c = parse(&format!("p=0x10, rate={v}: ALL;"));
        assert_eq!(c.partitions[1].params.rate, code, "rate={v}");
    }
    for v in ["0", "1", "26", "2.6", "10.55", "0x10g", "g", "fast", "99999999999999999999999"] {
        let (_, problem, _) = err(&format!("p=0x10, rate={v}: ALL;"));
        assert!(matches!(problem, Problem::BadValue { flag: "rate", .. }), "rate={v}: {problem}");
    }
}

#[test]
fn a_rate_that_is_a_code_and_a_speed_is_read_as_the_code_with_a_warning() {
    let c = parse("p=0x10, rate=10: ALL;\nq=0x11, rate=5: ALL;\nr=0x12, rate=10g: ALL;");
    assert_eq!(c.partitions[1].params.rate, 10);
    assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
    assert_eq!(c.warnings[0].at, at(1, 14));
    assert!(c.warnings[0].message.contains("120 Gb/s") && c.warnings[0].message.contains("rate=10g"));
}

#[test]
fn numeric_flag_ranges() {
    assert_eq!(parse("p=0x10, sl=15: ALL;").partitions[1].params.sl, 15);
    assert_eq!(parse("p=0x10, FlowLabel=0xfffff: ALL;").partitions[1].params.flow_label, 0xfffff);
    assert_eq!(parse("p=0x10, Q_Key=0xffffffff: ALL;").partitions[1].params.q_key, 0xffff_ffff);
    // Q_Key 0 is OpenSM's "not given".
    assert_eq!(parse("p=0x10, Q_Key=0: ALL;").partitions[1].params.q_key, 0x0b1b);
    for bad in
        ["sl=16", "sl=-1", "scope=0", "scope=16", "TClass=256", "FlowLabel=0x100000", "Q_Key=0x100000000", "sl=1x"]
    {
        let (pos, problem, _) = err(&format!("p=0x10, {bad}: ALL;"));
        assert!(matches!(problem, Problem::BadValue { .. }), "{bad}: {problem}");
        assert_eq!(pos.col as usize, 10 + bad.find('=').unwrap(), "{bad}");
    }
    assert_eq!(err("p=0x10, sl: ALL;").1, Problem::MissingValue("sl"));
    assert_eq!(
        err("p=0x10, ipoib=1: ALL;"),
        (at(1, 15), Problem::UnexpectedValue("ipoib"), err("p=0x10, ipoib=1: ALL;").2)
    );
    assert_eq!(err("p=0x10, sl=1, sl=2: ALL;").1, Problem::RepeatedFlag { flag: "sl" });
    assert_eq!(err("p=0x10, defmember=fool: ALL;").1, Problem::BadMembership("fool".into()));
    assert_eq!(parse("p=0x10, sl=1, sl=1: ALL;").partitions[1].params.sl, 1);
}

#[test]
fn pkeys() {
    assert_eq!(parse("p=0x10: ALL;").partitions[1].pkey, 0x10);
    assert_eq!(parse("p=16: ALL;").partitions[1].pkey, 0x10);
    assert_eq!(parse("p=020: ALL;").partitions[1].pkey, 0x10);
    // A definition that starts with a digit is a P_Key without a name.
    let c = parse("0x10, ipoib: ALL;");
    assert_eq!((c.partitions[1].pkey, c.partitions[1].name.as_str()), (0x10, "0010"));
    assert_eq!(parse("=0x10: ALL;").partitions[1].name, "0010");
    // A name may have blanks inside.
    assert_eq!(parse("My  Partition = 0x10: ALL;").partitions[1].name, "My  Partition");
    // The default partition keeps its name.
    let c = parse("Mine=0x7fff: ALL=full;");
    assert_eq!((c.partitions.len(), c.partitions[0].name.as_str()), (1, "Default"));
    assert_eq!(c.warnings.len(), 1);
    assert!(c.notes.is_empty());
    for (bad, why) in [
        ("0", "0 is no"),
        ("0x8000", "low 15 bits, the partition number, are 0"),
        ("0x10000", "16 bits"),
        ("0x18001", "16 bits"),
        ("0x", "not a number"),
        ("09", "not a number"),
        ("abc", "not a number"),
    ] {
        let (pos, problem, msg) = err(&format!("p={bad}: ALL;"));
        assert_eq!(pos, at(1, 3), "{bad}");
        assert!(matches!(problem, Problem::BadPKey { .. }), "{bad}: {problem}");
        assert!(msg.contains(why), "{bad}: {msg}");
    }
    assert_eq!(err("p=: ALL;").0, at(1, 3));
    assert_eq!(err("p=0x10=3: ALL;").0, at(1, 7));
}

#[test]
fn a_pkey_with_bit_15_set_is_its_low_15_bits_with_a_note() {
    let c = parse("p=0x8010: ALL;");
    assert_eq!((c.partitions.len(), c.partitions[1].name.as_str(), c.partitions[1].pkey), (2, "p", 0x10));
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    assert_eq!(c.notes.len(), 1);
    assert_eq!(c.notes[0].at, at(1, 3));
    assert!(c.notes[0].message.contains("P_Key 0x8010 is partition 0x0010"), "{}", c.notes[0]);
    // The full-member key of the default partition is the default
    // partition, with its group keyed 0xffff as ever.
    let c = parse("Default=0xffff, ipoib: ALL=full;");
    assert_eq!(c.partitions.len(), 1);
    let d = &c.partitions[0];
    assert_eq!((d.name.as_str(), d.pkey, d.at), ("Default", 0x7fff, Some(at(1, 1))));
    assert_eq!(d.groups[0].mgid, mgid("ff12:401b:ffff::ffff:ffff"));
    assert_eq!(members(d).last(), Some(&m(PortSpec::All, Membership::Full)));
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    assert_eq!(c.notes.len(), 1);
    // A P_Key without a name, and one without '=': named by the partition.
    assert_eq!(parse("=0x8010: ALL;").partitions[1].name, "0010");
    assert_eq!(parse("0x8010: ALL;").partitions[1].pkey, 0x10);
    // The same spelling twice is no clash: a note for each entry.
    let c = parse("p=0x8010: 0x1;\np=0x8010: 0x2;");
    assert_eq!(c.partitions[1].members.len(), 2);
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);
    assert_eq!(c.notes.iter().map(|n| n.at).collect::<Vec<_>>(), vec![at(1, 3), at(2, 3)]);
}

#[test]
fn a_file_mixing_both_spellings_loads_and_a_clash_after_masking_is_warned() {
    let c = parse(
        "Default=0x7fff, ipoib: ALL=full;\n\
         storage=0x8002: 0x0002c90300a1b2c1=full, 0x0002c90300a1b2c2=limited;\n\
         compute=0x0003: ALL=limited;\n\
         a=0x8005: 0x0002c90300a1b2c1=full;\n\
         a=0x0005, ipoib: 0x0002c90300a1b2c2=both;\n",
    );
    let keys: Vec<_> = c.partitions.iter().map(|p| (p.name.as_str(), p.pkey)).collect();
    assert_eq!(keys, vec![("Default", 0x7fff), ("storage", 0x0002), ("compute", 0x0003), ("a", 0x0005)]);
    assert_eq!(members(&c.partitions[0]).last(), Some(&m(PortSpec::All, Membership::Full)));
    assert_eq!(members(&c.partitions[1]), vec![m(G1, Membership::Full), m(G2, Membership::Limited)]);
    assert_eq!(members(&c.partitions[2]), vec![m(PortSpec::All, Membership::Limited)]);
    // The two spellings of 0x0005 merge as two entries of one P_Key do.
    let a = &c.partitions[3];
    assert_eq!(members(a), vec![m(G1, Membership::Full), m(G2, Membership::Both)]);
    assert_eq!((a.at, a.ipoib), (Some(at(4, 1)), true));
    assert_eq!(a.groups[0].mgid, mgid("ff12:401b:8005::ffff:ffff"));
    // The clash is a warning at the second entry naming both and the
    // partition; a P_Key with bit 15 that clashes with nothing is a note.
    assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
    assert_eq!(c.warnings[0].at, at(5, 3));
    assert_eq!(
        c.warnings[0].to_string(),
        "5:3: entry 'a' writes P_Key 0x0005 and entry 'a' at 4:3 wrote 0x8005: only the low 15 bits count, \
         as in OpenSM, so both are partition 0x0005 and the entries merge under the first one's name"
    );
    assert_eq!(c.notes.iter().map(|n| n.at).collect::<Vec<_>>(), vec![at(2, 9), at(4, 3)]);

    // An entry without a name adds to the partition too, and is named so.
    let c = parse("a=0x0005: 0x1;\n=0x8005: 0x2;");
    assert_eq!(c.partitions[1].members.len(), 2);
    assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
    assert!(
        c.warnings[0]
            .message
            .starts_with("an entry without a name writes P_Key 0x8005 and entry 'a' at 1:3 wrote 0x0005"),
        "{}",
        c.warnings[0]
    );
    // The default partition written both ways.
    let c = parse("Default=0xffff: ALL=full;\nDefault=0x7fff: SELF=full;");
    assert_eq!((c.partitions.len(), c.warnings.len()), (1, 1));
    assert!(c.warnings[0].message.contains("both are partition 0x7fff"), "{}", c.warnings[0]);
}

#[test]
fn two_names_for_one_partition_merge_only_when_written_otherwise() {
    // 0x8005 and 0x0005 are partition 5 to OpenSM, which merges the second
    // entry into the first under its name: the file loads, with a warning
    // naming both entries and both spellings.
    let c = parse("a=0x8005: 0x1=full;\nb=0x0005: 0x2;");
    let keys: Vec<_> = c.partitions.iter().map(|p| (p.name.as_str(), p.pkey)).collect();
    assert_eq!(keys, vec![("Default", 0x7fff), ("a", 5)]);
    let a = &c.partitions[1];
    assert_eq!(a.members.len(), 2, "{:?}", a.members);
    assert_eq!(c.warnings.len(), 1, "{:?}", c.warnings);
    assert_eq!(c.warnings[0].at, at(2, 3));
    let w = &c.warnings[0].message;
    assert!(w.contains("entry 'b'") && w.contains("entry 'a' at 1:3") && w.contains("0x8005"), "{w}");
    assert!(w.contains("partition 0x0005") && w.contains("first one's name"), "{w}");
    // Written alike, two names for one P_Key are refused: most likely a
    // copied line. The message shows the spellings.
    let (pos, problem, msg) = err("a=0x8005: 0x1;\nb=0x8005: 0x2;");
    assert_eq!(pos, at(2, 1));
    assert_eq!(
        problem,
        Problem::PKeyNamedTwice {
            pkey: 5,
            written: 0x8005,
            first: "a".into(),
            first_written: Some(0x8005),
            first_at: at(1, 1)
        }
    );
    assert!(msg.contains("P_Key 0x0005 (written 0x8005 here and 0x8005 there; "), "{msg}");
    let (_, _, msg) = err("a=0x0005: 0x1;\nb=0x0005: 0x2;");
    assert!(msg.contains("is already partition 'a' (at 1:1)"), "{msg}");
    // A partition first named without its P_Key has no spelling to differ
    // from: a second name is refused.
    let (pos, problem, _) = err("Default: ALL=full;\nother=0xffff: 0x1;");
    assert_eq!(pos, at(2, 1));
    assert!(
        matches!(problem, Problem::PKeyNamedTwice { pkey: 0x7fff, written: 0xffff, first_written: None, .. }),
        "{problem:?}"
    );
}

#[test]
fn generated_pkeys_follow_opensm() {
    let c = parse("a: ALL;\nb: ALL;\nc=0x3: ALL;\nd: ALL;\na: SELF;\nDefault: ALL=full;");
    let keys: Vec<_> = c.partitions.iter().map(|p| (p.name.as_str(), p.pkey, p.pkey_generated)).collect();
    assert_eq!(keys, vec![("Default", 0x7fff, false), ("a", 1, true), ("b", 2, true), ("c", 3, false), ("d", 4, true)]);
    // 'a' without a P_Key extends the partition named 'a'; 'Default'
    // the default one.
    assert_eq!(c.partitions[1].members.len(), 2);
    assert_eq!(members(&c.partitions[0]).last(), Some(&m(PortSpec::All, Membership::Full)));
    // Naming a generated P_Key later would merge unrelated partitions.
    let (pos, problem, _) = err("a: ALL;\nb=0x1: ALL;");
    assert_eq!(pos, at(2, 3));
    assert_eq!(problem, Problem::GeneratedPKeyTaken { pkey: 1, written: 1, name: "a".into(), generated_at: at(1, 1) });
    // Bit 15 does not hide that it is the generated one.
    let (pos, problem, msg) = err("a: ALL;\nb=0x8001: ALL;");
    assert_eq!(pos, at(2, 3));
    assert_eq!(
        problem,
        Problem::GeneratedPKeyTaken { pkey: 1, written: 0x8001, name: "a".into(), generated_at: at(1, 1) }
    );
    assert!(msg.contains("P_Key 0x0001 (written 0x8001 here; only the low 15 bits name the partition)"), "{msg}");
    // A name two partitions have is ambiguous.
    assert!(matches!(err("a=0x1: ALL;\na=0x2: ALL;\na: SELF;").1, Problem::AmbiguousName { .. }));
}

#[test]
fn repeated_pkeys_merge_and_conflicting_parameters_are_refused() {
    let c = parse("a=0x10, mtu=5: 0x1;\n=0x10, ipoib, rate=7: 0x2;\na=0x10, mtu=4096: 0x3;");
    assert_eq!(c.partitions.len(), 2);
    let p = &c.partitions[1];
    assert_eq!((p.name.as_str(), p.ipoib, p.params.mtu, p.params.rate, p.members.len()), ("a", true, 5, 7, 3));
    assert!(c.warnings.is_empty());
    // A second name for one P_Key is refused (a copied line whose P_Key
    // was not changed), where OpenSM would merge them.
    let (pos, problem, _) = err("a=0x10: 0x1;\nb=0x10: 0x2;");
    assert_eq!(pos, at(2, 1));
    assert_eq!(
        problem,
        Problem::PKeyNamedTwice {
            pkey: 0x10,
            written: 0x10,
            first: "a".into(),
            first_written: Some(0x10),
            first_at: at(1, 1)
        }
    );
    let (pos, problem, msg) = err("a=0x10, mtu=5: 0x1;\na=0x10, mtu=4: 0x3;");
    assert_eq!(pos, at(2, 13));
    assert_eq!(
        problem,
        Problem::ConflictingParam {
            pkey: 0x10,
            param: "mtu",
            ours: "code 4".into(),
            theirs: "code 5".into(),
            first: at(1, 13)
        }
    );
    assert_eq!(msg, "partitions.conf:2:13: partition 0x0010: mtu is code 4 here but code 5 at 1:13");
    assert!(matches!(
        err("a=0x10, Q_Key=1: ALL;\na=0x10, Q_Key=2: ALL;").1,
        Problem::ConflictingParam { param: "Q_Key", .. }
    ));
}

#[test]
fn layout_comments_and_line_breaks() {
    let c = parse(
        "  # leading comment\r\n\
         p = 0x10 ,\r\n  ipoib ,  mtu = 5   # flags on two lines\r\n\
         :\r\n  0x1 = full\r\n  0x2\r\n  , 0x3 , , ;  ;\r\n\
         q=0x11:0x4;r=0x12:0x5;\n",
    );
    let names: Vec<_> = c.partitions.iter().map(|p| p.pkey).collect();
    assert_eq!(names, vec![0x7fff, 0x10, 0x11, 0x12]);
    assert_eq!(c.partitions[1].members.len(), 3);
    assert_eq!(c.partitions[1].members[1].at, Some(at(6, 3)));
    assert_eq!(c.partitions[1].params.mtu, 5);
}

#[test]
fn mgid_items() {
    // Scope written on the line overwrites the nibble; with none the
    // MGID keeps its own; the partition's scope is inherited.
    let c = parse("p=0x10:\n mgid=ff15::1\n mgid=ff12::2, scope=8, scope=14\n mgid=ff10::3\n ALL;");
    let g: Vec<_> = c.partitions[1].groups.iter().map(|g| (g.mgid, g.params.scope, g.params.q_key)).collect();
    assert_eq!(
        g,
        vec![(mgid("ff15::1"), 5, 0), (mgid("ff18::2"), 8, 0), (mgid("ff1e::2"), 14, 0), (mgid("ff12::3"), 2, 0)]
    );
    let c = parse("p=0x10, scope=5, TClass=3, Q_Key=0x99:\n mgid=ff12::1 ;");
    let g = &c.partitions[1].groups[0];
    assert_eq!((g.mgid, g.params.scope, g.params.tclass, g.params.q_key), (mgid("ff15::1"), 5, 3, 0x99));
    // The ports go on another line: a port on the mgid line is an error.
    let (pos, problem, _) = err("p=0x10: mgid=ff12::1, ALL=full;");
    assert_eq!(pos, at(1, 23));
    assert!(matches!(problem, Problem::Expected { .. }), "{problem}");
    assert!(problem.to_string().contains("another line"));
    assert_eq!(err("p=0x10: mgid=ff12::1, ipoib;").1, Problem::NotAGroupFlag("ipoib".into()));
    assert_eq!(err("p=0x10: mgid=ff12::1, sl;").1, Problem::MissingValue("sl"));
    assert_eq!(err("p=0x10: mgid=ff12::1 sl=1;").0, at(1, 22));
    assert_eq!(err("p=0x10: mgid= ;").0, at(1, 15));
    let (pos, problem, _) = err("p=0x10: mgid=fe80::1;");
    assert_eq!(
        (pos, problem),
        (
            at(1, 14),
            Problem::BadMgid { value: "fe80::1".into(), why: "not a multicast GID (the first byte must be 0xff)" }
        )
    );
    assert!(matches!(err("p=0x10: mgid=ff12:zz::1;").1, Problem::BadMgid { .. }));
    assert!(matches!(err("p=0x10: mgid=ff12::1::2;").1, Problem::BadMgid { .. }));
}

#[test]
fn ip_groups_are_checked_against_their_partition() {
    assert_eq!(
        parse("p=0x10, ipoib:\n mgid=ff12:401b:8010::1\n;").partitions[1].groups[1].mgid,
        mgid("ff12:401b:8010::1")
    );
    // The broadcast template takes the partition's P_Key.
    let c = parse("p=0x10:\n mgid=ff12:401b:ffff::ffff:ffff\n;");
    assert_eq!(c.partitions[1].groups[0].mgid, mgid("ff12:401b:8010::ffff:ffff"));
    let (pos, problem, _) = err("p=0x10:\n mgid=ff12:401b:8011::1\n;");
    assert_eq!(pos, at(2, 2));
    assert!(matches!(problem, Problem::IpGroup { pkey: 0x10, .. }));
    let (pos, problem, _) = err("p=0x10, mtu=5:\n mgid=ff12:601b::1, mtu=4\n;");
    assert_eq!(pos, at(2, 25));
    assert!(matches!(problem, Problem::IpGroup { .. }), "{problem}");
    assert!(matches!(err("p=0x10:\n mgid=ff12:401b::1, rate=7\n;").1, Problem::IpGroup { .. }));
    // Not an IP group: no such checks.
    assert_eq!(parse("p=0x10:\n mgid=ff12:1234:8011::1, rate=7\n;").partitions[1].groups[0].params.rate, 7);
}

#[test]
fn duplicate_groups() {
    // The broadcast group written out again with the same parameters is
    // one group.
    let c = parse("p=0x10, ipoib:\n mgid=ff12:401b::ffff:ffff\n;");
    assert_eq!(c.partitions[1].groups.len(), 1);
    let (pos, problem, _) = err("p=0x10, ipoib:\n mgid=ff12:401b::ffff:ffff, sl=2\n;");
    assert_eq!(pos, at(2, 2));
    assert!(matches!(problem, Problem::DuplicateGroup { what: "other parameters", .. }), "{problem}");
    let (pos, problem, _) = err("p=0x10: mgid=ff12::9;\nq=0x11: mgid=ff12::9;");
    assert_eq!(pos, at(2, 9));
    assert!(matches!(problem, Problem::DuplicateGroup { what: "another P_Key", .. }), "{problem}");
}

#[test]
fn syntax_errors_name_line_and_column() {
    let cases: &[(&str, Pos)] = &[
        // Missing ';' at the end of the file.
        ("p=0x10: ALL", at(1, 12)),
        ("p=0x10: ALL\n", at(2, 1)),
        ("p=0x10: mgid=ff12::1\n", at(2, 1)),
        ("p=0x10", at(1, 7)),
        // ';' before ':'.
        ("p=0x10, ipoib;", at(1, 14)),
        // A missing ';' between entries.
        ("p=0x10: ALL\nq=0x11: ALL;", at(2, 7)),
        ("p=0x10: ALL\nstorage=0x0010, ipoib, defmember=full : 0x1;", at(2, 39)),
        ("p=0x10: 0x1 0x2;", at(1, 13)),
        ("p=0x10: =full;", at(1, 9)),
        ("p=0x10: 0x1=;", at(1, 13)),
        ("p=0x10: 0x1=fool;", at(1, 13)),
        ("p=0x10: 0x0;", at(1, 9)),
        ("p=0x10: 0x1g;", at(1, 9)),
        ("p=0x10: 0x10000000000000000;", at(1, 9)),
        ("p=0x10: bogus;", at(1, 9)),
        ("p q\nr=0x10: ALL;", at(2, 1)),
        ("p=0x10 0x11: ALL;", at(1, 8)),
        ("p=0x10, =1: ALL;", at(1, 9)),
        ("p=0x10, mtu 5: ALL;", at(1, 9)),
        ("p=0x10, mtu=: ALL;", at(1, 13)),
    ];
    for &(text, pos) in cases {
        let (got, problem, msg) = err(text);
        assert_eq!(got, pos, "{text:?}: {msg}");
        assert!(msg.starts_with(&format!("partitions.conf:{}:{}: ", pos.line, pos.col)), "{msg}");
        let _ = problem;
    }
    assert_eq!(
        err("p=0x10: ALL").1,
        Problem::UnexpectedEof { expected: "';' at the end of the entry", start: at(1, 1) }
    );
    assert_eq!(err("p=0x10, ipoib;").1, Problem::NoColon { start: at(1, 1) });
    assert_eq!(err("p=0x10: ALL\nq=0x11: ALL;").1, Problem::ColonInMembers { start: at(1, 1) });
}

#[test]
fn columns_count_characters() {
    let (pos, _, _) = err("é=0x10: bogus;");
    assert_eq!(pos, at(1, 9));
    assert_eq!(parse("é=0x10: ALL;").partitions[1].name, "é");
}

#[test]
fn bytes_that_are_not_utf8() {
    let e = PartitionConf::parse_bytes(b"p=0x10: ALL;\nq\xff", Path::new("x.conf")).unwrap_err();
    assert_eq!((e.at(), e.problem()), (Some(at(2, 2)), Some(&Problem::NotUtf8)));
    assert_eq!(e.to_string(), "x.conf:2:2: the file is not UTF-8 text");
}

#[test]
fn read_names_the_path() {
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("nope.conf");
    let e = PartitionConf::read(&missing).unwrap_err();
    assert!(matches!(e, PartitionConfError::Io { .. }));
    assert!(e.to_string().starts_with(&missing.display().to_string()), "{e}");
    let file = dir.path().join("partitions.conf");
    std::fs::write(&file, "p=0x10: ALL;\nq=0x11: bad;\n").unwrap();
    let e = PartitionConf::read(&file).unwrap_err();
    assert_eq!(e.to_string(), format!("{}:2:9: bad port GUID 'bad': want a port GUID (0x...) or ALL, ALL_CAS, ALL_SWITCHES, ALL_ROUTERS, SELF, NONE", file.display()));
    std::fs::write(&file, "p=0x10: ALL;\n").unwrap();
    let c = PartitionConf::read(&file).unwrap();
    assert_eq!((c.path.as_deref(), c.partitions.len()), (Some(file.as_path()), 2));
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures/partitions").join(name)
}

#[test]
fn fixture_files() {
    let c = PartitionConf::read(&fixture("opensm-man-example.conf")).unwrap_or_else(|e| panic!("{e}"));
    let keys: Vec<_> = c.partitions.iter().map(|p| p.pkey).collect();
    assert_eq!(keys, vec![0x7fff, 0x0001, 0x300, 0x80]);
    assert_eq!(c.partitions[0].groups.len(), 6);

    let c = PartitionConf::read(&fixture("named-values.conf")).unwrap_or_else(|e| panic!("{e}"));
    let d = &c.partitions[0];
    assert_eq!((d.params.mtu, d.params.rate), (5, 16));
    let s = &c.partitions[1];
    assert_eq!((s.params.mtu, s.params.rate, s.members.len()), (4, 2, 3));
    let k = &c.partitions[2];
    assert_eq!((k.pkey, k.members[0].indx0, k.groups.len()), (0x20, true, 0));
    assert!(c.warnings.is_empty(), "{:?}", c.warnings);

    let path = fixture("missing-semicolon.conf");
    let e = PartitionConf::read(&path).unwrap_err();
    assert_eq!(e.at(), Some(at(3, 23)));
    assert_eq!(e.problem(), Some(&Problem::ColonInMembers { start: at(2, 1) }));
    assert!(e.to_string().starts_with(&format!("{}:3:23: ", path.display())), "{e}");
}

#[test]
fn broadcast_mgid_layout() {
    assert_eq!(
        ipoib_broadcast_mgid(0x7fff, 2),
        [0xff, 0x12, 0x40, 0x1b, 0xff, 0xff, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]
    );
    assert_eq!(
        ipoib_broadcast_mgid(0x0123, 5),
        [0xff, 0x15, 0x40, 0x1b, 0x81, 0x23, 0, 0, 0, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]
    );
}

mod never_panics {
    use super::*;
    use proptest::prelude::*;

    fn check(text: &str) {
        match PartitionConf::parse(text, Path::new("f")) {
            Ok(c) => {
                assert_eq!(c.partitions[0].pkey, DEFAULT_PARTITION);
                for p in &c.partitions {
                    assert!(p.pkey != 0 && p.pkey <= DEFAULT_PARTITION);
                    for g in &p.groups {
                        assert_eq!(g.mgid[0], 0xff);
                        assert_eq!(g.mgid[1] & 0x0f, g.params.scope);
                    }
                }
            }
            Err(e) => {
                // The position is inside the text (or just past it).
                let at = e.at().expect("parse errors have a position");
                let lines = text.split('\n').count() as u32;
                assert!(at.line >= 1 && at.line <= lines && at.col >= 1, "{e} for {text:?}");
                let line = text.split('\n').nth(at.line as usize - 1).unwrap_or("");
                assert!(at.col as usize <= line.chars().count() + 1, "{e} for {text:?}");
            }
        }
    }

    fn soup() -> impl Strategy<Value = String> {
        let piece = prop_oneof![
            Just("=".to_string()),
            Just(",".to_string()),
            Just(":".to_string()),
            Just(";".to_string()),
            Just("\n".to_string()),
            Just(" ".to_string()),
            Just("#c".to_string()),
            Just("mgid".to_string()),
            Just("ff12:401b::1".to_string()),
            Just("ff12:401b:ffff::ffff:ffff".to_string()),
            Just("ALL".to_string()),
            Just("SELF".to_string()),
            Just("full".to_string()),
            Just("ipoib".to_string()),
            Just("scope".to_string()),
            Just("mtu".to_string()),
            Just("rate".to_string()),
            Just("Q_Key".to_string()),
            Just("defmember".to_string()),
            Just("0x7fff".to_string()),
            Just("0x10".to_string()),
            "[0-9a-fx]{1,6}",
            "[A-Za-z_]{1,6}",
        ];
        prop::collection::vec(piece, 0..40).prop_map(|v| v.concat())
    }

    proptest! {
        #[test]
        fn on_any_string(text in any::<String>()) {
            check(&text);
        }

        #[test]
        fn on_any_bytes(bytes in prop::collection::vec(any::<u8>(), 0..200)) {
            let _ = PartitionConf::parse_bytes(&bytes, Path::new("f"));
        }

        #[test]
        fn on_token_soup(text in soup()) {
            check(&text);
        }
    }
}
