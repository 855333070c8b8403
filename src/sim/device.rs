//! A MAD endpoint on a simulated port: what an SM (or SA) uses instead of
//! libibumad.

use std::sync::MutexGuard;
use std::time::Duration;

use super::fabric::{DevId, DeviceSlot, Fabric, PortId, SharedFabric};
use super::SimError;
use crate::mad::port_info::CapabilityMask;
use crate::mad::SmInfoRepr;
use crate::topology::{NodeIdx, NodeKind, PortRef};
use crate::transport::{Datagram, DeviceError, LocalPort, MadDevice};
use crate::types::Guid;

/// How to name the node a device attaches to.
#[derive(Debug, Clone, Copy)]
pub enum NodeSel<'a> {
    Name(&'a str),
    Guid(Guid),
    Idx(NodeIdx),
}

impl<'a> From<&'a str> for NodeSel<'a> {
    fn from(s: &'a str) -> Self {
        NodeSel::Name(s)
    }
}
impl From<Guid> for NodeSel<'_> {
    fn from(g: Guid) -> Self {
        NodeSel::Guid(g)
    }
}
impl From<NodeIdx> for NodeSel<'_> {
    fn from(n: NodeIdx) -> Self {
        NodeSel::Idx(n)
    }
}

/// A device attached to one port of a shared fabric. Time is the fabric's
/// virtual clock: `recv` runs the fabric's events up to its deadline instead
/// of sleeping. Several devices (several SMs, an SM and an SA client) may
/// share one fabric; each has its own queue. Dropping it detaches it.
pub struct SimDevice {
    fabric: SharedFabric,
    id: DevId,
    port: PortRef,
}

fn lock(f: &SharedFabric) -> MutexGuard<'_, Fabric> {
    f.lock().unwrap_or_else(|e| e.into_inner())
}

impl SimDevice {
    /// Attaches to `port` of `node` (a CA or router port 1..=N, or port 0
    /// of a switch).
    pub fn attach<'a>(fabric: &SharedFabric, node: impl Into<NodeSel<'a>>, port: u8) -> Result<SimDevice, SimError> {
        let mut f = lock(fabric);
        let sel = node.into();
        let idx = match sel {
            NodeSel::Name(n) => f.node_by_name(n).ok_or_else(|| SimError::NoSuchNode(n.to_string()))?,
            NodeSel::Guid(g) => f.node_by_guid(g).ok_or_else(|| SimError::NoSuchNode(g.to_string()))?,
            NodeSel::Idx(i) if i.0 < f.num_nodes() => i,
            NodeSel::Idx(i) => return Err(SimError::NoSuchNode(format!("#{}", i.0))),
        };
        let is_switch = f.nodes[idx.0].kind == NodeKind::Switch;
        if is_switch != (port == 0) {
            return Err(SimError::NoSuchPort { node: idx, port });
        }
        let r = PortRef { node: idx, port };
        let pid = f.resolve(r)?;
        let id = DevId(f.devices.len() as u32);
        f.devices.push(DeviceSlot {
            port: pid,
            mailbox: Default::default(),
            sm_info: None,
            is_sm: false,
            attached: true,
        });
        f.port_devices.entry(pid).or_default().push(id);
        drop(f);
        Ok(SimDevice { fabric: fabric.clone(), id, port: r })
    }

    /// The fabric this device is attached to.
    pub fn fabric(&self) -> &SharedFabric {
        &self.fabric
    }

    /// Where the device is attached.
    pub fn port_ref(&self) -> PortRef {
        self.port
    }

    /// Marks the port as running an SM (PortInfo.CapabilityMask.IsSM, which
    /// SMs look for to find each other).
    pub fn set_is_sm(&self, is_sm: bool) {
        let mut f = lock(&self.fabric);
        let pid = f.devices[self.id.0 as usize].port;
        f.devices[self.id.0 as usize].is_sm = is_sm;
        let any = f.port_devices.get(&pid).is_some_and(|ds| ds.iter().any(|d| f.devices[d.0 as usize].is_sm));
        let pi = &mut f.port_mut(pid).pi;
        if any {
            pi.capability_mask |= CapabilityMask::IS_SM;
        } else {
            pi.capability_mask &= !CapabilityMask::IS_SM;
        }
    }

    /// Registers the SMInfo the fabric answers SubnGet(SMInfo) with at this
    /// port (None withdraws it; then Gets reach `recv`). SubnSet(SMInfo)
    /// always reaches `recv`. Registering also sets IsSM.
    pub fn set_sm_info(&self, info: Option<SmInfoRepr>) {
        lock(&self.fabric).devices[self.id.0 as usize].sm_info = info;
        if info.is_some() {
            self.set_is_sm(true);
        }
    }

    fn port_id(f: &Fabric, id: DevId) -> PortId {
        f.devices[id.0 as usize].port
    }
}

impl MadDevice for SimDevice {
    fn now(&self) -> Duration {
        lock(&self.fabric).now()
    }

    fn send(&mut self, dgram: &Datagram) -> Result<(), DeviceError> {
        lock(&self.fabric).device_send(self.id, dgram)
    }

    fn recv(&mut self, deadline: Duration) -> Result<Option<Datagram>, DeviceError> {
        loop {
            let (got, now) = {
                let mut f = lock(&self.fabric);
                (f.device_recv(self.id, deadline)?, f.now())
            };
            // Paced (see Fabric::pace_to_real_time): wait in real time, with
            // the fabric unlocked so other devices can send and answer.
            if got.is_some() || now >= deadline {
                return Ok(got);
            }
            std::thread::sleep(Duration::from_millis(1).min(deadline - now));
        }
    }

    fn local_port(&self) -> LocalPort {
        let f = lock(&self.fabric);
        let pid = Self::port_id(&f, self.id);
        let mgmt = f.mgmt_port(pid);
        let node = f.node_of(pid);
        LocalPort {
            ca_name: node.name.clone(),
            port_num: self.port.port,
            port_guid: f.port(pid).guid,
            node_guid: node.guid,
            lid: f.port(mgmt).pi.lid,
            sm_lid: f.port(mgmt).pi.master_sm_lid,
        }
    }
}

impl Drop for SimDevice {
    fn drop(&mut self) {
        self.set_is_sm(false);
        let mut f = lock(&self.fabric);
        let pid = Self::port_id(&f, self.id);
        f.devices[self.id.0 as usize].attached = false;
        f.devices[self.id.0 as usize].mailbox.clear();
        if let Some(ds) = f.port_devices.get_mut(&pid) {
            ds.retain(|d| *d != self.id);
        }
    }
}
