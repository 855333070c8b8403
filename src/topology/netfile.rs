//! Reads ibsim net files and `ibnetdiscover` output, which are one format:
//! ibsim reads ibnetdiscover's text, plus a few extensions.
//!
//! ```text
//! # comment                          (column 0)
//! switchguid=0x200000(200000)        GUID counter lines, see `guids`
//! sysimgguid=0x777                   system GUID of the next node only
//! vendid=0x2c9 / devid=0xbd36        accepted, not modelled
//! width=N / speed=N / extspeed=N     default enabled masks for later nodes
//! module="prefix"                    later names become `prefix#name`
//! include "other.net"                relative to this file (ibsim: to its cwd)
//! do <console command>               ignored, recorded as a note
//! Switch 8 "name"  # "description" enhanced port 0 lid 1 lmc 0
//! [1]  "remote"[3]  w=8 s=4          a port line; `[3]` defaults to [1]
//! [2](100002)  "S-..."[4](guid)  # "desc" lid 2 4xQDR    ibnetdiscover form
//!                                    a blank line ends the record
//! Hca 2 "name" / Ca 2 "name" / Rt 2 "name"
//! ```
//!
//! The rules follow ibsim 0.10 (sim_net.c), so a file this reader accepts
//! loads in ibsim with the same GUIDs, ports and links:
//! - a record reads at most `ports` port lines; otherwise it ends at the first
//!   line that is not a port line or a `#` comment, and ibsim swallows that
//!   line, so we demand it be blank;
//! - `w=`/`s=` are *enabled* masks of one end; the link runs at the highest
//!   width (12x > 8x > 4x > 2x > 1x) and speed (QDR > DDR > SDR) both ends
//!   enable, 4x SDR by default. ibnetdiscover's `lid N 4xQDR` comment sets the
//!   masks ibsim derives from it (4x -> 1x|4x, QDR -> SDR|DDR|QDR, ...);
//! - every link must be listed by both ends, consistently: ibsim refuses a
//!   one-sided declaration (checked on ibsim: "remote port 1 in node "Hca2" is
//!   not connected to node "Switch1" port 2"), and so do we;
//! - the description is the quoted text after `#` or, unquoted, the text up to
//!   " enhanced port ", " base port ", " lid " or " lmc "; empty means the
//!   name; ibsim keeps 63 bytes of it.
//!
//! Where ibsim silently tolerates something we reject it with a typed error:
//! unknown lines, text other than `w=`/`s=`/`e=` before a port line's `#`, a
//! port listed twice in a record, lines over ibsim's 255-byte limit, names
//! over its 64-byte limit. Port aliases (`@[1] "alias"`) are unsupported.
//! Not modelled (noted or ignored): LIDs/LMC, vendor/device IDs, extended
//! speeds (FDR/EDR/HDR: the model's speed stays QDR, as LinkSpeedActive is).

use std::collections::HashMap;
use std::io::Read;
use std::path::{Path, PathBuf};

use super::guids::{ibsim_port_guids, GuidCounters};
use super::{Link, Node, NodeIdx, NodeKind, PortRef, Problem, Topology, TopologyError};
use super::{DEFAULT_SPEED, DEFAULT_WIDTH};
use crate::types::{Guid, MAX_PORTS};

/// ibsim's line buffer holds 255 bytes; longer lines are split in two.
pub const MAX_LINE: usize = 255;
/// ibsim's node-id buffer keeps 64 bytes.
pub const MAX_NAME: usize = 64;
/// ibsim keeps 63 bytes of a description.
pub const MAX_DESCRIPTION: usize = 63;
/// ibsim's include stack holds 9 files (the top one included).
pub const MAX_INCLUDE_DEPTH: usize = 9;
/// ibsim's `module=` prefix holds 20 bytes.
pub const MAX_PREFIX: usize = 20;
/// Included files larger than this are refused rather than read.
pub const MAX_FILE_BYTES: u64 = 256 << 20;

/// A topology and what the reader saw but did not model.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParsedNet {
    pub topology: Topology,
    pub notes: Vec<Note>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Note {
    pub file: PathBuf,
    pub line: usize,
    pub kind: NoteKind,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NoteKind {
    /// `do <command>`: ibsim runs it as a console command while loading.
    DoCommandIgnored(String),
    /// `pdebug=N`: ibsim's parser debug switch.
    DebugSwitchIgnored,
    /// A `(guid)` after a CA port number that is not node GUID + port, which
    /// ibsim (and so this model) uses regardless.
    PortGuidIgnored { node: String, port: u8, declared: Guid, used: Guid },
    /// An extended speed (`e=`, `extspeed=`, FDR/EDR/HDR/FDR10 in a comment):
    /// the model keeps LinkSpeedActive only.
    ExtendedSpeedIgnored(String),
    /// A `lid ...` comment ibsim would fail to read as `lid N <w>x<speed>`
    /// (ibsim warns and keeps the port's defaults, as we do).
    ConnectionInfoIgnored(String),
    /// The description was cut to ibsim's 63 bytes.
    DescriptionTruncated { node: String },
}

/// Reads `path` and the files it includes.
pub fn read_net_file(path: &Path) -> Result<ParsedNet, TopologyError> {
    let text = load_file(path).map_err(|source| TopologyError::Io { file: path.to_path_buf(), source })?;
    parse_net_with(&text, path, &mut load_file)
}

/// Parses `text` as if read from `origin` (which names it in errors and
/// anchors relative includes, read from the filesystem).
pub fn parse_net(text: &[u8], origin: &Path) -> Result<ParsedNet, TopologyError> {
    parse_net_with(text, origin, &mut load_file)
}

/// Parses `text` as if read from `origin`, reading includes through `load`
/// (tests pass an in-memory or always-failing loader).
pub fn parse_net_with(
    text: &[u8],
    origin: &Path,
    load: &mut dyn FnMut(&Path) -> std::io::Result<Vec<u8>>,
) -> Result<ParsedNet, TopologyError> {
    let mut r = Reader::new(load);
    r.stack.push(include_key(origin));
    r.parse_file(text, origin)?;
    r.finish()
}

fn load_file(path: &Path) -> std::io::Result<Vec<u8>> {
    let mut buf = Vec::new();
    std::fs::File::open(path)?.take(MAX_FILE_BYTES + 1).read_to_end(&mut buf)?;
    if buf.len() as u64 > MAX_FILE_BYTES {
        return Err(std::io::Error::new(std::io::ErrorKind::InvalidData, "file larger than 256 MiB"));
    }
    Ok(buf)
}

fn include_key(p: &Path) -> PathBuf {
    p.canonicalize().unwrap_or_else(|_| p.to_path_buf())
}

struct PortDecl {
    remote: String,
    remote_port: u32,
    width_enabled: u8,
    speed_enabled: u8,
    file: usize,
    line: usize,
}

struct NodeDecl {
    kind: NodeKind,
    name: String,
    description: String,
    num_ports: u8,
    node_guid: u64,
    system_guid: u64,
    enhanced_port0: bool,
    file: usize,
    line: usize,
    /// Indexed by port number (slot 0 never filled).
    ports: Vec<Option<PortDecl>>,
}

enum State {
    TopLevel,
    /// Inside a node record; `remaining` port lines may still follow.
    Record {
        node: usize,
        remaining: u8,
    },
}

struct Reader<'l> {
    load: &'l mut dyn FnMut(&Path) -> std::io::Result<Vec<u8>>,
    files: Vec<PathBuf>,
    stack: Vec<PathBuf>,
    counters: GuidCounters,
    pending_sysimgguid: u64,
    width_enabled: u8,
    speed_enabled: u8,
    prefix: String,
    nodes: Vec<NodeDecl>,
    by_name: HashMap<String, usize>,
    by_guid: HashMap<u64, usize>,
    notes: Vec<Note>,
}

/// Where a line is, for errors.
#[derive(Clone, Copy)]
struct At {
    file: usize,
    line: usize,
}

impl<'l> Reader<'l> {
    fn new(load: &'l mut dyn FnMut(&Path) -> std::io::Result<Vec<u8>>) -> Self {
        Reader {
            load,
            files: Vec::new(),
            stack: Vec::new(),
            counters: GuidCounters::new(),
            pending_sysimgguid: 0,
            width_enabled: DEFAULT_WIDTH,
            speed_enabled: DEFAULT_SPEED,
            prefix: String::new(),
            nodes: Vec::new(),
            by_name: HashMap::new(),
            by_guid: HashMap::new(),
            notes: Vec::new(),
        }
    }

    fn path(&self, at: At) -> PathBuf {
        self.files[at.file].clone()
    }

    fn parse_err(&self, at: At, expected: &'static str, found: &str) -> TopologyError {
        TopologyError::Parse { file: self.path(at), line: at.line, expected, found: excerpt(found) }
    }

    fn semantic(&self, at: At, problem: Problem) -> TopologyError {
        TopologyError::Semantic { file: self.path(at), line: at.line, problem }
    }

    fn note(&mut self, at: At, kind: NoteKind) {
        let file = self.path(at);
        self.notes.push(Note { file, line: at.line, kind });
    }

    fn parse_file(&mut self, text: &[u8], path: &Path) -> Result<(), TopologyError> {
        self.files.push(path.to_path_buf());
        let file = self.files.len() - 1;
        let mut state = State::TopLevel;
        // A trailing newline does not start another line.
        let body = text.strip_suffix(b"\n").unwrap_or(text);
        if text.is_empty() {
            return Ok(());
        }
        for (i, raw) in body.split(|&b| b == b'\n').enumerate() {
            let at = At { file, line: i + 1 };
            let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
            if raw.len() > MAX_LINE {
                let shown = String::from_utf8_lossy(&raw[..40]);
                return Err(self.parse_err(at, "a line of at most 255 bytes (ibsim splits longer ones)", &shown));
            }
            let line = match std::str::from_utf8(raw) {
                Ok(l) if !l.contains('\0') => l,
                _ => {
                    let shown = String::from_utf8_lossy(raw).replace('\0', "\\0");
                    return Err(self.parse_err(at, "UTF-8 text without NUL bytes", &shown));
                }
            };
            state = match state {
                State::Record { node, remaining } => self.record_line(at, node, remaining, line)?,
                State::TopLevel => self.top_line(at, line, path)?,
            };
        }
        Ok(())
    }

    fn record_line(&mut self, at: At, node: usize, remaining: u8, line: &str) -> Result<State, TopologyError> {
        if line.starts_with('#') {
            return Ok(State::Record { node, remaining });
        }
        if line.starts_with('[') {
            self.port_line(at, node, line)?;
            return Ok(if remaining > 1 { State::Record { node, remaining: remaining - 1 } } else { State::TopLevel });
        }
        if line.starts_with('@') {
            return Err(TopologyError::Unsupported {
                file: self.path(at),
                line: at.line,
                what: "a port alias (`@[n]`)",
            });
        }
        if !is_blank(line) {
            return Err(self.parse_err(
                at,
                "a port line `[n] \"remote\"[m]` or a blank line ending the node record (ibsim drops the line after a record)",
                line,
            ));
        }
        Ok(State::TopLevel)
    }

    fn top_line(&mut self, at: At, line: &str, path: &Path) -> Result<State, TopologyError> {
        if is_blank(line) || line.starts_with('#') {
            return Ok(State::TopLevel);
        }
        if line.starts_with('[') || line.starts_with('@') {
            return Err(self.parse_err(
                at,
                "a node header before port lines (a record lists at most as many port lines as the node has ports)",
                line,
            ));
        }
        let word_len = line.find(|c: char| !(c.is_ascii_alphabetic() || c == '_')).unwrap_or(line.len());
        let (word, rest) = line.split_at(word_len);
        match word {
            "Switch" => self.header(at, NodeKind::Switch, rest),
            "Hca" | "Ca" => self.header(at, NodeKind::Ca, rest),
            "Rt" => self.header(at, NodeKind::Router, rest),
            "switchguid" => self.guid_base(at, NodeKind::Switch, rest),
            "caguid" | "hcaguids" => self.guid_base(at, NodeKind::Ca, rest),
            "rtguid" => self.guid_base(at, NodeKind::Router, rest),
            "sysimgguid" => {
                self.pending_sysimgguid = self.assignment(at, rest, u64::MAX)?;
                Ok(State::TopLevel)
            }
            "vendid" | "devid" => {
                self.assignment(at, rest, u64::MAX)?;
                Ok(State::TopLevel)
            }
            "width" => {
                let v = self.assignment(at, rest, 31)?;
                if v == 0 {
                    return Err(self.parse_err(at, "an enabled width mask 1..=31", rest));
                }
                self.width_enabled = v as u8;
                Ok(State::TopLevel)
            }
            "speed" => {
                let v = self.assignment(at, rest, 7)?;
                if v == 0 {
                    return Err(self.parse_err(at, "an enabled speed mask 1..=7", rest));
                }
                self.speed_enabled = v as u8;
                Ok(State::TopLevel)
            }
            "extspeed" => {
                if self.assignment(at, rest, 7)? != 0 {
                    self.note(at, NoteKind::ExtendedSpeedIgnored(line.to_string()));
                }
                Ok(State::TopLevel)
            }
            "module" => self.module(at, rest),
            "include" => self.include(at, rest, path),
            "do" if rest.is_empty() || rest.starts_with(|c: char| c.is_ascii_whitespace()) => {
                self.note(at, NoteKind::DoCommandIgnored(rest.trim().to_string()));
                Ok(State::TopLevel)
            }
            "pdebug" => {
                self.note(at, NoteKind::DebugSwitchIgnored);
                Ok(State::TopLevel)
            }
            _ => Err(self.parse_err(
                at,
                "a node header (Switch, Hca, Ca, Rt), a setting (switchguid=, caguid=, rtguid=, sysimgguid=, \
                 vendid=, devid=, width=, speed=, extspeed=, module=), include, do, a # comment or a blank line",
                line,
            )),
        }
    }

    /// `=value` (optionally followed by ibnetdiscover's `(hex)` echo).
    fn assignment(&self, at: At, rest: &str, max: u64) -> Result<u64, TopologyError> {
        let mut c = Cursor::new(rest);
        c.skip_ws();
        if !c.eat('=') {
            return Err(self.parse_err(at, "`=` and a value", rest));
        }
        self.assignment_value(at, &mut c, max)
    }

    fn assignment_value(&self, at: At, c: &mut Cursor, max: u64) -> Result<u64, TopologyError> {
        let v = match c.c_uint() {
            Some(v) if v <= max => v,
            _ => return Err(self.parse_err(at, "a number (decimal, 0x hex or 0 octal) in range", c.rest())),
        };
        c.skip_ws();
        if c.eat('(') && !c.skip_past(')') {
            return Err(self.parse_err(at, "`)` closing the GUID echo", c.rest()));
        }
        c.skip_ws();
        if !c.at_end() {
            return Err(self.parse_err(at, "end of line after the value", c.rest()));
        }
        Ok(v)
    }

    fn guid_base(&mut self, at: At, kind: NodeKind, rest: &str) -> Result<State, TopologyError> {
        let mut c = Cursor::new(rest);
        c.skip_ws();
        if c.eat('=') {
            let v = self.assignment_value(at, &mut c, u64::MAX)?;
            self.counters.set_absolute(kind, v);
        } else if c.eat('+') {
            let v = self.assignment_value(at, &mut c, u64::MAX)?;
            self.counters.set_relative(kind, v);
        } else {
            return Err(self.parse_err(at, "`=guid` or `+offset`", rest));
        }
        Ok(State::TopLevel)
    }

    fn module(&mut self, at: At, rest: &str) -> Result<State, TopologyError> {
        let mut c = Cursor::new(rest);
        c.skip_ws();
        if !c.eat('=') {
            return Err(self.parse_err(at, "`=\"prefix\"`", rest));
        }
        c.skip_ws();
        let Some(prefix) = c.quoted() else {
            return Err(self.parse_err(at, "a quoted module prefix", c.rest()));
        };
        if prefix.len() > MAX_PREFIX || prefix.contains(['#', '@']) {
            return Err(self.parse_err(at, "a prefix of at most 20 bytes without `#` or `@`", prefix));
        }
        self.prefix = prefix.to_string();
        Ok(State::TopLevel)
    }

    fn include(&mut self, at: At, rest: &str, path: &Path) -> Result<State, TopologyError> {
        let mut c = Cursor::new(rest);
        c.skip_ws();
        // ibsim wants the name quoted; a bare name is accepted too.
        let name = match c.quoted() {
            Some(n) => n,
            None => c.rest().trim_end(),
        };
        if name.is_empty() {
            return Err(self.parse_err(at, "a file name after include", rest));
        }
        let target = match path.parent() {
            Some(dir) if Path::new(name).is_relative() => dir.join(name),
            _ => PathBuf::from(name),
        };
        let key = include_key(&target);
        let here = self.path(at);
        let fail = |reason: String| TopologyError::Include {
            file: here.clone(),
            line: at.line,
            target: target.clone(),
            reason,
        };
        if self.stack.contains(&key) {
            return Err(fail("the file includes itself (cycle)".into()));
        }
        if self.stack.len() >= MAX_INCLUDE_DEPTH {
            return Err(fail(format!("nests deeper than ibsim's {MAX_INCLUDE_DEPTH} files")));
        }
        let text = (self.load)(&target).map_err(|e| fail(format!("cannot be read: {e}")))?;
        self.stack.push(key);
        self.parse_file(&text, &target)?;
        self.stack.pop();
        Ok(State::TopLevel)
    }

    fn header(&mut self, at: At, kind: NodeKind, rest: &str) -> Result<State, TopologyError> {
        let mut c = Cursor::new(rest);
        if !c.skip_ws() {
            return Err(self.parse_err(at, "whitespace and a port count after the node type", rest));
        }
        let num_ports = match c.c_uint() {
            Some(n) => n,
            None => return Err(self.parse_err(at, "the node's port count", c.rest())),
        };
        c.skip_ws();
        let Some(base) = c.quoted() else {
            return Err(self.parse_err(at, "the node name in double quotes", c.rest()));
        };
        if base.is_empty() || base.contains(['#', '@']) {
            return Err(self.parse_err(at, "a non-empty node name without `#` or `@`", base));
        }
        let name = if self.prefix.is_empty() { base.to_string() } else { format!("{}#{}", self.prefix, base) };
        if name.len() > MAX_NAME {
            return Err(self.parse_err(at, "a node name of at most 64 bytes (ibsim truncates longer ones)", &name));
        }
        if num_ports == 0 || num_ports > MAX_PORTS as u64 {
            let num_ports = num_ports.min(u32::MAX as u64) as u32;
            return Err(self.semantic(at, Problem::BadPortCount { node: name, num_ports }));
        }
        let num_ports = num_ports as u8;
        if self.by_name.contains_key(&name) {
            return Err(self.semantic(at, Problem::DuplicateName { name }));
        }

        let (description, tail) = match c.rest().split_once('#') {
            Some((_, after)) => split_description(after),
            None => (None, c.rest()),
        };
        let mut description = match description {
            Some(d) if !d.is_empty() => d.to_string(),
            _ => name.clone(),
        };
        if description.len() > MAX_DESCRIPTION {
            let mut end = MAX_DESCRIPTION;
            while !description.is_char_boundary(end) {
                end -= 1;
            }
            description.truncate(end);
            self.note(at, NoteKind::DescriptionTruncated { node: name.clone() });
        }
        // ibsim leaves EnhancedPort0 clear unless told (checked with smpquery switchinfo).
        let enhanced_port0 = kind == NodeKind::Switch && tail.contains("enhanced port 0");

        let node_guid = self.counters.peek(kind);
        if let Some(&other) = self.by_guid.get(&node_guid) {
            let first = self.nodes[other].name.clone();
            return Err(self.semantic(at, Problem::DuplicateNodeGuid { guid: Guid(node_guid), first, second: name }));
        }
        self.counters.allocate(kind, num_ports);
        let system_guid = match std::mem::take(&mut self.pending_sysimgguid) {
            0 => node_guid,
            g => g,
        };
        let idx = self.nodes.len();
        self.by_name.insert(name.clone(), idx);
        self.by_guid.insert(node_guid, idx);
        self.nodes.push(NodeDecl {
            kind,
            name,
            description,
            num_ports,
            node_guid,
            system_guid,
            enhanced_port0,
            file: at.file,
            line: at.line,
            ports: (0..=num_ports).map(|_| None).collect(),
        });
        Ok(State::Record { node: idx, remaining: num_ports })
    }

    fn port_line(&mut self, at: At, node: usize, line: &str) -> Result<(), TopologyError> {
        let mut c = Cursor::new(line);
        c.eat('[');
        let port = match c.c_uint() {
            Some(p) if c.eat(']') => p,
            _ => return Err(self.parse_err(at, "a port number in brackets `[n]`", line)),
        };
        let (name, kind, num_ports) = {
            let n = &self.nodes[node];
            (n.name.clone(), n.kind, n.num_ports)
        };
        if port == 0 {
            return Err(self.semantic(at, Problem::PortZero { node: name }));
        }
        if port > num_ports as u64 {
            let port = port.min(u32::MAX as u64) as u32;
            return Err(self.semantic(at, Problem::PortOutOfRange { node: name, port, num_ports }));
        }
        let port = port as u8;
        if self.nodes[node].ports[port as usize].is_some() {
            return Err(self.semantic(at, Problem::PortCabledTwice { node: name, port }));
        }
        // ibnetdiscover writes a CA port's GUID after its number.
        c.skip_ws();
        if c.eat('(') {
            let declared = match c.hex() {
                Some(g) if c.eat(')') => g,
                _ => return Err(self.parse_err(at, "a hex port GUID and `)`", c.rest())),
            };
            let used = ibsim_port_guids(kind, self.nodes[node].node_guid, num_ports)
                .get(if kind == NodeKind::Switch { 0 } else { port as usize })
                .copied()
                .unwrap_or_default();
            if declared != used.0 {
                self.note(at, NoteKind::PortGuidIgnored { node: name.clone(), port, declared: Guid(declared), used });
            }
        }
        c.skip_ws();
        let Some(remote) = c.quoted() else {
            return Err(self.parse_err(at, "the remote node name in double quotes", c.rest()));
        };
        if remote.is_empty() {
            return Err(self.parse_err(at, "a non-empty remote node name", line));
        }
        if remote.contains('@') {
            return Err(TopologyError::Unsupported { file: self.path(at), line: at.line, what: "a port alias (`@`)" });
        }
        let remote = if self.prefix.is_empty() || remote.contains('#') {
            remote.to_string()
        } else {
            format!("{}#{}", self.prefix, remote)
        };
        let remote_port = if c.eat('[') {
            match c.c_uint() {
                Some(p) if p >= 1 && c.eat(']') => p.min(u32::MAX as u64) as u32,
                _ => return Err(self.parse_err(at, "a remote port number 1..=254 in brackets", c.rest())),
            }
        } else {
            1 // ibsim's default
        };
        // ibnetdiscover echoes the remote port GUID, after a space when the
        // remote is a CA.
        c.skip_ws();
        if c.eat('(') && !c.skip_past(')') {
            return Err(self.parse_err(at, "`)` closing the remote port GUID", c.rest()));
        }
        let (options, comment) = match c.rest().split_once('#') {
            Some((o, cmt)) => (o, Some(cmt)),
            None => (c.rest(), None),
        };
        let mut width_enabled = self.width_enabled;
        let mut speed_enabled = self.speed_enabled;
        for opt in options.split_ascii_whitespace() {
            let (key, value) = opt.split_once('=').unwrap_or((opt, ""));
            let v = Cursor::new(value).c_uint_all();
            match (key, v) {
                ("w", Some(v @ 1..=31)) => width_enabled = v as u8,
                ("s", Some(v @ 1..=7)) => speed_enabled = v as u8,
                ("e", Some(0)) => {}
                ("e", Some(1..=7)) => self.note(at, NoteKind::ExtendedSpeedIgnored(opt.to_string())),
                _ => {
                    return Err(self.parse_err(
                        at,
                        "port options w=<width mask 1..31>, s=<speed mask 1..7>, e=<ext speed 0..7> or a # comment",
                        opt,
                    ))
                }
            }
        }
        if let Some(comment) = comment {
            match connection_info(comment) {
                ConnInfo::Absent => {}
                ConnInfo::Unreadable(text) => self.note(at, NoteKind::ConnectionInfoIgnored(text)),
                ConnInfo::Rate { width, speed, ext } => {
                    match width {
                        Some(w) => width_enabled = w,
                        None => self.note(at, NoteKind::ConnectionInfoIgnored(comment.trim().to_string())),
                    }
                    match speed {
                        Some(s) => speed_enabled = s,
                        None => self.note(at, NoteKind::ConnectionInfoIgnored(comment.trim().to_string())),
                    }
                    if let Some(e) = ext {
                        self.note(at, NoteKind::ExtendedSpeedIgnored(e.to_string()));
                    }
                }
            }
        }
        self.nodes[node].ports[port as usize] =
            Some(PortDecl { remote, remote_port, width_enabled, speed_enabled, file: at.file, line: at.line });
        Ok(())
    }

    /// ibsim's connect_ports: walk ports in file order, pair each declaration
    /// with its remote's, which must point back.
    fn finish(self) -> Result<ParsedNet, TopologyError> {
        let mut topo = Topology::default();
        for n in &self.nodes {
            let mut node = Node::new(n.kind, n.name.clone(), n.num_ports, Guid(n.node_guid));
            node.description = n.description.clone();
            node.system_guid = Guid(n.system_guid);
            node.enhanced_port0 = n.enhanced_port0;
            topo.nodes.push(node);
        }
        let mut linked: Vec<Vec<bool>> = self.nodes.iter().map(|n| vec![false; n.num_ports as usize + 1]).collect();
        for (ni, n) in self.nodes.iter().enumerate() {
            for (pi, decl) in n.ports.iter().enumerate() {
                let Some(d) = decl else { continue };
                if linked[ni][pi] {
                    continue;
                }
                let at = At { file: d.file, line: d.line };
                let port = pi as u8;
                let Some(&ri) = self.by_name.get(&d.remote) else {
                    let p = Problem::DanglingLink { node: n.name.clone(), port, remote: d.remote.clone() };
                    return Err(self.semantic(at, p));
                };
                let r = &self.nodes[ri];
                if d.remote_port > r.num_ports as u32 {
                    let p =
                        Problem::PortOutOfRange { node: r.name.clone(), port: d.remote_port, num_ports: r.num_ports };
                    return Err(self.semantic(at, p));
                }
                let rp = d.remote_port as u8;
                match &r.ports[rp as usize] {
                    None => {
                        let p = Problem::OneSidedLink {
                            node: n.name.clone(),
                            port,
                            remote: r.name.clone(),
                            remote_port: rp,
                        };
                        return Err(self.semantic(at, p));
                    }
                    Some(back) if back.remote != n.name || back.remote_port != pi as u32 => {
                        let p = Problem::ContradictoryLink {
                            node: n.name.clone(),
                            port,
                            remote: r.name.clone(),
                            remote_port: rp,
                            remote_says: back.remote.clone(),
                            remote_says_port: back.remote_port.min(255) as u8,
                        };
                        return Err(self.semantic(at, p));
                    }
                    Some(back) => {
                        if ri == ni && rp == port {
                            return Err(self.semantic(at, Problem::PortLoop { node: n.name.clone(), port }));
                        }
                        let rate = |what, ours: u8, theirs: u8, pick: fn(u8) -> Option<u8>| {
                            pick(ours & theirs).ok_or_else(|| {
                                self.semantic(
                                    at,
                                    Problem::NoCommonRate { node: n.name.clone(), port, what, ours, theirs },
                                )
                            })
                        };
                        let width = rate("width", d.width_enabled, back.width_enabled, best_width)?;
                        let speed = rate("speed", d.speed_enabled, back.speed_enabled, best_speed)?;
                        linked[ni][pi] = true;
                        linked[ri][rp as usize] = true;
                        topo.links.push(Link {
                            a: PortRef { node: NodeIdx(ni), port },
                            b: PortRef { node: NodeIdx(ri), port: rp },
                            width,
                            speed,
                            ext_speed: super::SPEED_EXT_NONE,
                        });
                    }
                }
            }
        }
        // Everything above is checked per line; this catches what only the
        // whole model shows (port GUIDs of one node hitting another's).
        if let Err(problem) = topo.validate() {
            let at = problem
                .node_name()
                .and_then(|name| self.by_name.get(name))
                .map(|&i| At { file: self.nodes[i].file, line: self.nodes[i].line })
                .unwrap_or(At { file: 0, line: 0 });
            return Err(self.semantic(at, problem));
        }
        Ok(ParsedNet { topology: topo, notes: self.notes })
    }
}

/// The highest width both ends enable, in ibsim's order of preference.
fn best_width(common: u8) -> Option<u8> {
    [8u8, 4, 2, 16, 1].into_iter().find(|w| common & w != 0)
}

/// The highest speed both ends enable (extended speeds are not modelled).
fn best_speed(common: u8) -> Option<u8> {
    [4u8, 2, 1].into_iter().find(|s| common & s != 0)
}

fn is_blank(line: &str) -> bool {
    line.bytes().all(|b| b.is_ascii_whitespace())
}

fn excerpt(s: &str) -> String {
    const MAX: usize = 60;
    if s.len() <= MAX {
        return s.to_string();
    }
    let mut end = MAX;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}...", &s[..end])
}

/// ibsim's description rule over the text after `#`: returns the
/// description and the text after it (where "enhanced port 0" is looked for).
fn split_description(after_hash: &str) -> (Option<&str>, &str) {
    let s = after_hash.trim_start_matches(|c: char| c.is_ascii_whitespace());
    if let Some(q) = s.strip_prefix('"') {
        return match q.split_once('"') {
            Some((d, tail)) => (Some(d), tail),
            None => (Some(q), ""),
        };
    }
    for marker in [" enhanced port ", " base port ", " lid ", " lmc "] {
        if let Some(i) = s.find(marker) {
            return (Some(&s[..i]), &s[i + 1..]);
        }
    }
    (Some(s), "")
}

enum ConnInfo<'a> {
    Absent,
    Unreadable(String),
    Rate { width: Option<u8>, speed: Option<u8>, ext: Option<&'a str> },
}

/// ibnetdiscover's `... lid 3 4xQDR` at the end of a port line, read as ibsim
/// does: the first `lid` after the last double quote, then `lid %d %dx%s`;
/// the result is the enabled masks ibsim derives.
fn connection_info(comment: &str) -> ConnInfo<'_> {
    let from = comment.rfind('"').map(|i| i + 1).unwrap_or(0);
    let Some(rel) = comment[from..].find("lid") else {
        return ConnInfo::Absent;
    };
    let text = &comment[from + rel..];
    let mut c = Cursor::new(&text[3..]);
    c.skip_ws();
    c.eat('-');
    let parsed = c.digits().and_then(|_| {
        c.skip_ws();
        let w = c.digits()?;
        if !c.eat('x') {
            return None;
        }
        c.skip_ws();
        let tok = c.token();
        (!tok.is_empty()).then_some((w, tok))
    });
    let Some((w, tok)) = parsed else {
        return ConnInfo::Unreadable(text.trim().to_string());
    };
    let width = match w {
        12 => Some(8 | 2 | 1),
        8 => Some(4),
        4 => Some(2 | 1),
        2 => Some(16),
        1 => Some(1),
        _ => None,
    };
    // ibsim matches when the token is a prefix of the name, first hit wins.
    const SPEEDS: [(&str, u8, bool); 7] = [
        ("SDR", 1, false),
        ("DDR", 3, false),
        ("QDR", 7, false),
        ("FDR", 7, true),
        ("EDR", 7, true),
        ("HDR", 7, true),
        ("FDR10", 7, true),
    ];
    let hit = SPEEDS.iter().find(|(name, _, _)| name.starts_with(tok));
    ConnInfo::Rate { width, speed: hit.map(|&(_, mask, _)| mask), ext: hit.filter(|&&(_, _, ext)| ext).map(|_| tok) }
}

/// A byte cursor over one line; every step checks bounds.
struct Cursor<'a> {
    s: &'a str,
    pos: usize,
}

impl<'a> Cursor<'a> {
    fn new(s: &'a str) -> Self {
        Cursor { s, pos: 0 }
    }

    fn rest(&self) -> &'a str {
        &self.s[self.pos..]
    }

    fn at_end(&self) -> bool {
        self.pos >= self.s.len()
    }

    fn peek(&self) -> Option<u8> {
        self.s.as_bytes().get(self.pos).copied()
    }

    /// Skips ASCII whitespace; says whether there was any.
    fn skip_ws(&mut self) -> bool {
        let start = self.pos;
        while self.peek().is_some_and(|b| b.is_ascii_whitespace()) {
            self.pos += 1;
        }
        self.pos > start
    }

    fn eat(&mut self, c: char) -> bool {
        if self.rest().starts_with(c) {
            self.pos += c.len_utf8();
            true
        } else {
            false
        }
    }

    /// Moves past the next `c`; false (and stays) if there is none.
    fn skip_past(&mut self, c: char) -> bool {
        match self.rest().find(c) {
            Some(i) => {
                self.pos += i + c.len_utf8();
                true
            }
            None => false,
        }
    }

    /// `"text"`: returns the text between the quotes.
    fn quoted(&mut self) -> Option<&'a str> {
        let rest = self.rest().strip_prefix('"')?;
        let end = rest.find('"')?;
        self.pos += 1 + end + 1;
        Some(&rest[..end])
    }

    /// Decimal digits as a number (saturating, only used for small fields).
    fn digits(&mut self) -> Option<u64> {
        let start = self.pos;
        let mut v: u64 = 0;
        while let Some(b) = self.peek().filter(u8::is_ascii_digit) {
            v = v.saturating_mul(10).saturating_add((b - b'0') as u64);
            self.pos += 1;
        }
        (self.pos > start).then_some(v)
    }

    /// Non-whitespace run.
    fn token(&mut self) -> &'a str {
        let start = self.pos;
        while self.peek().is_some_and(|b| !b.is_ascii_whitespace()) {
            self.pos += 1;
        }
        &self.s[start..self.pos]
    }

    /// Hex digits without prefix (ibnetdiscover's GUID echoes).
    fn hex(&mut self) -> Option<u64> {
        let rest = self.rest();
        let n = rest.bytes().take_while(u8::is_ascii_hexdigit).count();
        let v = u64::from_str_radix(rest.get(..n)?, 16).ok()?;
        self.pos += n;
        Some(v)
    }

    /// An unsigned number the way C's strtoul(s, _, 0) reads one: `0x` hex,
    /// leading `0` octal, else decimal. None on overflow or no digits.
    fn c_uint(&mut self) -> Option<u64> {
        let rest = self.rest();
        let (radix, skip) = if rest.starts_with("0x") || rest.starts_with("0X") {
            (16, 2)
        } else if rest.starts_with('0') {
            (8, 0)
        } else {
            (10, 0)
        };
        let digits = &rest[skip..];
        let n = digits.bytes().take_while(|b| (*b as char).is_digit(radix)).count();
        if n == 0 {
            return None;
        }
        let v = u64::from_str_radix(&digits[..n], radix).ok()?;
        self.pos += skip + n;
        Some(v)
    }

    /// The whole text as one C number, nothing after it.
    fn c_uint_all(mut self) -> Option<u64> {
        let v = self.c_uint()?;
        self.at_end().then_some(v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ParsedNet, TopologyError> {
        parse_net_with(text.as_bytes(), Path::new("test.net"), &mut |p| {
            Err(std::io::Error::new(std::io::ErrorKind::NotFound, p.display().to_string()))
        })
    }

    fn topo(text: &str) -> Topology {
        match parse(text) {
            Ok(p) => p.topology,
            Err(e) => panic!("{e}"),
        }
    }

    const NET: &str = "# two switches, two CAs
Switch\t8 \"Switch1\"
[1]\t\"Hca1\"[1]
[2]\t\"Hca2\"[2]
[3]\t\"Switch2\"[3]
[4]\t\"Switch2\"[4]

Switch 8 \"Switch2\"
[3]\t\"Switch1\"[3]
[4]\t\"Switch1\"[4]

Hca\t2 \"Hca1\"
[1]\t\"Switch1\"[1]

Hca\t2 \"Hca2\"
[2]\t\"Switch1\"[2]
";

    #[test]
    fn ibsim_example_net() {
        let t = topo(NET);
        let names: Vec<_> = t.nodes.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["Switch1", "Switch2", "Hca1", "Hca2"]);
        let guids: Vec<_> = t.nodes.iter().map(|n| n.node_guid.0).collect();
        assert_eq!(guids, [0x200000, 0x200001, 0x100000, 0x100003]);
        assert_eq!(t.nodes[3].port_guid(2), Guid(0x100005));
        assert_eq!(t.nodes[1].port_guid(0), Guid(0x200001));
        assert_eq!(t.nodes[0].description, "Switch1");
        assert_eq!(t.links.len(), 4);
        // In port-table order, each link once, from its first-listed end.
        assert_eq!(t.links[1].a, PortRef { node: NodeIdx(0), port: 2 });
        assert_eq!(t.links[1].b, PortRef { node: NodeIdx(3), port: 2 });
        assert!(t.links.iter().all(|l| l.width == 2 && l.speed == 1));
        assert_eq!(t.validate(), Ok(()));
    }

    #[test]
    fn ibnetdiscover_lines_set_guids_descriptions_and_rates() {
        let text = "#
# Topology file: generated on Mon Nov 30 09:16:41 2026
#
vendid=0x2c9
devid=0xbd36
sysimgguid=0x2c90200413d33
switchguid=0x2c90200413d30(2c90200413d30)
Switch\t36 \"S-0002c90200413d30\"\t\t# \"MF0;sw-a:IS5030/U1\" enhanced port 0 lid 1 lmc 0
[1]\t\"H-0002c9030002fb04\"[1](2c9030002fb05) \t\t# \"node01 HCA-1\" lid 4 4xQDR
[3]\t\"H-0002c9030002fb04\"[2](2c9030002fb06) \t\t# \"node01 HCA-1\" lid 5 12xDDR

vendid=0x2c9
devid=0x673c
sysimgguid=0x2c9030002fb07
caguid=0x2c9030002fb04
Ca\t2 \"H-0002c9030002fb04\"\t\t# \"node01 HCA-1\"
[1](2c9030002fb05) \t\"S-0002c90200413d30\"[1]\t\t# lid 4 lmc 0 \"MF0;sw-a:IS5030/U1\" lid 1 4xQDR
[2](2c9030002fb06) \t\"S-0002c90200413d30\"[3]\t\t# lid 5 lmc 0 \"MF0;sw-a:IS5030/U1\" lid 1 12xDDR
";
        let p = parse(text).unwrap();
        let t = &p.topology;
        assert_eq!(t.nodes[0].node_guid, Guid(0x2c90200413d30));
        assert_eq!(t.nodes[0].system_guid, Guid(0x2c90200413d33));
        assert_eq!(t.nodes[0].description, "MF0;sw-a:IS5030/U1");
        assert!(t.nodes[0].enhanced_port0);
        assert_eq!(t.nodes[1].kind, NodeKind::Ca);
        assert_eq!(t.nodes[1].node_guid, Guid(0x2c9030002fb04));
        assert_eq!(t.nodes[1].system_guid, Guid(0x2c9030002fb07));
        assert_eq!(t.nodes[1].port_guid(2), Guid(0x2c9030002fb06));
        assert_eq!(t.nodes[1].description, "node01 HCA-1");
        assert_eq!((t.links[0].width, t.links[0].speed), (2, 4));
        assert_eq!((t.links[1].width, t.links[1].speed), (8, 2));
        // The port GUID echoes agree with node GUID + port: no notes.
        assert_eq!(p.notes, vec![]);
    }

    #[test]
    fn ca_to_ca_ibnetdiscover_lines() {
        // ibnetdiscover puts a space before the remote CA's port GUID echo.
        let t = topo(
            "caguid=0x100002\nCa\t1 \"H-0000000000100002\"\t\t# \"h1\"\n\
             [1](100003) \t\"H-0000000000100000\"[1] (100001) \t\t# lid 0 lmc 0 \"h0\" lid 0 4xSDR\n\n\
             caguid=0x100000\nCa\t1 \"H-0000000000100000\"\t\t# \"h0\"\n\
             [1](100001) \t\"H-0000000000100002\"[1] (100003) \t\t# lid 0 lmc 0 \"h1\" lid 0 4xSDR\n",
        );
        assert_eq!(t.links.len(), 1);
        assert_eq!(t.nodes[1].description, "h0");
    }

    #[test]
    fn sysimgguid_applies_to_the_next_node_only() {
        let t = topo("sysimgguid=0x777\nSwitch 2 \"a\"\n\nSwitch 2 \"b\"\n");
        assert_eq!(t.nodes[0].system_guid, Guid(0x777));
        assert_eq!(t.nodes[1].system_guid, Guid(0x200001));
    }

    #[test]
    fn enabled_masks_pick_the_best_common_rate() {
        let t = topo(
            "Switch 2 \"s\"\n[1] \"a\"[1] w=8 s=4\n[2] \"b\"[1] w=1\n\n\
             Hca 1 \"a\"\n[1] \"s\"[1] w=12 s=7\n\nHca 1 \"b\"\n[1] \"s\"[2] w=3\n",
        );
        assert_eq!((t.links[0].width, t.links[0].speed), (8, 4));
        assert_eq!((t.links[1].width, t.links[1].speed), (1, 1));
        // 12x on one end only: ibsim refuses (no common width).
        let e = parse("Hca 1 \"a\"\n[1] \"b\"[1] w=8\n\nHca 1 \"b\"\n[1] \"a\"[1]\n").unwrap_err();
        assert!(
            matches!(e, TopologyError::Semantic { line: 2, problem: Problem::NoCommonRate { what: "width", .. }, .. }),
            "{e}"
        );
        // width= changes the default for later nodes.
        let t = topo("width=8\nspeed=4\nHca 1 \"a\"\n[1] \"b\"[1]\n\nHca 1 \"b\"\n[1] \"a\"[1]\n");
        assert_eq!((t.links[0].width, t.links[0].speed), (8, 4));
    }

    #[test]
    fn descriptions_follow_ibsim() {
        let t = topo(
            "Switch 2 \"s1\" # base port 0\n\nSwitch 2 \"s2\" # my switch lid 3 lmc 0\n\n\
             Switch 2 \"s3\" # \"\"\n\nSwitch 2 \"s4\" enhanced port 0\n\nHca 1 \"h\" # \"unclosed desc\n",
        );
        let d: Vec<_> = t.nodes.iter().map(|n| n.description.as_str()).collect();
        assert_eq!(d, ["base port 0", "my switch", "s3", "s4", "unclosed desc"]);
        assert!(t.nodes[3].enhanced_port0);
        assert!(!t.nodes[0].enhanced_port0);
        let long = "x".repeat(80);
        let p = parse(&format!("Hca 1 \"h\" # \"{long}\"\n")).unwrap();
        assert_eq!(p.topology.nodes[0].description.len(), 63);
        assert_eq!(p.notes[0].kind, NoteKind::DescriptionTruncated { node: "h".into() });
    }

    #[test]
    fn guid_lines_absolute_and_relative() {
        let t = topo("caguid=0xabc0\nHca 2 \"a\"\n\ncaguid+0x10\nHca 3 \"b\"\n\nrtguid=0x900000\nRt 2 \"r\"\n");
        assert_eq!(t.nodes[0].node_guid, Guid(0xabc0));
        assert_eq!(t.nodes[1].node_guid, Guid(0xabd0));
        assert_eq!(t.nodes[1].port_guid(2), Guid(0xabd2));
        assert_eq!((t.nodes[2].kind, t.nodes[2].node_guid), (NodeKind::Router, Guid(0x900000)));
    }

    #[test]
    fn remote_port_defaults_to_one_and_comments_inside_records() {
        let t = topo("Switch 2 \"s\"\n# a comment\n[2] \"h\"\n\nHca 1 \"h\"\n[1] \"s\"[2]\n");
        assert_eq!(t.links[0].b, PortRef { node: NodeIdx(1), port: 1 });
    }

    #[test]
    fn full_record_ends_without_a_blank_line() {
        // ibsim stops reading a record after `ports` port lines.
        let t = topo("Hca 1 \"a\"\n[1] \"b\"[1]\nHca 1 \"b\"\n[1] \"a\"[1]\n");
        assert_eq!(t.links.len(), 1);
    }

    #[test]
    fn module_prefix() {
        let t = topo("module=\"m1\"\nHca 1 \"a\"\n[1] \"b\"[1]\n\nHca 1 \"b\"\n[1] \"m1#a\"[1]\n");
        assert_eq!(t.nodes[0].name, "m1#a");
        assert_eq!(t.links.len(), 1);
    }

    #[test]
    fn do_and_pdebug_are_noted() {
        let p = parse("do link Switch1 1\npdebug=1\nHca 1 \"a\"\n").unwrap();
        assert_eq!(p.notes[0].kind, NoteKind::DoCommandIgnored("link Switch1 1".into()));
        assert_eq!(p.notes[0].line, 1);
        assert_eq!(p.notes[1].kind, NoteKind::DebugSwitchIgnored);
    }

    #[test]
    fn mismatching_port_guid_echo_is_noted() {
        let p = parse("caguid=0x10\nCa 2 \"a\"\n[1](99) \"b\"[1]\n\nCa 1 \"b\"\n[1] \"a\"[1]\n").unwrap();
        assert_eq!(
            p.notes[0].kind,
            NoteKind::PortGuidIgnored { node: "a".into(), port: 1, declared: Guid(0x99), used: Guid(0x11) }
        );
    }

    fn err(text: &str) -> TopologyError {
        match parse(text) {
            Ok(_) => panic!("accepted: {text}"),
            Err(e) => e,
        }
    }

    #[test]
    fn semantic_errors_name_file_and_line() {
        let e = err("Switch 2 \"s\"\n[1] \"ghost\"[1]\n");
        assert!(
            matches!(&e, TopologyError::Semantic { line: 2, problem: Problem::DanglingLink { .. }, file } if file == Path::new("test.net"))
        );
        // One-sided: h lists nothing on port 1.
        let e = err("Switch 2 \"s\"\n[1] \"h\"[1]\n\nHca 1 \"h\"\n");
        assert!(matches!(e, TopologyError::Semantic { line: 2, problem: Problem::OneSidedLink { .. }, .. }), "{e}");
        // Contradiction: h says it is on s port 2.
        let e = err("Switch 2 \"s\"\n[1] \"h\"[1]\n\nHca 1 \"h\"\n[1] \"s\"[2]\n");
        let TopologyError::Semantic {
            problem: Problem::ContradictoryLink { remote_says, remote_says_port, .. }, ..
        } = e
        else {
            panic!("{e}")
        };
        assert_eq!((remote_says.as_str(), remote_says_port), ("s", 2));
        let e = err("Hca 2 \"a\"\n\nHca 2 \"a\"\n");
        assert!(matches!(e, TopologyError::Semantic { line: 3, problem: Problem::DuplicateName { .. }, .. }), "{e}");
        let e = err("Hca 2 \"a\"\n[3] \"b\"[1]\n");
        assert!(matches!(e, TopologyError::Semantic { problem: Problem::PortOutOfRange { port: 3, .. }, .. }), "{e}");
        let e = err("Hca 2 \"a\"\n[0] \"b\"[1]\n");
        assert!(matches!(e, TopologyError::Semantic { problem: Problem::PortZero { .. }, .. }), "{e}");
        let e = err("Switch 4 \"a\"\n[1] \"b\"[1]\n[1] \"b\"[2]\n");
        assert!(matches!(e, TopologyError::Semantic { line: 3, problem: Problem::PortCabledTwice { .. }, .. }), "{e}");
        let e = err("Hca 1 \"a\"\n[1] \"b\"[9]\n\nHca 2 \"b\"\n");
        assert!(
            matches!(e, TopologyError::Semantic { problem: Problem::PortOutOfRange { port: 9, num_ports: 2, .. }, .. }),
            "{e}"
        );
        let e = err("caguid=5\nHca 1 \"a\"\n\ncaguid=5\nHca 1 \"b\"\n");
        assert!(
            matches!(e, TopologyError::Semantic { line: 5, problem: Problem::DuplicateNodeGuid { .. }, .. }),
            "{e}"
        );
        let e = err("Switch 0 \"a\"\n");
        assert!(
            matches!(e, TopologyError::Semantic { problem: Problem::BadPortCount { num_ports: 0, .. }, .. }),
            "{e}"
        );
        let e = err("Hca 2 \"a\"\n[1] \"a\"[1]\n");
        assert!(matches!(e, TopologyError::Semantic { problem: Problem::PortLoop { .. }, .. }), "{e}");
        // A switch port 0 GUID equal to a CA port GUID: found on the whole model.
        let e = err("caguid=0x10\nHca 2 \"a\"\n\nswitchguid=0x11\nSwitch 2 \"s\"\n");
        assert!(
            matches!(e, TopologyError::Semantic { line: 5, problem: Problem::DuplicatePortGuid { .. }, .. }),
            "{e}"
        );
    }

    #[test]
    fn parse_errors_say_what_was_expected() {
        for (text, line, expected_part) in [
            ("Switch 8 Switch1\n", 1, "node name in double quotes"),
            ("Switch x \"a\"\n", 1, "port count"),
            ("Hca 1 \"a\"\n[1] \"b\"[1] width=4\n", 2, "port options"),
            ("Hca 1 \"a\"\n[1] b[1]\n", 2, "remote node name"),
            ("Hca 1 \"a\"\n[x] \"b\"\n", 2, "port number in brackets"),
            ("Hca 1 \"a\"\n[1] \"b\"[0]\n", 2, "remote port number"),
            ("Hca 2 \"a\"\n[1] \"b\"[1]\nHca 1 \"b\"\n", 3, "blank line ending"),
            ("Hca 1 \"a\"\n[1] \"b\"\n[2] \"c\"\n", 3, "node header before port lines"),
            ("Swich 2 \"a\"\n", 1, "node header"),
            ("switchguid 5\n", 1, "`=guid`"),
            ("caguid=zz\n", 1, "a number"),
            ("vendid=0x2c9 junk\n", 1, "end of line"),
            ("width=40\n", 1, "a number"),
            ("Hca 1 \"a#b\"\n", 1, "without `#`"),
            ("Hca 1 \"\"\n", 1, "non-empty node name"),
        ] {
            match parse(text) {
                Err(TopologyError::Parse { line: l, expected, .. }) => {
                    assert_eq!(l, line, "{text:?}");
                    assert!(expected.contains(expected_part), "{text:?}: {expected}");
                }
                other => panic!("{text:?}: {other:?}"),
            }
        }
        let long = format!("# {}\n", "x".repeat(300));
        assert!(matches!(parse(&long), Err(TopologyError::Parse { line: 1, .. })));
        assert!(matches!(
            parse_net_with(b"Hca 1 \"\xff\"\n", Path::new("t"), &mut |_| unreachable!()),
            Err(TopologyError::Parse { line: 1, .. })
        ));
        assert!(matches!(parse("@[1] \"alias\"\n"), Err(TopologyError::Parse { .. })));
        assert!(matches!(parse("Hca 1 \"a\"\n@[1] \"x\"\n"), Err(TopologyError::Unsupported { .. })));
    }

    #[test]
    fn includes_are_relative_to_the_including_file() {
        let files: HashMap<PathBuf, &str> = [
            (PathBuf::from("/nets/sub/hosts.net"), "Hca 1 \"h\"\n[1] \"s\"[1]\n"),
            (PathBuf::from("/nets/loop.net"), "include \"loop.net\"\n"),
        ]
        .into_iter()
        .collect();
        let mut load = |p: &Path| {
            files
                .get(p)
                .map(|t| t.as_bytes().to_vec())
                .ok_or_else(|| std::io::Error::new(std::io::ErrorKind::NotFound, "no such file"))
        };
        let t = parse_net_with(
            b"Switch 2 \"s\"\n[1] \"h\"[1]\n\ninclude \"sub/hosts.net\"\n",
            Path::new("/nets/top.net"),
            &mut load,
        )
        .unwrap()
        .topology;
        assert_eq!(t.nodes.len(), 2);
        assert_eq!(t.links.len(), 1);
        let e = parse_net_with(b"include loop.net\n", Path::new("/nets/top.net"), &mut load).unwrap_err();
        assert!(
            matches!(&e, TopologyError::Include { target, reason, .. } if target == Path::new("/nets/loop.net") && reason.contains("cycle")),
            "{e}"
        );
        let e = parse_net_with(b"\n\ninclude \"missing.net\"\n", Path::new("/nets/top.net"), &mut load).unwrap_err();
        assert!(matches!(e, TopologyError::Include { line: 3, .. }), "{e}");
        // An error inside the included file names that file.
        let files2: HashMap<PathBuf, &str> = [(PathBuf::from("/n/bad.net"), "\nbogus\n")].into_iter().collect();
        let e = parse_net_with(b"include \"bad.net\"\n", Path::new("/n/top.net"), &mut |p: &Path| {
            files2.get(p).map(|t| t.as_bytes().to_vec()).ok_or_else(|| std::io::ErrorKind::NotFound.into())
        })
        .unwrap_err();
        assert!(matches!(&e, TopologyError::Parse { file, line: 2, .. } if file == Path::new("/n/bad.net")), "{e}");
    }

    #[test]
    fn include_depth_is_capped() {
        // Each level includes the next: a.net -> b.net -> ... deeper than 9.
        let mut load = |p: &Path| -> std::io::Result<Vec<u8>> {
            let n: usize = p.file_stem().and_then(|s| s.to_str()).and_then(|s| s.parse().ok()).unwrap_or(0);
            Ok(format!("include \"{}.net\"\n", n + 1).into_bytes())
        };
        let e = parse_net_with(b"include \"1.net\"\n", Path::new("/d/0.net"), &mut load).unwrap_err();
        assert!(matches!(&e, TopologyError::Include { reason, .. } if reason.contains("deeper")), "{e}");
    }

    #[test]
    fn connection_info_matches_ibsim() {
        let r = |s| match connection_info(s) {
            ConnInfo::Rate { width, speed, .. } => Some((width, speed)),
            _ => None,
        };
        assert_eq!(r(" lid 4 lmc 0 \"x\" lid 1 4xQDR"), Some((Some(3), Some(7))));
        assert_eq!(r(" \"x\" lid 1 12xSDR"), Some((Some(11), Some(1))));
        assert_eq!(r(" \"x\" lid 1 1xFDR10"), Some((Some(1), Some(7))));
        assert_eq!(r(" \"x\" lid 1 4xNDR"), Some((Some(3), None)));
        assert_eq!(r(" \"x\" lid 1 3xSDR"), Some((None, Some(1))));
        assert!(matches!(connection_info(" \"valid\""), ConnInfo::Absent));
        assert!(matches!(connection_info(" \"x\" lid"), ConnInfo::Unreadable(_)));
    }

    #[test]
    fn c_numbers() {
        let n = |s: &str| Cursor::new(s).c_uint_all();
        assert_eq!(n("0x1f"), Some(31));
        assert_eq!(n("010"), Some(8));
        assert_eq!(n("0"), Some(0));
        assert_eq!(n("12"), Some(12));
        assert_eq!(n("0x"), None);
        assert_eq!(n("99999999999999999999999"), None);
        assert_eq!(n("08"), None);
    }
}
