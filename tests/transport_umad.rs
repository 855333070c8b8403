//! The libibumad backend and the transport on ibsim (through libumad2sim).
//!
//! Each test starts its own ibsim and runs `ibsm probe` as a child process
//! under LD_PRELOAD (see transport_support/ibsim.rs).

#[path = "transport_support/ibsim.rs"]
mod ibsim;

use ibsim::{net, stderr, stdout, Ibsim};
use serde_json::Value;

fn json(o: &std::process::Output) -> Value {
    assert!(o.status.success(), "ibsm failed: {}\n{}", stdout(o), stderr(o));
    serde_json::from_slice(&o.stdout).unwrap_or_else(|e| panic!("not JSON ({e}): {}", stdout(o)))
}

fn field<'a>(v: &'a Value, name: &str) -> &'a Value {
    v["fields"].as_array().unwrap().iter().find(|f| f["name"] == name).map(|f| &f["value"]).unwrap()
}

/// Send N DR Gets at each window size and count what comes back. ibsim
/// answers from one thread, so this measures how deep a queue umad2sim and
/// ibsim's sockets take without loss. Printed figures go into the report.
#[test]
fn window_sweep_on_ibsim() {
    let sim = Ibsim::start(&net("net"));
    const N: u32 = 500;
    let mut figures = Vec::new();
    for w in [1usize, 4, 8, 16, 32, 64] {
        let o = sim.ibsm(
            None,
            &[
                "probe",
                "--json",
                "--stats",
                "--path",
                "0,3",
                "--repeat",
                &N.to_string(),
                "--window",
                &w.to_string(),
                "nodeinfo",
            ],
        );
        let v = json(&o);
        let ok = v["ok"].as_u64().unwrap();
        let timeouts = v["timeouts"].as_u64().unwrap();
        let ms = v["elapsed_ms"].as_f64().unwrap();
        let stats = &v["stats"]["txn"];
        let c = &stats["by_mad"].as_array().unwrap()[0];
        let sent = c["sent"].as_u64().unwrap();
        let retries = c["retries"].as_u64().unwrap();
        figures.push(format!(
            "window {w:>2}: {ok}/{N} answered, {timeouts} timed out, {retries} retries, {sent} sent, {ms:.1} ms ({:.0} Gets/s), max rtt {:.2} ms",
            f64::from(N) / (ms / 1e3),
            stats["rtt_max"]["secs"].as_f64().unwrap() * 1e3 + stats["rtt_max"]["nanos"].as_f64().unwrap() / 1e6
        ));
        assert_eq!(ok, u64::from(N), "window {w}: {}", figures.last().unwrap());
        assert_eq!(sent, u64::from(N) + retries);
        // The transaction layer never lets more than the window out.
        assert_eq!(stats["in_flight"], 0);
    }
    eprintln!("ibsim window sweep (DR SubnGet NodeInfo to 0,3, {N} each):\n{}", figures.join("\n"));
}

/// The stats keys are (class, attribute, method): a DR NodeInfo Get.
#[test]
fn stats_are_keyed_by_class_attribute_and_method() {
    let sim = Ibsim::start(&net("net.1"));
    let v = json(&sim.ibsm(None, &["probe", "--json", "--stats", "--repeat", "3", "--path", "0,1", "portinfo", "1"]));
    let by = v["stats"]["txn"]["by_mad"].as_array().unwrap();
    assert_eq!(by.len(), 1);
    assert_eq!((&by[0]["class"], &by[0]["attribute"], &by[0]["method"]), (&0x81.into(), &0x15.into(), &1.into()));
    assert_eq!(by[0]["name"], "SubnMgmtDirected Get PortInfo");
    assert_eq!((&by[0]["sent"], &by[0]["responses"]), (&3.into(), &3.into()));
    assert_eq!(field(&v, "LocalPort"), 1);
}

/// umad_size() is 64 once the port is open (the P_Key ABI), not the 56 of
/// an unopened libibumad; the device logs what it found.
#[test]
fn umad_size_is_read_after_open() {
    let sim = Ibsim::start(&net("net"));
    let mut c = sim.client(std::path::Path::new(env!("CARGO_BIN_EXE_ibsm")), None);
    c.env("IBSM_LOG", "info").args(["probe", "nodeinfo"]);
    let o = ibsim::run_with_timeout(c, std::time::Duration::from_secs(30));
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(stderr(&o).contains("umad_size=64"), "{}", stderr(&o));
}

/// A path that leads nowhere times out after 1 + retries attempts, and the
/// error names the attribute, the path and the attempts.
#[test]
fn dead_path_times_out_with_a_useful_error() {
    let sim = Ibsim::start(&net("net"));
    let o = sim.ibsm(None, &["probe", "--timeout-ms", "50", "--retries", "2", "--path", "0,3,1", "nodeinfo"]);
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.contains("no response after 3 attempts"), "{e}");
    assert!(e.contains("0,3,1") && e.contains("NodeInfo"), "{e}");
}

/// Port selection by GUID and by CA name + port on ibsim's single port.
#[test]
fn port_selection_by_guid_and_name() {
    let sim = Ibsim::start(&net("net"));
    // Switch1's port 0 GUID in this net is its node GUID.
    let v = json(&sim.ibsm(None, &["probe", "--json", "--guid", "0x200000", "nodeinfo"]));
    assert_eq!(field(&v, "Guid"), "0x0000000000200000");
    let v = json(&sim.ibsm(None, &["probe", "--json", "--ca", "ibsim0", "--port", "0", "nodeinfo"]));
    assert_eq!(field(&v, "NodeType"), 2);
    let o = sim.ibsm(None, &["probe", "--guid", "0x1234", "nodeinfo"]);
    assert!(!o.status.success());
    assert!(stderr(&o).contains("port GUID 0x0000000000001234"), "{}", stderr(&o));
    let o = sim.ibsm(None, &["probe", "--ca", "mlx5_9", "nodeinfo"]);
    assert!(stderr(&o).contains("no CA named mlx5_9"), "{}", stderr(&o));
}

/// Holding the issm device sets CapabilityMask.IsSM on ibsim (umad2sim
/// interposes libc `open` of /dev/infiniband/issmN); closing clears it.
/// smpquery, a separate client, is the observer.
#[test]
fn issm_device_sets_and_clears_is_sm() {
    let sim = Ibsim::start(&net("net"));
    let capmask = || {
        let o = sim.smpquery(None, &["-D", "portinfo", "0"]);
        assert!(o.status.success(), "{}", stderr(&o));
        let f = ibsim::fields(&stdout(&o));
        let v = &f.iter().find(|(n, _)| n == "CapMask").unwrap().1;
        u32::from_str_radix(v.trim_start_matches("0x"), 16).unwrap()
    };
    const IS_SM: u32 = 1 << 1;
    assert_eq!(capmask() & IS_SM, 0, "no SM yet");
    let mut c = sim.client(std::path::Path::new(env!("CARGO_BIN_EXE_ibsm")), None);
    c.args(["probe", "--is-sm", "--hold-ms", "4000", "--json", "portinfo"]).stdout(std::process::Stdio::piped());
    let mut child = c.spawn().unwrap();
    // The probe prints once IsSM is held and the Get is answered; its own
    // view of the port already shows the bit.
    let mut out = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut text = String::new();
    while !text.contains("\"CapMask\"") {
        let mut line = String::new();
        assert!(std::io::BufRead::read_line(&mut out, &mut line).unwrap() > 0, "probe ended early: {text}");
        text.push_str(&line);
    }
    let held = capmask();
    let status = child.wait().unwrap();
    assert!(status.success());
    assert_ne!(held & IS_SM, 0, "IsSM while the issm device is open: {held:#x}");
    assert_eq!(capmask() & IS_SM, 0, "IsSM cleared when the SM went away");
}

/// Asking for the umad backend without the library names the library.
#[test]
fn missing_library_is_named() {
    let o = ibsim::run_with_timeout(
        {
            let mut c = std::process::Command::new(env!("CARGO_BIN_EXE_ibsm"));
            c.env("IBSM_LIBIBUMAD", "libibumad-not-here.so.3").args(["probe", "nodeinfo"]);
            c
        },
        std::time::Duration::from_secs(30),
    );
    assert!(!o.status.success());
    let e = stderr(&o);
    assert!(e.contains("libibumad-not-here.so.3") && e.contains("could not be loaded"), "{e}");
}
