//! The libibumad backend: a real port, or ibsim through libumad2sim.
//!
//! libibumad is loaded at run time (libloading), so the binary builds and
//! runs the simulator on machines without rdma-core; asking for this
//! backend there is [`DeviceError::LibraryMissing`].
//!
//! Notes that shape the code:
//! - `umad_size()` changes when a port is opened (56 bytes before, 64 once
//!   the P_Key-aware ABI is enabled by `umad_open_port`), so it is read after
//!   opening and the MAD is located with `umad_get_mad()`, never by offset.
//! - Requests are sent with a kernel timeout and no kernel retries: the
//!   kernel drops responses for which it holds no outstanding send, while
//!   retries, windows and TIDs are the transaction layer's job. A send the
//!   kernel times out comes back with a non-zero umad status; those are
//!   skipped here.
//! - The IsSM capability is held by keeping the port's `issm` device open.
//!   It is opened with libc's `open`, not `std::fs::File::open`: libumad2sim
//!   interposes only `open`/`read`/`write`/`ioctl`/`poll`/`close`, and std
//!   calls `open64`.
//! - libumad2sim dereferences a null queue when a MAD arrives for a class no
//!   agent registered, so every class that can arrive is registered.
//! - libumad2sim's `write` blocks on ibsim's socket while holding the lock
//!   its receiver thread needs, so a deep enough window deadlocks the
//!   client: on ibsim 0.10, 448 SMPs in flight worked and 512 hung about
//!   half the time. Keep the window well below that on ibsim (OpenSM's 4
//!   is far below; tests/transport_umad.rs sweeps 1-64 without a loss).

#![allow(unsafe_code)]

mod ffi;

use std::ffi::{c_char, c_int, c_long, c_void, CString};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use super::{Datagram, DeviceError, DeviceReceiver, DeviceSender, LocalPort, MadAddress, MadDevice};
use crate::mad::{Method, MgmtClass, MAD_SIZE};
use crate::types::{Guid, Lid};

/// The soname loaded at run time.
pub const LIBRARY: &str = "libibumad.so.3";

/// Which local port to open.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub enum PortSelector {
    /// The first InfiniBand port that is Active, else the first whose
    /// physical link is up (an SM's port is not Active before an SM ran),
    /// else the first InfiniBand port.
    #[default]
    First,
    /// A CA by name; `port` None picks as `First` does among its ports.
    Ca { name: String, port: Option<u8> },
    /// The port with this port GUID, searched on every CA.
    Guid(Guid),
}

/// One agent to register on the port: a management class and version,
/// and whether it serves the class (receives its requests) or is a client
/// (receives only the responses to its own requests). A MAD of a class no
/// agent was registered for cannot be sent; one that arrives is dropped by
/// the kernel (and crashes libumad2sim, see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Agent {
    pub class: MgmtClass,
    pub version: u8,
    pub server: bool,
}

impl Agent {
    /// The SMI, version 1: directed-route (0x81) and LID-routed (0x01)
    /// SMPs. Its server receives SubnGet/SubnSet/Trap/TrapRepress (what an
    /// SM needs); a tool's client sees its own responses only and can share
    /// the port with a running SM.
    pub const fn smi(server: bool) -> [Agent; 2] {
        [
            Agent { class: MgmtClass::SubnMgmtDirected, version: 1, server },
            Agent { class: MgmtClass::SubnMgmtLid, version: 1, server },
        ]
    }

    /// Subnet administration (0x03), version 2. RMPP runs in ibsm
    /// (`crate::rmpp`), not the kernel: ibsim carries no kernel RMPP, and
    /// the kernel hands an agent registered without RMPP every active RMPP
    /// MAD, matched or not, so one implementation serves both.
    pub const fn sa(server: bool) -> Agent {
        Agent { class: MgmtClass::SubnAdm, version: 2, server }
    }

    /// Performance management (0x04), version 1.
    pub const fn perf_mgt(server: bool) -> Agent {
        Agent { class: MgmtClass::Perf, version: 1, server }
    }

    /// The request methods a server receives; none for a client.
    pub fn methods(&self) -> &'static [Method] {
        if !self.server {
            return &[];
        }
        match self.class {
            MgmtClass::SubnMgmtDirected | MgmtClass::SubnMgmtLid => {
                &[Method::Get, Method::Set, Method::Trap, Method::TrapRepress]
            }
            MgmtClass::SubnAdm => &[Method::Get, Method::Set, Method::GetTable, Method::GetMulti, Method::Delete],
            _ => &[Method::Get, Method::Set],
        }
    }

    /// The RMPP version the kernel runs for this agent: always 0, since
    /// ibsm segments and reassembles SA tables itself (see [`Agent::sa`]).
    pub fn rmpp_version(&self) -> u8 {
        0
    }
}

/// The agents to register for `wanted`, in its order, one per class: a
/// class listed twice is served if either entry is a server (a server
/// receives the responses to its own requests too).
fn one_per_class(wanted: &[Agent]) -> Vec<Agent> {
    let mut out: Vec<Agent> = Vec::with_capacity(wanted.len());
    for a in wanted {
        match out.iter_mut().find(|b| b.class == a.class) {
            Some(b) => b.server |= a.server,
            None => out.push(*a),
        }
    }
    out
}

/// How to open the port.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UmadConfig {
    pub port: PortSelector,
    /// Registered in this order (see [`one_per_class`] for repeats).
    pub agents: Vec<Agent>,
    /// The kernel's per-send response timeout; keep it at least as long as
    /// the transaction layer's, or late responses are dropped in the kernel.
    pub kernel_timeout: Duration,
}

impl Default for UmadConfig {
    /// A tool's port: SMI clients only.
    fn default() -> Self {
        UmadConfig {
            port: PortSelector::First,
            agents: Agent::smi(false).to_vec(),
            kernel_timeout: Duration::from_millis(1000),
        }
    }
}

/// What libibumad reports about a port.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct UmadPortInfo {
    pub ca_name: String,
    pub port_num: u8,
    pub node_type: u32,
    pub node_guid: Guid,
    pub port_guid: Guid,
    pub gid_prefix: u64,
    pub base_lid: Lid,
    pub lmc: u8,
    pub sm_lid: Lid,
    pub sm_sl: u8,
    /// PortState: 1 Down, 2 Init, 3 Armed, 4 Active.
    pub state: u32,
    /// PortPhysicalState: 5 LinkUp.
    pub phys_state: u32,
    pub capmask: u32,
    pub link_layer: String,
}

impl UmadPortInfo {
    pub fn is_infiniband(&self) -> bool {
        self.link_layer == "InfiniBand" || self.link_layer == "IB"
    }
}

/// PortInfo.CapabilityMask.IsSM (IBA 14.2.5.6, bit 1).
pub const CAPMASK_IS_SM: u32 = 1 << 1;

fn call_err(call: &'static str, ca: &str, port: u8, rc: c_int) -> DeviceError {
    let reason = if rc < 0 { std::io::Error::from_raw_os_error(-rc).to_string() } else { format!("returned {rc}") };
    DeviceError::Call { call, ca: ca.to_string(), port, reason }
}

fn lib() -> Result<&'static ffi::Lib, DeviceError> {
    ffi::lib().map_err(|(library, reason)| DeviceError::LibraryMissing { library, reason })
}

fn cstring(s: &str) -> Result<CString, DeviceError> {
    CString::new(s).map_err(|_| DeviceError::NoPort { hint: format!(": CA name {s:?} contains a NUL byte") })
}

/// The CA names libibumad knows.
pub fn ca_names() -> Result<Vec<String>, DeviceError> {
    let lib = lib()?;
    let mut names = [[0 as c_char; ffi::UMAD_CA_NAME_LEN]; ffi::UMAD_MAX_DEVICES];
    // SAFETY: `names` has room for UMAD_MAX_DEVICES names of
    // UMAD_CA_NAME_LEN chars, the count passed; libibumad NUL-terminates them.
    let n = unsafe { (lib.get_cas_names)(names.as_mut_ptr(), ffi::UMAD_MAX_DEVICES as c_int) };
    if n < 0 {
        return Err(call_err("umad_get_cas_names", "*", 0, n));
    }
    Ok(names[..n as usize].iter().map(|c| ffi::c_str(c)).collect())
}

/// Every port of CA `ca`, as libibumad reports them.
pub fn ca_ports(ca: &str) -> Result<Vec<UmadPortInfo>, DeviceError> {
    let lib = lib()?;
    let cname = cstring(ca)?;
    let mut raw = std::mem::MaybeUninit::<ffi::UmadCa>::zeroed();
    // SAFETY: `raw` is a writable umad_ca_t; `cname` is NUL-terminated. On
    // success libibumad fills it and allocates `ports[]`, freed below.
    let rc = unsafe { (lib.get_ca)(cname.as_ptr(), raw.as_mut_ptr()) };
    if rc < 0 {
        return Err(call_err("umad_get_ca", ca, 0, rc));
    }
    // SAFETY: umad_get_ca succeeded, so every field is initialised (the
    // buffer was zeroed first, so absent ports are null pointers).
    let mut ca_raw = unsafe { raw.assume_init() };
    let mut out = Vec::new();
    for &p in ca_raw.ports.iter() {
        if p.is_null() {
            continue;
        }
        // SAFETY: non-null entries of ports[] point to umad_port_t that
        // umad_get_ca allocated and filled; they live until umad_release_ca.
        let p = unsafe { &*p };
        out.push(UmadPortInfo {
            ca_name: ffi::c_str(&ca_raw.ca_name),
            port_num: p.portnum as u8,
            node_type: ca_raw.node_type,
            node_guid: Guid(u64::from_be(ca_raw.node_guid)),
            port_guid: Guid(u64::from_be(p.port_guid)),
            gid_prefix: u64::from_be(p.gid_prefix),
            base_lid: Lid(p.base_lid as u16),
            lmc: p.lmc as u8,
            sm_lid: Lid(p.sm_lid as u16),
            sm_sl: p.sm_sl as u8,
            state: p.state,
            phys_state: p.phys_state,
            capmask: u32::from_be(p.capmask),
            link_layer: ffi::c_str(&p.link_layer),
        });
    }
    // SAFETY: releases what umad_get_ca allocated, exactly once; the port
    // references above are no longer used.
    unsafe { (lib.release_ca)(&mut ca_raw) };
    Ok(out)
}

/// Every port of every CA.
pub fn all_ports() -> Result<Vec<UmadPortInfo>, DeviceError> {
    let mut all = Vec::new();
    for ca in ca_names()? {
        all.extend(ca_ports(&ca)?);
    }
    Ok(all)
}

/// Picks a port according to `sel` among `ports`; pure, so it is tested
/// without hardware.
pub fn select_port(ports: &[UmadPortInfo], sel: &PortSelector) -> Result<UmadPortInfo, DeviceError> {
    let candidates: Vec<&UmadPortInfo> = match sel {
        PortSelector::First => ports.iter().collect(),
        PortSelector::Ca { name, port } => {
            let on_ca: Vec<_> = ports.iter().filter(|p| &p.ca_name == name).collect();
            if on_ca.is_empty() {
                let known: Vec<_> = ports.iter().map(|p| p.ca_name.as_str()).collect();
                return Err(DeviceError::NoPort { hint: format!(": no CA named {name} (known: {known:?})") });
            }
            match port {
                Some(n) => {
                    let p = on_ca.iter().find(|p| p.port_num == *n).ok_or_else(|| DeviceError::NoPort {
                        hint: format!(
                            ": {name} has no port {n} (ports: {:?})",
                            on_ca.iter().map(|p| p.port_num).collect::<Vec<_>>()
                        ),
                    })?;
                    return check_ib(p);
                }
                None => on_ca,
            }
        }
        PortSelector::Guid(g) => {
            let p = ports
                .iter()
                .find(|p| p.port_guid == *g)
                .ok_or_else(|| DeviceError::NoPort { hint: format!(" with port GUID {g}") })?;
            return check_ib(p);
        }
    };
    let ib: Vec<_> = candidates.iter().copied().filter(|p| p.is_infiniband()).collect();
    if ib.is_empty() {
        return match candidates.first() {
            Some(p) => check_ib(p),
            None => Err(DeviceError::NoPort { hint: String::new() }),
        };
    }
    let pick = ib.iter().find(|p| p.state == 4).or_else(|| ib.iter().find(|p| p.phys_state == 5)).unwrap_or(&ib[0]);
    Ok((*pick).clone())
}

fn check_ib(p: &UmadPortInfo) -> Result<UmadPortInfo, DeviceError> {
    if p.is_infiniband() {
        Ok(p.clone())
    } else {
        Err(DeviceError::NotInfiniBand { ca: p.ca_name.clone(), port: p.port_num, link_layer: p.link_layer.clone() })
    }
}

/// A umad buffer: header plus MAD, 8-byte aligned for the C struct.
struct UmadBuf {
    words: Vec<u64>,
}

impl UmadBuf {
    fn new(bytes: usize) -> Self {
        UmadBuf { words: vec![0; bytes.div_ceil(8)] }
    }
    fn len(&self) -> usize {
        self.words.len() * 8
    }
    fn ptr(&mut self) -> *mut c_void {
        self.words.as_mut_ptr().cast()
    }
    fn zero(&mut self) {
        self.words.fill(0);
    }
}

/// An open umad port.
pub struct UmadDevice {
    lib: &'static ffi::Lib,
    fd: c_int,
    info: UmadPortInfo,
    /// `umad_size()` as it is after opening the port.
    hdr_len: usize,
    /// What `send` writes with; [`MadDevice::sender`] hands out copies.
    writer: UmadSender,
    /// What `recv` reads with, unless a receiver thread took the reading
    /// over ([`MadDevice::receiver`]).
    reader: UmadReader,
    issm_fd: Option<c_int>,
}

/// Reads MADs from an open umad port: the device's own, or a second one a
/// receiver thread waits on while the device sends from another thread
/// (the kernel's umad file takes concurrent read and write, as OpenSM's
/// receiver thread relies on; so does umad2sim). Each has its own buffer.
struct UmadReader {
    lib: &'static ffi::Lib,
    fd: c_int,
    ca: String,
    port: u8,
    hdr_len: usize,
    mad_off: usize,
    buf: UmadBuf,
    started: Instant,
    /// Kernel send completions skipped, shared by every reader of the port.
    skipped_send_completions: Arc<AtomicU64>,
}

fn method_mask(methods: &[Method]) -> [c_long; 2] {
    let mut mask = [0 as c_long; 2];
    let bits = c_long::BITS as usize;
    for &m in methods {
        let n = u8::from(m) as usize;
        mask[n / bits] |= 1 << (n % bits);
    }
    mask
}

impl UmadDevice {
    /// Opens the selected port and registers the agents `cfg` asks for.
    pub fn open(cfg: &UmadConfig) -> Result<UmadDevice, DeviceError> {
        let lib = lib()?;
        let ports = all_ports()?;
        let info = select_port(&ports, &cfg.port)?;
        let (ca, pn) = (info.ca_name.clone(), info.port_num);
        let cname = cstring(&ca)?;
        // SAFETY: `cname` is a NUL-terminated CA name; the call returns an fd
        // or a negative errno.
        let fd = unsafe { (lib.open_port)(cname.as_ptr(), c_int::from(pn)) };
        if fd < 0 {
            return Err(call_err("umad_open_port", &ca, pn, fd));
        }
        // SAFETY: no arguments; valid after umad_open_port (see module doc).
        let hdr_len = unsafe { (lib.size)() };
        let mut dev = UmadDevice {
            lib,
            fd,
            info,
            hdr_len,
            writer: UmadSender {
                lib,
                fd,
                agents: Vec::new(),
                mad_off: hdr_len,
                kernel_timeout_ms: cfg.kernel_timeout.as_millis().clamp(1, i32::MAX as u128) as c_int,
                ca: ca.clone(),
                port: pn,
                buf: UmadBuf::new(hdr_len + MAD_SIZE),
            },
            reader: UmadReader {
                lib,
                fd,
                ca: ca.clone(),
                port: pn,
                hdr_len,
                mad_off: hdr_len,
                buf: UmadBuf::new(hdr_len + MAD_SIZE),
                started: Instant::now(),
                skipped_send_completions: Arc::default(),
            },
            issm_fd: None,
        };
        let base = dev.writer.buf.ptr();
        // SAFETY: `base` points to a umad buffer of at least umad_size()
        // bytes; umad_get_mad only computes an address inside it.
        let mad = unsafe { (lib.get_mad)(base) };
        let mad_off = (mad as usize).wrapping_sub(base as usize);
        (dev.writer.mad_off, dev.reader.mad_off) = (mad_off, mad_off);
        if mad_off > dev.hdr_len {
            return Err(DeviceError::Call {
                call: "umad_get_mad",
                ca,
                port: pn,
                reason: format!("MAD offset {} beyond umad_size {}", mad_off, dev.hdr_len),
            });
        }
        for a in one_per_class(&cfg.agents) {
            let id = dev.register(a.class, a.version, a.rmpp_version(), a.methods())?;
            tracing::debug!(class = ?a.class, version = a.version, server = a.server, id, "umad agent registered");
            dev.writer.agents.push((a.class, id));
        }
        tracing::info!(
            ca = %dev.info.ca_name, port = pn, guid = %dev.info.port_guid, umad_size = hdr_len,
            "opened umad port"
        );
        Ok(dev)
    }

    fn register(&mut self, class: MgmtClass, version: u8, rmpp: u8, methods: &[Method]) -> Result<c_int, DeviceError> {
        let mut mask = method_mask(methods);
        // SAFETY: `self.fd` is an open umad port; `mask` is the long[2]
        // method mask umad_register reads.
        let id = unsafe {
            (self.lib.register)(self.fd, c_int::from(u8::from(class)), c_int::from(version), rmpp, mask.as_mut_ptr())
        };
        if id < 0 {
            return Err(call_err("umad_register", &self.info.ca_name, self.info.port_num, id));
        }
        Ok(id)
    }

    /// What libibumad reported about the port when it was opened.
    pub fn port_info(&self) -> &UmadPortInfo {
        &self.info
    }

    /// Re-reads the port's LID, SM LID, state and capability mask (they
    /// change as an SM configures the port). Under libumad2sim the sysfs
    /// copy is written once at start, so nothing changes there.
    pub fn refresh_port_info(&mut self) -> Result<&UmadPortInfo, DeviceError> {
        let cname = cstring(&self.info.ca_name)?;
        let mut raw = std::mem::MaybeUninit::<ffi::UmadPort>::zeroed();
        // SAFETY: `raw` is a writable umad_port_t; on success libibumad fills
        // it and allocates `pkeys`, released below.
        let rc = unsafe { (self.lib.get_port)(cname.as_ptr(), c_int::from(self.info.port_num), raw.as_mut_ptr()) };
        if rc < 0 {
            return Err(self.err("umad_get_port", rc));
        }
        // SAFETY: umad_get_port succeeded, so the struct is initialised.
        let mut p = unsafe { raw.assume_init() };
        self.info.base_lid = Lid(p.base_lid as u16);
        self.info.lmc = p.lmc as u8;
        self.info.sm_lid = Lid(p.sm_lid as u16);
        self.info.sm_sl = p.sm_sl as u8;
        self.info.state = p.state;
        self.info.phys_state = p.phys_state;
        self.info.capmask = u32::from_be(p.capmask);
        self.info.gid_prefix = u64::from_be(p.gid_prefix);
        // SAFETY: releases what umad_get_port allocated, once.
        unsafe { (self.lib.release_port)(&mut p) };
        Ok(&self.info)
    }

    /// `umad_size()` after opening (64 with the P_Key ABI, 56 without).
    pub fn umad_size(&self) -> usize {
        self.hdr_len
    }

    /// The path of this port's issm device.
    pub fn issm_path(&self) -> Result<String, DeviceError> {
        let cname = cstring(&self.info.ca_name)?;
        let mut path = [0 as c_char; 256];
        // SAFETY: `path` has room for the 256 chars passed as its size.
        let rc = unsafe {
            (self.lib.get_issm_path)(
                cname.as_ptr(),
                c_int::from(self.info.port_num),
                path.as_mut_ptr(),
                path.len() as c_int,
            )
        };
        if rc < 0 {
            return Err(call_err("umad_get_issm_path", &self.info.ca_name, self.info.port_num, rc));
        }
        Ok(ffi::c_str(&path))
    }

    /// Sets or clears the port's CapabilityMask.IsSM by holding its issm
    /// device open (the kernel sets the bit while it is open). Fails with
    /// EAGAIN while another process holds it.
    pub fn set_is_sm(&mut self, on: bool) -> Result<(), DeviceError> {
        match (on, self.issm_fd) {
            (true, None) => {
                let path = self.issm_path()?;
                let cpath = CString::new(path.clone()).expect("from a C string");
                // SAFETY: `cpath` is NUL-terminated; libc's `open` (which
                // libumad2sim interposes) returns an fd or -1.
                let fd = unsafe { libc::open(cpath.as_ptr(), libc::O_RDWR | libc::O_NONBLOCK) };
                if fd < 0 {
                    let e = std::io::Error::last_os_error();
                    return Err(DeviceError::Call {
                        call: "open(issm)",
                        ca: self.info.ca_name.clone(),
                        port: self.info.port_num,
                        reason: format!("{path}: {e}"),
                    });
                }
                self.issm_fd = Some(fd);
                tracing::info!(%path, "IsSM set");
            }
            (false, Some(fd)) => {
                // SAFETY: `fd` came from open() above and is closed once.
                unsafe { libc::close(fd) };
                self.issm_fd = None;
                tracing::info!("IsSM cleared");
            }
            _ => {}
        }
        Ok(())
    }

    pub fn is_sm(&self) -> bool {
        self.issm_fd.is_some()
    }

    /// Kernel send completions (timed-out sends) skipped by `recv`.
    pub fn skipped_send_completions(&self) -> u64 {
        self.reader.skipped_send_completions.load(Ordering::Relaxed)
    }

    fn err(&self, call: &'static str, rc: c_int) -> DeviceError {
        call_err(call, &self.info.ca_name, self.info.port_num, rc)
    }
}

impl UmadReader {
    fn now(&self) -> Duration {
        self.started.elapsed()
    }

    fn err(&self, call: &'static str, rc: c_int) -> DeviceError {
        call_err(call, &self.ca, self.port, rc)
    }

    /// Reads one umad that poll said is ready, growing the buffer for a
    /// reassembled RMPP payload if the kernel asks for more room.
    fn read_one(&mut self) -> Result<Option<Datagram>, DeviceError> {
        loop {
            self.buf.zero();
            let mut len = (self.buf.len() - self.hdr_len) as c_int;
            let p = self.buf.ptr();
            // SAFETY: `p` is a zeroed umad buffer of umad_size() + len bytes,
            // the length umad_recv may write; timeout 0 means no wait.
            let rc = unsafe { (self.lib.recv)(self.fd, p, &mut len, 0) };
            if rc < 0 {
                if rc == -libc::ENOSPC && len as usize > self.buf.len() - self.hdr_len {
                    self.buf = UmadBuf::new(self.hdr_len + len as usize);
                    continue;
                }
                if rc == -libc::EWOULDBLOCK || rc == -libc::EAGAIN {
                    return Ok(None);
                }
                return Err(self.err("umad_recv", rc));
            }
            // SAFETY: `p` holds the umad just received.
            let status = unsafe { (self.lib.status)(p) };
            if status != 0 {
                // A send of ours came back from the kernel (typically
                // ETIMEDOUT); the transaction layer runs its own timers.
                self.skipped_send_completions.fetch_add(1, Ordering::Relaxed);
                tracing::trace!(status, "kernel send completion skipped");
                return Ok(None);
            }
            // SAFETY: `p` is a received umad; the address lies inside it.
            let a = unsafe { &*(self.lib.get_mad_addr)(p) };
            // SAFETY: as above; 0 when the P_Key ABI is off.
            let pkey_index = unsafe { (self.lib.get_pkey)(p) };
            let addr = received_address(a, pkey_index as u16);
            let n = (len.max(0) as usize).min(self.buf.len() - self.mad_off);
            let bytes: &[u8] = {
                let all = self.buf.words.as_slice();
                // SAFETY: viewing the u64 buffer as bytes; u8 has no
                // alignment or validity requirements and the length is the
                // buffer's byte length.
                unsafe { std::slice::from_raw_parts(all.as_ptr().cast::<u8>(), all.len() * 8) }
            };
            return Ok(Some(Datagram { addr, mad: bytes[self.mad_off..self.mad_off + n].to_vec() }));
        }
    }

    /// Waits until `deadline` (time since the port opened) for one MAD.
    fn recv(&mut self, deadline: Duration) -> Result<Option<Datagram>, DeviceError> {
        loop {
            let now = self.now();
            let wait = deadline.saturating_sub(now);
            // Round up so a sub-millisecond wait does not become a busy poll.
            let ms = wait.as_micros().div_ceil(1000).min(i32::MAX as u128) as c_int;
            // SAFETY: plain call on our open fd.
            let rc = unsafe { (self.lib.poll)(self.fd, ms) };
            if rc == -libc::ETIMEDOUT {
                return Ok(None);
            }
            if rc < 0 {
                return Err(self.err("umad_poll", rc));
            }
            match self.read_one()? {
                Some(d) => return Ok(Some(d)),
                // Nothing usable (a kernel completion or a spurious wake):
                // wait again if time is left.
                None if self.now() < deadline => continue,
                None => return Ok(None),
            }
        }
    }
}

impl DeviceReceiver for UmadReader {
    fn recv(&mut self, wait: Duration) -> Result<Option<Datagram>, DeviceError> {
        let deadline = self.now() + wait;
        UmadReader::recv(self, deadline)
    }
}

/// Writes MADs on an open port: the device's own writer, or a copy with
/// its own buffer that another thread sends with (the kernel's umad file,
/// and umad2sim's, take concurrent writes).
struct UmadSender {
    lib: &'static ffi::Lib,
    fd: c_int,
    agents: Vec<(MgmtClass, c_int)>,
    mad_off: usize,
    kernel_timeout_ms: c_int,
    ca: String,
    port: u8,
    buf: UmadBuf,
}

impl DeviceSender for UmadSender {
    fn send(&mut self, d: &Datagram) -> Result<(), DeviceError> {
        let class = d.mad.get(1).copied().map(MgmtClass::from).unwrap_or(MgmtClass::Unknown(0));
        let method = d.mad.get(3).copied().map(Method::from).unwrap_or(Method::Unknown(0));
        let agent =
            self.agents.iter().find(|(c, _)| *c == class).map(|&(_, id)| id).ok_or_else(|| DeviceError::Call {
                call: "umad_send",
                ca: self.ca.clone(),
                port: self.port,
                reason: format!("no agent registered for class {class:?}"),
            })?;
        if self.buf.len() < self.mad_off + d.mad.len() {
            self.buf = UmadBuf::new(self.mad_off + d.mad.len());
        }
        self.buf.zero();
        let p = self.buf.ptr();
        // SAFETY: the buffer holds mad_off + len bytes, so the copy stays in
        // bounds; umad_set_addr/umad_set_pkey write header fields only.
        unsafe {
            std::ptr::copy_nonoverlapping(d.mad.as_ptr(), p.cast::<u8>().add(self.mad_off), d.mad.len());
            (self.lib.set_addr)(
                p,
                c_int::from(d.addr.lid.0),
                d.addr.qpn as c_int,
                c_int::from(d.addr.sl),
                d.addr.qkey as c_int,
            );
            (self.lib.set_pkey)(p, c_int::from(d.addr.pkey_index));
        }
        // Only requests wait in the kernel for a response (see module doc).
        let expects_response = !method.is_response() && method != Method::Send;
        let timeout = if expects_response { self.kernel_timeout_ms } else { 0 };
        // SAFETY: `p` is a complete umad of umad_size() + len bytes.
        let rc = unsafe { (self.lib.send)(self.fd, agent, p, d.mad.len() as c_int, timeout, 0) };
        if rc < 0 {
            return Err(call_err("umad_send", &self.ca, self.port, rc));
        }
        Ok(())
    }
}

/// Where a received MAD came from, as the kernel's `ib_mad_addr` says
/// (big-endian fields), and the Q_Key a reply to it takes: ib_umad never
/// fills in the Q_Key of a received MAD (its `recv_handler` copies QPN,
/// LID, SL, path bits and P_Key index, not the Q_Key), so the field reads
/// 0; a MAD from QP1 came from a GSI, whose Q_Key is always the well-known
/// 0x80010000, so that is set here once for every user of the address
/// (answers, RMPP ACKs and segments, Reports).
fn received_address(a: &ffi::IbMadAddr, pkey_index: u16) -> MadAddress {
    let qpn = u32::from_be(a.qpn) & 0x00ff_ffff;
    let qkey = if qpn == 1 { MadAddress::QP1_QKEY } else { u32::from_be(a.qkey) };
    MadAddress { lid: Lid(u16::from_be(a.lid)), qpn, qkey, sl: a.sl, pkey_index }
}

impl MadDevice for UmadDevice {
    fn now(&self) -> Duration {
        self.reader.now()
    }

    fn send(&mut self, d: &Datagram) -> Result<(), DeviceError> {
        self.writer.send(d)
    }

    /// A second writer on the same port, for tasks that answer requests
    /// from their own thread. The I/O thread takes it away before the
    /// device closes.
    fn sender(&mut self) -> Option<Box<dyn DeviceSender>> {
        let w = &self.writer;
        Some(Box::new(UmadSender { agents: w.agents.clone(), ca: w.ca.clone(), buf: UmadBuf::new(w.buf.len()), ..*w }))
    }

    fn recv(&mut self, deadline: Duration) -> Result<Option<Datagram>, DeviceError> {
        self.reader.recv(deadline)
    }

    /// A second reader on the same port, for a receiver thread. The device
    /// must outlive it: the I/O thread joins that thread before dropping
    /// the device, whose drop closes the port.
    fn receiver(&mut self) -> Option<Box<dyn DeviceReceiver>> {
        let r = &self.reader;
        Some(Box::new(UmadReader {
            lib: r.lib,
            fd: r.fd,
            ca: r.ca.clone(),
            port: r.port,
            hdr_len: r.hdr_len,
            mad_off: r.mad_off,
            buf: UmadBuf::new(r.buf.len()),
            started: r.started,
            skipped_send_completions: r.skipped_send_completions.clone(),
        }))
    }

    fn local_port(&self) -> LocalPort {
        LocalPort {
            ca_name: self.info.ca_name.clone(),
            port_num: self.info.port_num,
            port_guid: self.info.port_guid,
            node_guid: self.info.node_guid,
            lid: self.info.base_lid,
            sm_lid: self.info.sm_lid,
        }
    }
}

/// Whether libibumad's calls go to ibsim's umad2sim (preloaded in front of
/// libc, as every ibsim client runs).
pub fn under_umad2sim() -> bool {
    std::env::var_os("LD_PRELOAD").is_some_and(|p| p.to_string_lossy().contains("umad2sim"))
}

/// How long umad2sim's exit handler may take before the process leaves
/// without it (see [`exit_process`]); its normal work is one round trip to
/// ibsim.
const UMAD2SIM_EXIT_GRACE: std::time::Duration = std::time::Duration::from_secs(3);

/// Ends the process with `code` once its work is done (devices closed).
///
/// Under umad2sim, libc's exit handlers run, and umad2sim's disconnects
/// this client from ibsim (ibsim keeps a node's client until it does, so
/// the next client on that node needs it). That handler then takes its
/// device lock and cancels and joins its receiver thread; the thread takes
/// the same lock after every packet it reads, and a lock wait is no
/// cancellation point. A MAD that ibsim delivers in that window (a late
/// answer to a retried request) leaves both threads waiting for each
/// other: seen as `ibsm sa` printing its answer and never exiting. So a
/// watchdog leaves the process, without the handlers, if they have not
/// finished in [`UMAD2SIM_EXIT_GRACE`] (the disconnect is sent before the
/// join), removing the simulated sysfs (`./sys-<pid>`) the handler would
/// have removed last. On a real port the exit is the ordinary one.
pub fn exit_process(code: u8) -> ! {
    use std::io::Write;
    let _ = std::io::stdout().flush();
    let _ = std::io::stderr().flush();
    if under_umad2sim() {
        let sysfs = format!("./sys-{}", std::process::id());
        std::thread::spawn(move || {
            std::thread::sleep(UMAD2SIM_EXIT_GRACE);
            let _ = std::fs::remove_dir_all(&sysfs);
            // SAFETY: _exit ends the process at once. Everything of ours
            // that needed running has run: the caller returned from its
            // work, every device is closed and the standard streams were
            // flushed; only umad2sim's stuck exit handler is cut short.
            unsafe { libc::_exit(c_int::from(code)) }
        });
    }
    std::process::exit(i32::from(code))
}

impl Drop for UmadDevice {
    fn drop(&mut self) {
        let _ = self.set_is_sm(false);
        // SAFETY: closes the fd opened in `open`, once; agents go with it.
        unsafe { (self.lib.close_port)(self.fd) };
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn port(ca: &str, n: u8, guid: u64, state: u32, phys: u32, ll: &str) -> UmadPortInfo {
        UmadPortInfo {
            ca_name: ca.into(),
            port_num: n,
            node_type: 1,
            node_guid: Guid(guid & !0xff),
            port_guid: Guid(guid),
            gid_prefix: 0xfe80_0000_0000_0000,
            base_lid: Lid(0),
            lmc: 0,
            sm_lid: Lid(0),
            sm_sl: 0,
            state,
            phys_state: phys,
            capmask: 0,
            link_layer: ll.into(),
        }
    }

    fn fabric() -> Vec<UmadPortInfo> {
        vec![
            port("mlx5_0", 1, 0x101, 1, 3, "Ethernet"),
            port("mlx5_1", 1, 0x201, 2, 5, "InfiniBand"),
            port("mlx5_1", 2, 0x202, 4, 5, "InfiniBand"),
            port("mlx5_2", 1, 0x301, 1, 2, "IB"),
        ]
    }

    #[test]
    fn first_prefers_active_then_link_up_and_skips_ethernet() {
        assert_eq!(select_port(&fabric(), &PortSelector::First).unwrap().port_guid, Guid(0x202));
        let mut f = fabric();
        f[2].state = 2;
        f[2].phys_state = 2;
        assert_eq!(select_port(&f, &PortSelector::First).unwrap().port_guid, Guid(0x201));
        f[1].phys_state = 2;
        assert_eq!(select_port(&f, &PortSelector::First).unwrap().port_guid, Guid(0x201), "first IB port");
        assert!(matches!(select_port(&[], &PortSelector::First), Err(DeviceError::NoPort { .. })));
    }

    #[test]
    fn ethernet_ports_are_refused_with_a_reason() {
        let sel = PortSelector::Ca { name: "mlx5_0".into(), port: Some(1) };
        let e = select_port(&fabric(), &sel).unwrap_err();
        assert!(matches!(&e, DeviceError::NotInfiniBand { link_layer, .. } if link_layer == "Ethernet"));
        assert!(e.to_string().contains("RoCE"), "{e}");
        let only_eth = vec![fabric()[0].clone()];
        assert!(matches!(select_port(&only_eth, &PortSelector::First), Err(DeviceError::NotInfiniBand { .. })));
        let e = select_port(&fabric(), &PortSelector::Guid(Guid(0x101))).unwrap_err();
        assert!(matches!(e, DeviceError::NotInfiniBand { .. }));
    }

    #[test]
    fn by_name_port_and_guid() {
        let f = fabric();
        let sel = PortSelector::Ca { name: "mlx5_1".into(), port: Some(1) };
        assert_eq!(select_port(&f, &sel).unwrap().port_guid, Guid(0x201));
        let sel = PortSelector::Ca { name: "mlx5_1".into(), port: None };
        assert_eq!(select_port(&f, &sel).unwrap().port_guid, Guid(0x202));
        assert_eq!(select_port(&f, &PortSelector::Guid(Guid(0x301))).unwrap().ca_name, "mlx5_2");
        let e = select_port(&f, &PortSelector::Ca { name: "mlx5_1".into(), port: Some(3) }).unwrap_err();
        assert!(e.to_string().contains("no port 3"), "{e}");
        let e = select_port(&f, &PortSelector::Ca { name: "qib0".into(), port: None }).unwrap_err();
        assert!(e.to_string().contains("no CA named qib0"), "{e}");
        let e = select_port(&f, &PortSelector::Guid(Guid(0x999))).unwrap_err();
        assert!(e.to_string().contains("0x0000000000000999"), "{e}");
    }

    #[test]
    fn received_mads_from_qp1_take_the_gsi_q_key() {
        let raw = |qpn: u32, qkey: u32| ffi::IbMadAddr {
            qpn: qpn.to_be(),
            qkey: qkey.to_be(),
            lid: 0x0012u16.to_be(),
            sl: 3,
            path_bits: 0,
            grh_present: 0,
            gid_index: 0,
            hop_limit: 0,
            traffic_class: 0,
            gid: [0; 16],
            flow_label: 0,
            pkey_index: 0,
            reserved: [0; 6],
        };
        // What the kernel hands up: no Q_Key.
        let a = received_address(&raw(1, 0), 2);
        assert_eq!(a, MadAddress { lid: Lid(0x12), qpn: 1, qkey: MadAddress::QP1_QKEY, sl: 3, pkey_index: 2 });
        // Another QP keeps what it says; the QPN is 24 bits.
        let b = received_address(&raw(0xAB00_0042, 0x1234), 0);
        assert_eq!((b.qpn, b.qkey), (0x42, 0x1234));
        assert_eq!(received_address(&raw(0xFF00_0001, 0), 0).qkey, MadAddress::QP1_QKEY);
    }

    #[test]
    fn agents_serve_what_their_class_needs() {
        let [dr, lid] = Agent::smi(true);
        assert_eq!(
            (dr.class, dr.version, lid.class, lid.version),
            (MgmtClass::SubnMgmtDirected, 1, MgmtClass::SubnMgmtLid, 1)
        );
        assert_eq!(method_mask(dr.methods())[0], 0b1010_0110, "SubnGet, SubnSet, Trap, TrapRepress");
        assert_eq!((dr.rmpp_version(), lid.methods()), (0, dr.methods()));
        let sa = Agent::sa(true);
        assert_eq!((sa.version, sa.rmpp_version()), (2, 0), "RMPP runs in ibsm, not the kernel");
        assert_eq!(sa.methods(), &[Method::Get, Method::Set, Method::GetTable, Method::GetMulti, Method::Delete]);
        assert_eq!(Agent::sa(false).rmpp_version(), 0, "a client reassembles tables itself too");
        let pm = Agent::perf_mgt(false);
        assert_eq!((pm.class, pm.version, pm.rmpp_version()), (MgmtClass::Perf, 1, 0));
        for client in [Agent::smi(false)[0], Agent::smi(false)[1], Agent::sa(false), pm] {
            assert!(client.methods().is_empty(), "{client:?} receives no requests");
        }
        assert_eq!(UmadConfig::default().agents, Agent::smi(false), "a tool's port");
    }

    #[test]
    fn one_agent_per_class_and_a_server_wins() {
        let list = [Agent::sa(false), Agent::smi(false)[0], Agent::sa(true), Agent::perf_mgt(false), Agent::sa(false)];
        assert_eq!(one_per_class(&list), vec![Agent::sa(true), Agent::smi(false)[0], Agent::perf_mgt(false)]);
        assert!(one_per_class(&[]).is_empty());
    }

    #[test]
    fn method_masks_set_the_method_bits() {
        let m = method_mask(&[Method::Get, Method::Set, Method::Trap, Method::TrapRepress]);
        assert_eq!(m[0], 0b1010_0110);
        assert_eq!(m[1], 0);
        let m = method_mask(&[Method::GetTable, Method::Delete]);
        assert_eq!(m[0], (1 << 0x12) | (1 << 0x15));
    }
}
