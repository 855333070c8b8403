//! The slice of libibumad's C API ibsm uses, resolved at run time.
//!
//! Layouts follow `<infiniband/umad.h>` (rdma-core, ABI version 5); the
//! offsets are pinned by the const assertions below, checked against the
//! installed header with `offsetof` (x86_64 and aarch64 LP64 agree).

use std::ffi::{c_char, c_int, c_long, c_uint, c_void};
use std::sync::OnceLock;

use libloading::Library;

pub const UMAD_CA_NAME_LEN: usize = 20;
pub const UMAD_CA_MAX_PORTS: usize = 10;
pub const UMAD_MAX_DEVICES: usize = 32;

/// `umad_port_t`.
#[repr(C)]
pub struct UmadPort {
    pub ca_name: [c_char; UMAD_CA_NAME_LEN],
    pub portnum: c_int,
    pub base_lid: c_uint,
    pub lmc: c_uint,
    pub sm_lid: c_uint,
    pub sm_sl: c_uint,
    pub state: c_uint,
    pub phys_state: c_uint,
    pub rate: c_uint,
    /// Big-endian.
    pub capmask: u32,
    /// Big-endian.
    pub gid_prefix: u64,
    /// Big-endian.
    pub port_guid: u64,
    pub pkeys_size: c_uint,
    pub pkeys: *mut u16,
    pub link_layer: [c_char; UMAD_CA_NAME_LEN],
}

/// `umad_ca_t`.
#[repr(C)]
pub struct UmadCa {
    pub ca_name: [c_char; UMAD_CA_NAME_LEN],
    pub node_type: c_uint,
    pub numports: c_int,
    pub fw_ver: [c_char; 20],
    pub ca_type: [c_char; 40],
    pub hw_ver: [c_char; 20],
    /// Big-endian.
    pub node_guid: u64,
    /// Big-endian.
    pub system_guid: u64,
    pub ports: [*mut UmadPort; UMAD_CA_MAX_PORTS],
}

/// `ib_mad_addr_t` (packed GID union, 44 bytes).
#[repr(C)]
pub struct IbMadAddr {
    /// Big-endian.
    pub qpn: u32,
    /// Big-endian.
    pub qkey: u32,
    /// Big-endian.
    pub lid: u16,
    pub sl: u8,
    pub path_bits: u8,
    pub grh_present: u8,
    pub gid_index: u8,
    pub hop_limit: u8,
    pub traffic_class: u8,
    pub gid: [u8; 16],
    pub flow_label: u32,
    pub pkey_index: u16,
    pub reserved: [u8; 6],
}

const _: () = {
    assert!(std::mem::size_of::<UmadPort>() == 112);
    assert!(std::mem::offset_of!(UmadPort, capmask) == 52);
    assert!(std::mem::offset_of!(UmadPort, gid_prefix) == 56);
    assert!(std::mem::offset_of!(UmadPort, port_guid) == 64);
    assert!(std::mem::offset_of!(UmadPort, pkeys) == 80);
    assert!(std::mem::offset_of!(UmadPort, link_layer) == 88);
    assert!(std::mem::size_of::<UmadCa>() == 208);
    assert!(std::mem::offset_of!(UmadCa, numports) == 24);
    assert!(std::mem::offset_of!(UmadCa, node_guid) == 112);
    assert!(std::mem::offset_of!(UmadCa, ports) == 128);
    assert!(std::mem::size_of::<IbMadAddr>() == 44);
    assert!(std::mem::offset_of!(IbMadAddr, lid) == 8);
    assert!(std::mem::offset_of!(IbMadAddr, pkey_index) == 36);
};

/// The resolved entry points. The `Library` is kept alive with them.
pub struct Lib {
    _lib: Library,
    pub get_cas_names: unsafe extern "C" fn(*mut [c_char; UMAD_CA_NAME_LEN], c_int) -> c_int,
    pub get_ca: unsafe extern "C" fn(*const c_char, *mut UmadCa) -> c_int,
    pub release_ca: unsafe extern "C" fn(*mut UmadCa) -> c_int,
    pub get_port: unsafe extern "C" fn(*const c_char, c_int, *mut UmadPort) -> c_int,
    pub release_port: unsafe extern "C" fn(*mut UmadPort) -> c_int,
    pub get_issm_path: unsafe extern "C" fn(*const c_char, c_int, *mut c_char, c_int) -> c_int,
    pub open_port: unsafe extern "C" fn(*const c_char, c_int) -> c_int,
    pub close_port: unsafe extern "C" fn(c_int) -> c_int,
    pub register: unsafe extern "C" fn(c_int, c_int, c_int, u8, *mut c_long) -> c_int,
    pub send: unsafe extern "C" fn(c_int, c_int, *mut c_void, c_int, c_int, c_int) -> c_int,
    pub recv: unsafe extern "C" fn(c_int, *mut c_void, *mut c_int, c_int) -> c_int,
    pub poll: unsafe extern "C" fn(c_int, c_int) -> c_int,
    pub get_mad: unsafe extern "C" fn(*mut c_void) -> *mut c_void,
    pub get_mad_addr: unsafe extern "C" fn(*mut c_void) -> *mut IbMadAddr,
    pub size: unsafe extern "C" fn() -> usize,
    pub status: unsafe extern "C" fn(*mut c_void) -> c_int,
    pub set_addr: unsafe extern "C" fn(*mut c_void, c_int, c_int, c_int, c_int) -> c_int,
    pub set_pkey: unsafe extern "C" fn(*mut c_void, c_int) -> c_int,
    pub get_pkey: unsafe extern "C" fn(*mut c_void) -> c_int,
}

/// Copies one symbol's address out of `lib`.
///
/// # Safety
/// `T` must be the function pointer type matching the C declaration of
/// `name` in umad.h.
unsafe fn sym<T: Copy>(lib: &Library, name: &str) -> Result<T, String> {
    let mut cname = name.as_bytes().to_vec();
    cname.push(0);
    // SAFETY: the caller guarantees that T matches the symbol's C type; the
    // copied pointer stays valid because `Lib` keeps `lib` loaded.
    unsafe { lib.get::<T>(&cname).map(|s| *s).map_err(|e| format!("symbol {name}: {e}")) }
}

impl Lib {
    fn load(name: &str) -> Result<Lib, String> {
        // SAFETY: loading libibumad runs only its ELF constructors, which
        // have no preconditions (it has no global state beyond a debug level).
        let lib = unsafe { Library::new(name) }.map_err(|e| e.to_string())?;
        // SAFETY: each type below is the umad.h prototype of the symbol named
        // beside it; umad_init takes no arguments and only resets state.
        unsafe {
            let init: unsafe extern "C" fn() -> c_int = sym(&lib, "umad_init")?;
            if init() < 0 {
                return Err("umad_init failed".into());
            }
            Ok(Lib {
                get_cas_names: sym(&lib, "umad_get_cas_names")?,
                get_ca: sym(&lib, "umad_get_ca")?,
                release_ca: sym(&lib, "umad_release_ca")?,
                get_port: sym(&lib, "umad_get_port")?,
                release_port: sym(&lib, "umad_release_port")?,
                get_issm_path: sym(&lib, "umad_get_issm_path")?,
                open_port: sym(&lib, "umad_open_port")?,
                close_port: sym(&lib, "umad_close_port")?,
                register: sym(&lib, "umad_register")?,
                send: sym(&lib, "umad_send")?,
                recv: sym(&lib, "umad_recv")?,
                poll: sym(&lib, "umad_poll")?,
                get_mad: sym(&lib, "umad_get_mad")?,
                get_mad_addr: sym(&lib, "umad_get_mad_addr")?,
                size: sym(&lib, "umad_size")?,
                status: sym(&lib, "umad_status")?,
                set_addr: sym(&lib, "umad_set_addr")?,
                set_pkey: sym(&lib, "umad_set_pkey")?,
                get_pkey: sym(&lib, "umad_get_pkey")?,
                _lib: lib,
            })
        }
    }
}

/// The library name to load: `IBSM_LIBIBUMAD` overrides the soname (tests
/// use it to exercise the missing-library path on machines that have it).
pub fn library_name() -> String {
    std::env::var("IBSM_LIBIBUMAD").unwrap_or_else(|_| super::LIBRARY.to_string())
}

/// The process-wide library, loaded on first use.
pub fn lib() -> Result<&'static Lib, (String, String)> {
    static LIB: OnceLock<Result<Lib, (String, String)>> = OnceLock::new();
    LIB.get_or_init(|| {
        let name = library_name();
        Lib::load(&name).map_err(|reason| (name, reason))
    })
    .as_ref()
    .map_err(Clone::clone)
}

/// A NUL-terminated C char array as a Rust string (lossy).
pub fn c_str(chars: &[c_char]) -> String {
    let bytes: Vec<u8> = chars.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}
