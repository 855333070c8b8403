//! The topology reader on arbitrary bytes: errors, never panics; anything it
//! accepts and validates must survive a write and a re-read.
#![no_main]

use std::path::Path;

use ibsm::topology::{netfile, writer};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    // Includes would read real files: the fuzzer gets none.
    let mut no_files = |p: &Path| Err(std::io::Error::new(std::io::ErrorKind::NotFound, p.display().to_string()));
    let Ok(parsed) = netfile::parse_net_with(data, Path::new("fuzz.net"), &mut no_files) else {
        return;
    };
    let topo = parsed.topology;
    if topo.validate().is_err() {
        return;
    }
    if let Ok(text) = writer::to_net_string(&topo) {
        let back = netfile::parse_net_with(text.as_bytes(), Path::new("again.net"), &mut no_files)
            .expect("our own output reads back");
        assert_eq!(back.topology.nodes.len(), topo.nodes.len());
        assert_eq!(back.topology.links.len(), topo.links.len());
    }
});
