//! The partitions in force: `partitions.conf` read at startup and again on
//! every heavy sweep (SIGHUP asks for one), resolved against the ports the
//! sweep found ([`crate::partition::policy`]).
//!
//! A file that fails to parse is reported with its file, line and column
//! and changes nothing: the partitions already in force stay. At startup,
//! with nothing in force yet, [`PartitionSource::load`] fails instead, and
//! the SM does not start on partitions the operator did not write. A file
//! that parses but would leave some port without partitions it must hold
//! (a P_Key table too small) is refused the same way when a good file is
//! in force. No file configured, or none at the path at startup: OpenSM's
//! no-file default, every port a full member of the default partition
//! with its IPoIB broadcast group. A file that disappears after it was
//! read keeps its partitions in force (OpenSM would drop them all).

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;

use tracing::{error, info, warn};

use crate::mad::NodeType;
use crate::partition::conf::{PartitionConf, PartitionConfError};
use crate::partition::policy::{resolve, PolicyIssue, PolicyOptions, PolicyPort};
use crate::partition::PartitionSet;
use crate::subnet::Subnet;
use crate::topology::NodeKind;
use crate::types::Guid;

/// Where the partitions come from, and the ones in force.
#[derive(Debug)]
pub struct PartitionSource {
    path: Option<PathBuf>,
    options: PolicyOptions,
    in_force: PartitionConf,
    /// The text of the last file refused, so one bad file is reported once
    /// per change, not once per sweep.
    refused: Option<Vec<u8>>,
    /// The text in force, to notice when the file changes.
    text: Option<Vec<u8>>,
    /// The last groups-too-big report, said again only when it changes.
    mtu_report: Vec<String>,
}

impl PartitionSource {
    /// No file yet: the no-file default is in force until [`Self::load`].
    pub fn new(path: Option<PathBuf>, options: PolicyOptions) -> Self {
        PartitionSource {
            path,
            options,
            in_force: PartitionConf::default_no_file(),
            refused: None,
            text: None,
            mtu_report: Vec::new(),
        }
    }

    /// Reads the file at startup. An error (unreadable, or a syntax error
    /// at file:line:column) is returned: nothing is in force to keep.
    pub fn load(&mut self) -> Result<(), PartitionConfError> {
        match self.read()? {
            Some((conf, text)) => {
                log_loaded(&conf);
                self.in_force = conf;
                self.text = Some(text);
            }
            None => {
                if let Some(path) = &self.path {
                    // Named but absent: OpenSM's no-file default, as it
                    // does, but said loudly: the operator asked for a file.
                    warn!(
                        path = %path.display(),
                        "partitions file not found: every port is a full member of the default partition until it appears"
                    );
                }
                self.in_force = PartitionConf::default_no_file();
            }
        }
        Ok(())
    }

    /// The file as it is now: `None` when no file is configured or none is
    /// at the path.
    fn read(&self) -> Result<Option<(PartitionConf, Vec<u8>)>, PartitionConfError> {
        let Some(path) = &self.path else { return Ok(None) };
        let text = match std::fs::read(path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(source) => return Err(PartitionConfError::Io { path: path.clone(), source }),
        };
        let conf = PartitionConf::parse_bytes(&text, path)?;
        Ok(Some((conf, text)))
    }

    /// The partitions for this sweep's ports: the file re-read (a good new
    /// file takes over, a bad one is reported and the one in force stays),
    /// then resolved.
    pub fn resolve(&mut self, subnet: &Subnet) -> Arc<PartitionSet> {
        let ports = policy_ports(subnet);
        let candidate = match self.read() {
            Ok(Some((conf, text))) if self.text.as_ref() != Some(&text) => Some((conf, Some(text))),
            Ok(Some(_)) => None,
            Ok(None) if self.text.is_some() => {
                // Gone after it was read (a rewrite that is not atomic, a
                // share away): dropping every partition would open them
                // all, so the ones in force stay. A file with only the
                // Default line is how partitions are removed.
                if self.refused.as_deref() != Some(&[][..]) {
                    warn!(path = ?self.path, "partitions file gone; the partitions in force stay");
                }
                self.refused = Some(Vec::new());
                None
            }
            Ok(None) => None,
            Err(e) => {
                let text = self.path.as_ref().and_then(|p| std::fs::read(p).ok());
                if self.refused != text || text.is_none() {
                    error!(error = %e, "partitions file refused; the partitions in force stay");
                }
                self.refused = text;
                None
            }
        };
        if let Some((conf, text)) = candidate {
            let (set, issues) = resolve(&conf, &ports, &self.options);
            if issues.iter().any(PolicyIssue::is_error) && self.text.is_some() {
                if self.refused != text {
                    for i in issues.iter().filter(|i| i.is_error()) {
                        error!(problem = %i.message(conf.path.as_deref()), "partitions file refused; the partitions in force stay");
                    }
                }
                self.refused = text;
            } else {
                log_loaded(&conf);
                log_issues(&conf, &issues);
                self.in_force = conf;
                self.text = text;
                self.refused = None;
                self.check_group_mtus(&set, subnet);
                return Arc::new(set);
            }
        }
        let (set, issues) = resolve(&self.in_force, &ports, &self.options);
        self.check_group_mtus(&set, subnet);
        // Warnings about the file in force were logged when it came in;
        // errors (a port whose table is too small) concern ports, each sweep.
        for i in issues.iter().filter(|i| i.is_error()) {
            warn!(problem = %i.message(self.in_force.path.as_deref()), "partitions");
        }
        Arc::new(set)
    }
}

impl PartitionSource {
    /// Warns of partition groups whose MTU some of their members' links
    /// cannot carry: those ports' joins will be refused (IPoIB cannot come
    /// up there). Said when the finding changes, not every sweep.
    fn check_group_mtus(&mut self, set: &PartitionSet, subnet: &Subnet) {
        let mut link_mtu: HashMap<Guid, u8> = HashMap::new();
        for (id, port) in subnet.lid_ports() {
            let node = subnet.node(id);
            // A switch's port 0 joins over no link of its own.
            let at = if node.is_switch() { None } else { Some(port) };
            if let Some(pi) = at.and_then(|p| node.ports.get(p as usize)).and_then(|s| s.info.as_ref()) {
                link_mtu.insert(node.port_guid(port), crate::mad::port_info::mtu::carried(pi));
            }
        }
        let mut report = Vec::new();
        for g in &set.groups {
            let partition = g.pkey & crate::partition::PARTITION_MASK;
            let short: Vec<Guid> = set
                .ports
                .iter()
                .filter(|(_, p)| p.membership(partition).is_some())
                .filter(|(guid, _)| link_mtu.get(guid).is_some_and(|&m| m < g.params.mtu))
                .map(|(&guid, _)| guid)
                .collect();
            if !short.is_empty() {
                let mut sample: Vec<String> = short.iter().take(3).map(|g| g.to_string()).collect();
                sample.sort();
                report.push(format!(
                    "group {} of partition {partition:#06x} has MTU code {}, above the link MTU of {} member port(s) (e.g. {}): their joins will be refused",
                    std::net::Ipv6Addr::from(g.mgid),
                    g.params.mtu,
                    short.len(),
                    sample.join(", ")
                ));
            }
        }
        if report != self.mtu_report {
            for r in &report {
                warn!(problem = %r, "partitions");
            }
            self.mtu_report = report;
        }
    }
}

fn log_loaded(conf: &PartitionConf) {
    info!(
        path = ?conf.path,
        partitions = conf.partitions.len(),
        groups = conf.partitions.iter().map(|p| p.groups.len()).sum::<usize>(),
        "partitions file in force"
    );
    for w in &conf.warnings {
        warn!(warning = %w, path = ?conf.path, "partitions file");
    }
    for n in &conf.notes {
        info!(note = %n, path = ?conf.path, "partitions file");
    }
}

fn log_issues(conf: &PartitionConf, issues: &[PolicyIssue]) {
    for i in issues {
        warn!(problem = %i.message(conf.path.as_deref()), "partitions");
    }
}

/// The ports partitions apply to: every CA and router port with PortInfo,
/// and switch port 0.
pub fn policy_ports(subnet: &Subnet) -> Vec<PolicyPort> {
    let mut out = Vec::new();
    for (id, port) in subnet.lid_ports() {
        let node = subnet.node(id);
        if node.quarantined.is_some() {
            continue;
        }
        let kind = match node.info.node_type {
            NodeType::Switch => NodeKind::Switch,
            NodeType::Router => NodeKind::Router,
            _ => NodeKind::Ca,
        };
        out.push(PolicyPort {
            port_guid: node.port_guid(port),
            node_guid: node.guid(),
            kind,
            is_sm_port: subnet.sm_port == Some((id, port)),
            pkey_cap: node.info.partition_cap,
        });
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn source_with(text: &str) -> (tempfile::TempDir, PathBuf, PartitionSource) {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("partitions.conf");
        std::fs::write(&path, text).unwrap();
        let src = PartitionSource::new(Some(path.clone()), PolicyOptions::default());
        (dir, path, src)
    }

    #[test]
    fn a_bad_file_at_startup_is_an_error_naming_the_place() {
        let (_d, _p, mut src) = source_with("Default=0x7fff, ipoib : ALL=full ;\nstorage=0x10, mtux=5 : ALL ;\n");
        let e = src.load().unwrap_err().to_string();
        assert!(e.contains("partitions.conf:2:"), "{e}");
    }

    #[test]
    fn a_bad_file_later_keeps_the_partitions_in_force() {
        let (_d, path, mut src) = source_with("Default=0x7fff, ipoib : ALL=full ;\nstorage=0x10 : ALL=full ;\n");
        src.load().unwrap();
        let empty = Subnet::default();
        let before = src.in_force.clone();
        std::fs::write(&path, "Default=0x7fff : ALL=full ;\nstorage=0x10 : 0xzz ;\n").unwrap();
        let _ = src.resolve(&empty);
        assert_eq!(src.in_force, before, "a bad file must not replace the one in force");
        std::fs::write(&path, "Default=0x7fff, ipoib : ALL=full ;\nother=0x20 : ALL=full ;\n").unwrap();
        let _ = src.resolve(&empty);
        assert!(src.in_force.partition(0x20).is_some() && src.in_force.partition(0x10).is_none());
    }

    #[test]
    fn a_file_that_disappears_keeps_its_partitions() {
        let (_d, path, mut src) = source_with("Default=0x7fff, ipoib : ALL=full ;\nstorage=0x10 : ALL=full ;\n");
        src.load().unwrap();
        let before = src.in_force.clone();
        std::fs::remove_file(&path).unwrap();
        let _ = src.resolve(&Subnet::default());
        assert_eq!(src.in_force, before);
        std::fs::write(&path, "Default=0x7fff, ipoib : ALL=full ;\n").unwrap();
        let _ = src.resolve(&Subnet::default());
        assert!(src.in_force.partition(0x10).is_none(), "a file with only Default removes the others");
    }

    #[test]
    fn no_file_is_the_default_partition() {
        let mut src = PartitionSource::new(Some("/nonexistent/partitions.conf".into()), PolicyOptions::default());
        src.load().unwrap();
        assert_eq!(src.in_force, PartitionConf::default_no_file());
    }
}
